package kubernetes

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/dnsd/dnsd/internal/health"
	"github.com/dnsd/dnsd/internal/logtest"
)

// tooLarge is the error a kube-apiserver gives a list or watch from a
// resource version it has not reached.
func tooLarge(rv string) *apierrors.StatusError {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure, Code: 504, Reason: metav1.StatusReasonTimeout,
		Message: "Too large resource version: " + rv + ", current: 300",
		Details: &metav1.StatusDetails{Causes: []metav1.StatusCause{{Type: metav1.CauseTypeResourceVersionTooLarge, Message: "Too large resource version"}}},
	}}
}

// A list or watch refused for its resource version makes the backend say
// it lists again (Problem, and so /ready) until a complete list is in:
// a LIST's last page, or the end of a watch's initial events.
func TestRelistAfterResourceVersionRefused(t *testing.T) {
	var log logtest.Buffer
	logger := slog.New(slog.NewTextHandler(&log, nil))
	b := &Backend{logger: logger, health: health.New(logger), relisting: make(map[string]string), listErr: make(map[cache.SharedIndexInformer]string)}
	var listErr error
	var continued string
	fw := watch.NewFake()
	lw := patientLW{
		ListerWatcher: &cache.ListWatch{
			ListWithContextFunc: func(context.Context, metav1.ListOptions) (runtime.Object, error) {
				if listErr != nil {
					return nil, listErr
				}
				return &corev1.ServiceList{ListMeta: metav1.ListMeta{ResourceVersion: "305", Continue: continued}}, nil
			},
			WatchFuncWithContext: func(context.Context, metav1.ListOptions) (watch.Interface, error) { return fw, nil },
		},
		wait:   func() {},
		relist: &relisting{b: b, resource: resServices},
	}
	if p := b.Problem(); p != "" {
		t.Fatalf("Problem() = %q before anything", p)
	}

	// LIST from 900 refused; the next LIST's first page is not the end.
	listErr = tooLarge("900")
	if _, err := lw.List(metav1.ListOptions{ResourceVersion: "900"}); err == nil {
		t.Fatal("the refusal was not passed on")
	}
	want := "kubernetes services: resource version 900 is ahead of the API server (its resource versions went back): re-listing"
	if p := b.Problem(); p != want {
		t.Errorf("Problem() = %q, want %q", p, want)
	}
	listErr, continued = nil, "more"
	if _, err := lw.List(metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	if b.Rereading() == "" {
		t.Error("re-listing ended at the first page of the list")
	}
	continued = ""
	if _, err := lw.List(metav1.ListOptions{Continue: "more"}); err != nil {
		t.Fatal(err)
	}
	if p := b.Problem(); p != "" {
		t.Errorf("Problem() = %q after the list", p)
	}

	// A streamed list (watch with initial events) refused by an error
	// event, then done at its initial-events-end bookmark.
	yes := true
	w, err := lw.Watch(metav1.ListOptions{ResourceVersion: "901", SendInitialEvents: &yes})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	go fw.Error(&tooLarge("901").ErrStatus)
	<-w.ResultChan()
	if !strings.Contains(b.Rereading(), "resource version 901 is ahead") {
		t.Errorf("Rereading() = %q after the error event", b.Rereading())
	}
	end := &corev1.Service{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "310", Annotations: map[string]string{metav1.InitialEventsAnnotationKey: "true"}}}
	go fw.Action(watch.Bookmark, end)
	<-w.ResultChan()
	for deadline := time.Now().Add(5 * time.Second); b.Rereading() != "" && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	if r := b.Rereading(); r != "" {
		t.Errorf("Rereading() = %q after the initial events ended", r)
	}
	if n := strings.Count(log.String(), "level=WARN"); n != 2 {
		t.Errorf("%d WARN lines, want 2 (one per refusal):\n%s", n, log.String())
	}
}

// A 410 Gone (a watch that fell behind the API server's window) is not a
// server whose versions went back: nothing to report.
func TestRelistGoneIsNotReported(t *testing.T) {
	b := &Backend{logger: slog.New(slog.DiscardHandler), health: health.New(nil), relisting: make(map[string]string), listErr: make(map[cache.SharedIndexInformer]string)}
	r := &relisting{b: b, resource: resServices}
	if r.refused(apierrors.NewResourceExpired("too old resource version: 5 (300)"), "5") || b.Problem() != "" {
		t.Errorf("410 Gone reported: %q", b.Problem())
	}
	if !r.refused(tooLarge("900"), "900") || b.Rereading() == "" {
		t.Error("Too large resource version not reported")
	}
}
