package kubernetes

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dnsd/dnsd/sources/kubernetes/kubetest"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	k8s "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// TestMemoryReal (DNSD_K8S_MEM=1) measures what a synced Backend and
// Source hold over a real kube-apiserver: DNSD_K8S_MEM_SERVICES services
// (default 10,000; half ClusterIP, half headless) in 100 namespaces, each
// with one EndpointSlice of DNSD_K8S_MEM_ENDPOINTS endpoints (default 10;
// 0: no slices), as the endpoint slice controller writes them (pod
// references, node names, zones, ports). It logs the heap in use and the
// process's RSS after a GC, before the backend starts and once it has
// synced; DNSD_HEAPPROF=FILE writes the heap profile then.
func TestMemoryReal(t *testing.T) {
	if os.Getenv("DNSD_K8S_MEM") == "" {
		t.Skip("DNSD_K8S_MEM=1 runs it")
	}
	services := envInt(t, "DNSD_K8S_MEM_SERVICES", 10000)
	perService := envInt(t, "DNSD_K8S_MEM_ENDPOINTS", 10)
	c := controlPlane(t)
	start := time.Now()
	if err := createScale(c.Config, services, perService); err != nil {
		t.Fatal(err)
	}
	t.Logf("created %d services, %d endpoints each, in %s", services, perService, time.Since(start).Round(time.Second))

	baseHeap, baseRSS := heapInUse(), rssMiB(t)
	b := realBackend(t, c, false)
	start = time.Now()
	src := syncedSource(t, b, Options{Zones: realZones, TTL: 5 * time.Second}, 5*time.Minute)
	sync := time.Since(start)
	heap, rss := heapInUse(), rssMiB(t)
	if f := os.Getenv("DNSD_HEAPPROF"); f != "" {
		w, err := os.Create(f)
		if err != nil {
			t.Fatal(err)
		}
		_ = pprof.WriteHeapProfile(w)
		w.Close()
	}
	t.Logf("synced in %s: %d names; heap in use %.1f MiB (+%.1f), RSS %.1f MiB (+%.1f)",
		sync.Round(time.Millisecond), src.ix.count.Load(),
		float64(heap)/(1<<20), float64(heap-baseHeap)/(1<<20), rss, rss-baseRSS)
	runtime.KeepAlive(src)
}

func envInt(t *testing.T, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return n
}

// rssMiB is the process's resident set (VmRSS).
func rssMiB(t *testing.T) float64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		t.Skip("no /proc/self/status")
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			return float64(kb) / 1024
		}
	}
	return 0
}

// createScale creates the namespaces, services and slices of
// TestMemoryReal, 16 at a time, with a client of its own (dropped before
// measuring).
func createScale(cfg *rest.Config, services, perService int) error {
	fast := *cfg
	fast.QPS, fast.Burst = -1, 0
	k, err := k8s.NewForConfig(&fast)
	if err != nil {
		return err
	}
	ctx := context.Background()
	for n := range 100 {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "mem-" + strconv.Itoa(n)}}
		if _, err := k.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	return kubetest.Each(services, func(i int) error { return createScaleService(ctx, k, i, perService) })
}

func createScaleService(ctx context.Context, k k8s.Interface, i, perService int) error {
	ns := "mem-" + strconv.Itoa(i%100)
	name := "svc-" + strconv.Itoa(i)
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": name}},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": name},
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}},
		},
	}
	if i%2 == 1 {
		svc.Spec.ClusterIP = corev1.ClusterIPNone
	}
	if _, err := k.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		return err
	}
	if perService == 0 {
		return nil
	}
	portName, proto, portNum := "http", corev1.ProtocolTCP, int32(8080)
	sl := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name: name + "-abcde",
			Labels: map[string]string{
				discoveryv1.LabelServiceName: name,
				discoveryv1.LabelManagedBy:   "endpointslice-controller.k8s.io",
				"app":                        name,
			},
			Annotations: map[string]string{corev1.EndpointsLastChangeTriggerTime: time.Now().UTC().Format(time.RFC3339)},
		},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: &portName, Protocol: &proto, Port: &portNum}},
	}
	yes := true
	node, zone := "node-"+strconv.Itoa(i%50), "zone-"+strconv.Itoa(i%3)
	for j := range perService {
		ip := 10<<24 | 64<<16 | (i*perService + j)
		sl.Endpoints = append(sl.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{fmt.Sprintf("%d.%d.%d.%d", ip>>24&255, ip>>16&255, ip>>8&255, ip&255)},
			Conditions: discoveryv1.EndpointConditions{Ready: &yes, Serving: &yes, Terminating: new(bool)},
			NodeName:   &node,
			Zone:       &zone,
			TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: name + "-" + strconv.Itoa(j), UID: types.UID(fmt.Sprintf("3f0e8d2a-6b1c-4e1a-9c2d-%012d", i*perService+j))},
		})
	}
	_, err := k.DiscoveryV1().EndpointSlices(ns).Create(ctx, sl, metav1.CreateOptions{})
	return err
}
