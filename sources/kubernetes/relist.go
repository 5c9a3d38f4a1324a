package kubernetes

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

// An API server whose resource versions went back (restarted on an etcd
// restored from a snapshot, or replaced) lets a watch from the version an
// informer holds wait until it reaches that version, dropping every event
// below it: client-go never lists again, and objects created since are
// never served. The backend compares the server's current version with
// the informers' (checkVersions); an informer ahead of it lists again
// from the server's current state, its differences reaching the sources
// as events. A server that answers "Too large resource version" is taken
// the same way (client-go lists again by itself then). Until the list is
// in, the data held may be what the API server no longer has: the backend
// says so (Rereading, so /ready does). A 410 Gone, a version too old for
// the API server's window, is a watch that fell behind, not another
// server: client-go lists again, and /ready is not changed.

// errRelist ends a watch asked for while a list is due (see
// relisting.wentBack): the reflector lists next.
var errRelist = errors.New("kubernetes: the API server's resource versions went back; listing again")

// relisting is one informer's part in that: its ListerWatcher tells it of
// each refusal and each complete list.
type relisting struct {
	b        *Backend
	resource string
	inf      cache.SharedIndexInformer
	current  watch.Interface // the running watch (under b.relistMu)
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

// setCurrent records the informer's running watch (checkVersions stops
// it when the server's versions went back).
func (r *relisting) setCurrent(w watch.Interface) {
	r.b.relistMu.Lock()
	r.current = w
	r.b.relistMu.Unlock()
}

// wentBack notes that the API server is at version now, below held, the
// version the informer holds: a list is due, and the running watch, which
// would wait for versions the server has not reached (and drop every
// event below them), is stopped so that the informer lists at once.
func (r *relisting) wentBack(held, now string) {
	b := r.b
	cause := fmt.Sprintf("kubernetes %s: resource version %s is ahead of the API server (at %s: its resource versions went back): re-listing", r.resource, held, now)
	b.relistMu.Lock()
	_, had := b.relisting[r.resource]
	b.relisting[r.resource] = cause
	w := r.current
	b.relistMu.Unlock()
	if !had {
		b.logger.Warn("kubernetes API server refused the resource version held; listing again, serving the data held until done",
			"host", b.endpoint, "resource", r.resource, "resource_version", held, "server_version", now)
	}
	if w != nil {
		w.Stop()
	}
}

// versionCheckEvery is how often the backend compares the API server's
// current resource version with the informers' (and at every recovery of
// the connection, seen within versionPoll).
const (
	versionCheckEvery = 10 * time.Second
	versionPoll       = time.Second
)

// checkVersions compares, at every recovery of the connection and every
// versionCheckEvery, the API server's current resource version (a list
// of one namespace) with each informer's: an informer ahead of the server
// lists again (wentBack). The API server itself would let its watch wait
// for versions it has not reached, dropping the events below them, so
// that the objects created since it went back would never be served.
func (b *Backend) checkVersions(api API) {
	t := time.NewTicker(versionPoll)
	defer t.Stop()
	failing, since := false, time.Duration(0)
	for {
		select {
		case <-b.ctx.Done():
			return
		case <-t.C:
		}
		since += versionPoll
		was := failing
		failing = b.health.Failing()
		if failing || (!was && since < versionCheckEvery) {
			continue
		}
		since = 0
		b.compareVersions(api)
	}
}

// compareVersions is one check of checkVersions.
func (b *Backend) compareVersions(api API) {
	obj, err := cache.ToListerWatcherWithContext(api.ListWatch(resNamespace)).ListWithContext(b.ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		return // the informers' own errors say why
	}
	m, err := apimeta.ListAccessor(obj)
	if err != nil {
		return
	}
	now := m.GetResourceVersion()
	b.relistMu.Lock()
	rls := slices.Clone(b.relists)
	b.relistMu.Unlock()
	for _, r := range rls {
		held := r.inf.LastSyncResourceVersion()
		if held == "" || r.pending() {
			continue
		}
		if c, err := resourceversion.CompareResourceVersion(held, now); err == nil && c > 0 {
			r.wentBack(held, now)
		}
	}
}
