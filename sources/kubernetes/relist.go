package kubernetes

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// An API server whose resource versions went back (its etcd restored
// from a snapshot or replaced, the API server restarted) answers a list
// or watch from the resource version an informer holds with "Too large
// resource version". client-go's reflector then lists again from scratch
// and replaces its store, whose differences reach the sources as events.
// Until that list is in, the data held may be what the API server no
// longer has: the backend says so (Rereading, so /ready does) from the
// refusal to the end of the list. (A 410 Gone, a version too old for the
// API server's window, is a watch that fell behind, not another server:
// client-go lists again as well, and /ready is not changed.)

// relisting is one informer's part in that: its ListerWatcher tells it of
// each refusal and each complete list.
type relisting struct {
	b        *Backend
	resource string
}

// refused notes a list or watch refused for its resource version rv;
// false when err is not such a refusal.
func (r *relisting) refused(err error, rv string) bool {
	if err == nil || !tooLargeVersion(err) {
		return false
	}
	cause := fmt.Sprintf("kubernetes %s: resource version %s is ahead of the API server (its resource versions went back): re-listing", r.resource, rv)
	b := r.b
	b.relistMu.Lock()
	prev, had := b.relisting[r.resource]
	b.relisting[r.resource] = cause
	b.relistMu.Unlock()
	if !had || prev != cause {
		b.logger.Warn("kubernetes API server refused the resource version held; listing again, serving the data held until done",
			"host", b.endpoint, "resource", r.resource, "resource_version", rv, "err", err.Error())
	}
	return true
}

// listed notes a complete list (a LIST answered, or a watch's initial
// events ended).
func (r *relisting) listed() {
	b := r.b
	b.relistMu.Lock()
	prev, had := b.relisting[r.resource]
	delete(b.relisting, r.resource)
	b.relistMu.Unlock()
	if had {
		b.logger.Info("kubernetes list done; serving what the API server holds", "host", b.endpoint, "resource", r.resource, "previous_cause", prev)
	}
}

// watching follows a watch's events for a refusal (an error event) and,
// for a watch that streams its initial list, for the end of that list.
func (r *relisting) watching(w watch.Interface, options metav1.ListOptions) watch.Interface {
	initial := options.SendInitialEvents != nil && *options.SendInitialEvents
	return watch.Filter(w, func(ev watch.Event) (watch.Event, bool) {
		switch ev.Type {
		case watch.Error:
			r.refused(apierrors.FromObject(ev.Object), options.ResourceVersion)
		case watch.Bookmark:
			if initial && initialEventsEnd(ev.Object) {
				r.listed()
			}
		}
		return ev, true
	})
}

func initialEventsEnd(obj any) bool {
	m, ok := obj.(metav1.Object)
	return ok && m.GetAnnotations()[metav1.InitialEventsAnnotationKey] == "true"
}

// tooLargeVersion is client-go's test for "Too large resource version".
func tooLargeVersion(err error) bool {
	if apierrors.HasStatusCause(err, metav1.CauseTypeResourceVersionTooLarge) {
		return true
	}
	var st apierrors.APIStatus
	return apierrors.IsTimeout(err) && errors.As(err, &st) && strings.Contains(st.Status().Message, "Too large resource version")
}

// Rereading is why informers are listing again after the API server
// refused their resource versions (one line per resource), "" when none
// is. Meanwhile the data held keeps being served.
func (b *Backend) Rereading() string {
	b.relistMu.Lock()
	defer b.relistMu.Unlock()
	if len(b.relisting) == 0 {
		return ""
	}
	causes := make([]string, 0, len(b.relisting))
	for _, c := range b.relisting {
		causes = append(causes, c)
	}
	slices.Sort(causes)
	return strings.Join(causes, "; ")
}

// pending reports whether a list is due for the resource.
func (r *relisting) pending() bool {
	r.b.relistMu.Lock()
	defer r.b.relistMu.Unlock()
	_, ok := r.b.relisting[r.resource]
	return ok
}
