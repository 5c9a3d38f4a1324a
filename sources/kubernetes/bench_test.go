package kubernetes

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"testing"
	"time"

	"github.com/miekg/dns"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/dnsd/dnsd/pipeline"
)

// scaleCluster is services services (half ClusterIP, half headless) in
// 100 namespaces, each with one EndpointSlice of perService ready
// endpoints (pod IPs, no hostnames: dashed-IP names) and one named port.
func scaleCluster(services, perService int) []k8sruntime.Object {
	objs := make([]k8sruntime.Object, 0, 2*services+100)
	for n := range 100 {
		objs = append(objs, namespace("ns-"+strconv.Itoa(n)))
	}
	http := []port{{name: "http", port: 8080}}
	ip := uint32(10<<24 | 1<<16) // 10.1.0.0 and up: endpoint IPs
	for i := range services {
		ns := "ns-" + strconv.Itoa(i%100)
		name := "svc-" + strconv.Itoa(i)
		if i%2 == 0 {
			svcIP := fmt.Sprintf("10.96.%d.%d", i/250, i%250+1)
			objs = append(objs, clusterIPService(ns, name, []string{svcIP}, port{name: "http", port: 80}))
		} else {
			objs = append(objs, headlessService(ns, name, port{name: "http", port: 80}))
		}
		eps := make([]ep, perService)
		for j := range eps {
			a := netip.AddrFrom4([4]byte{byte(ip >> 24), byte(ip >> 16), byte(ip >> 8), byte(ip)})
			ip++
			eps[j] = ep{ip: a.String(), ready: true, pod: name + "-" + strconv.Itoa(j)}
		}
		objs = append(objs, endpointSlice(ns, name, name+"-abcde", discoveryv1.AddressTypeIPv4, http, eps...))
	}
	return objs
}

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}

// BenchmarkScale loads 10,000 services / 100,000 endpoints and
// reports the time to the first sync and the heap the informer stores and
// the index hold (measured after the fake clientset is loaded, so its own
// copy of the objects is not counted).
func BenchmarkScale(b *testing.B) {
	for range b.N {
		b.StopTimer()
		client := fake.NewClientset(scaleCluster(10000, 10)...)
		base := heapInUse()
		b.StartTimer()
		start := time.Now()
		be := NewBackend(clientsetAPI{client}, BackendOptions{})
		src, err := NewSource(be, Options{Zones: []string{"cluster.local.", "10.in-addr.arpa."}, TTL: 5 * time.Second})
		if err != nil {
			b.Fatal(err)
		}
		if err := src.WaitSynced(context.Background()); err != nil {
			b.Fatal(err)
		}
		if err := src.waitApplied(context.Background()); err != nil {
			b.Fatal(err)
		}
		sync := time.Since(start)
		b.StopTimer()
		held := heapInUse()
		// DNSD_HEAPPROF=FILE writes the heap profile at this point.
		if f := os.Getenv("DNSD_HEAPPROF"); f != "" {
			w, _ := os.Create(f)
			_ = pprof.WriteHeapProfile(w)
			w.Close()
		}
		names := src.ix.count.Load()
		runtime.KeepAlive(client)
		src.Close()
		be.Close()
		b.ReportMetric(sync.Seconds(), "sync-s")
		b.ReportMetric(float64(names), "names")
		b.ReportMetric(float64(held-base)/(1<<20), "heap-MiB")
		b.StartTimer()
	}
}

// BenchmarkApplyService is the cost of one service event (10 endpoints)
// in a small and a large cluster: it does not grow with the cluster.
func BenchmarkApplyService(b *testing.B) {
	for _, size := range []int{100, 10000} {
		b.Run(fmt.Sprintf("services=%d", size), func(b *testing.B) {
			src, _ := fakeSource(b, Options{Zones: []string{"cluster.local.", "10.in-addr.arpa."}}, scaleCluster(size, 10)...)
			keys := []objKey{{kindService, "ns-1/svc-1"}, {kindService, "ns-2/svc-2"}} // headless, ClusterIP
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				src.apply(keys[i%2])
			}
		})
	}
}

// BenchmarkLookup: hits allocate nothing inside the source.
func BenchmarkLookup(b *testing.B) {
	src, _ := fakeSource(b, Options{Zones: []string{"cluster.local.", "10.in-addr.arpa."}}, scaleCluster(1000, 10)...)
	for _, name := range []string{"svc-2.ns-2.svc.cluster.local.", "10-1-0-25.svc-2.ns-2.svc.cluster.local.", "nope.ns-2.svc.cluster.local."} {
		b.Run(name, func(b *testing.B) {
			q := &pipeline.Question{Name: name, Type: dns.TypeA, Zone: "cluster.local."}
			b.ReportAllocs()
			for range b.N {
				src.Lookup(context.Background(), q)
			}
		})
	}
}

// BenchmarkProgrammingLatency: an EndpointSlice update through the
// (in-process) API until its record is served.
func BenchmarkProgrammingLatency(b *testing.B) {
	src, client := fakeSource(b, Options{Zones: []string{"cluster.local."}}, scaleCluster(1000, 10)...)
	slices := client.DiscoveryV1().EndpointSlices("ns-3")
	sl, err := slices.Get(context.Background(), "svc-3-abcde", metav1.GetOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := range b.N {
		host := "h" + strconv.Itoa(i)
		sl.Endpoints[0].Hostname = &host
		if sl, err = slices.Update(context.Background(), sl, metav1.UpdateOptions{}); err != nil {
			b.Fatal(err)
		}
		name := host + ".svc-3.ns-3.svc.cluster.local."
		for {
			if _, ok := src.ix.lookup(name); ok {
				break
			}
			runtime.Gosched()
		}
	}
}
