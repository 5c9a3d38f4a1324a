package kubernetes

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"

	"github.com/dnsd/dnsd/internal/dnstest"
	"github.com/dnsd/dnsd/internal/pacing/pacingtest"
)

// After the first sync, the batch of every service changed at once (what
// an informer's re-list of the cluster makes) gives way to the queries on
// one processor and is a burst of background work (kind.Bulk). The first
// sync and a single change are neither, and nothing is paced with two
// processors.
func TestBatchPacedOnOneProcessor(t *testing.T) {
	const services = 3000
	objs := []k8sruntime.Object{namespace("ns")}
	for i := range services {
		objs = append(objs, clusterIPService("ns", fmt.Sprintf("s%d", i), []string{fmt.Sprintf("10.96.%d.%d", i>>8, i&255)}))
	}
	for _, procs := range []int{1, 2} {
		t.Run(fmt.Sprint(procs), func(t *testing.T) {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
			var begun, ended atomic.Int64
			var slept pacingtest.Sleeps
			src, client := fakeSource(t, Options{
				Zones: []string{"cluster.local."},
				sleep: slept.Sleep,
				Bulk: func() func() {
					begun.Add(1)
					return func() { ended.Add(1) }
				},
			}, objs...)
			p := newPipeline(t, src, "cluster.local.")
			check := func(what string, paced bool, bursts int64) {
				t.Helper()
				slept.Expect(t, what, paced)
				if b, e := begun.Load(), ended.Load(); b != bursts || e != bursts {
					t.Errorf("after %s: %d bursts begun, %d ended; want %d", what, b, e, bursts)
				}
			}
			check("the first sync", false, 0)

			if _, err := client.CoreV1().Services("ns").Create(context.Background(),
				clusterIPService("ns", "new", []string{"10.97.0.1"}), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			dnstest.EventuallyNil(t, 5*time.Second, expect(p, "new.ns.svc.cluster.local.", dns.TypeA, "NOERROR new.ns.svc.cluster.local. A 10.97.0.1"))
			check("one change", false, 0)

			// Every service marked changed in one batch, as a re-list's
			// updates mark them.
			src.mu.Lock()
			now := time.Now()
			for i := range services {
				src.dirty[objKey{kindService, fmt.Sprintf("ns/s%d", i)}] = now
			}
			src.mu.Unlock()
			src.wake <- struct{}{}
			for deadline := time.Now().Add(10 * time.Second); ended.Load() < 1 && time.Now().Before(deadline); {
				time.Sleep(time.Millisecond)
			}
			check("a batch of every service", true, 1)
			last := fmt.Sprintf("s%d.ns.svc.cluster.local.", services-1)
			dnstest.EventuallyNil(t, time.Second, expect(p, last, dns.TypeA,
				fmt.Sprintf("NOERROR %s A 10.96.%d.%d", last, (services-1)>>8, (services-1)&255)))
		})
	}
}
