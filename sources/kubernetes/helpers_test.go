package kubernetes

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	k8s "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"

	"github.com/dnsd/dnsd/pipeline"
)

// Object constructors shared by the unit, integration and conformance
// tests.

func namespace(name string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

type port struct {
	name  string
	proto corev1.Protocol
	port  int32
}

func servicePorts(ps []port) []corev1.ServicePort {
	var out []corev1.ServicePort
	for _, p := range ps {
		proto := p.proto
		if proto == "" {
			proto = corev1.ProtocolTCP
		}
		out = append(out, corev1.ServicePort{Name: p.name, Protocol: proto, Port: p.port})
	}
	return out
}

// clusterIPService is a ClusterIP service with the given IPs (first =
// primary family).
func clusterIPService(ns, name string, ips []string, ports ...port) *corev1.Service {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.ServiceSpec{
			Type:  corev1.ServiceTypeClusterIP,
			Ports: servicePorts(ports),
		},
	}
	if len(ips) > 0 {
		svc.Spec.ClusterIP = ips[0]
		svc.Spec.ClusterIPs = ips
		for _, ip := range ips {
			if strings.Contains(ip, ":") {
				svc.Spec.IPFamilies = append(svc.Spec.IPFamilies, corev1.IPv6Protocol)
			} else {
				svc.Spec.IPFamilies = append(svc.Spec.IPFamilies, corev1.IPv4Protocol)
			}
		}
		if len(ips) > 1 {
			p := corev1.IPFamilyPolicyRequireDualStack
			svc.Spec.IPFamilyPolicy = &p
		}
	}
	return svc
}

func headlessService(ns, name string, ports ...port) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.ServiceSpec{
			Type:      corev1.ServiceTypeClusterIP,
			ClusterIP: corev1.ClusterIPNone,
			Ports:     servicePorts(ports),
		},
	}
}

func externalNameService(ns, name, target string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: target},
	}
}

// ep is an endpoint of a slice.
type ep struct {
	ip       string
	ready    bool
	hostname string
	pod      string // targetRef pod name
}

func endpointSlice(ns, svc, name string, family discoveryv1.AddressType, ports []port, eps ...ep) *discoveryv1.EndpointSlice {
	sl := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: name,
			Labels: map[string]string{discoveryv1.LabelServiceName: svc},
		},
		AddressType: family,
	}
	for _, p := range ports {
		name, proto, num := p.name, p.proto, p.port
		if proto == "" {
			proto = corev1.ProtocolTCP
		}
		sl.Ports = append(sl.Ports, discoveryv1.EndpointPort{Name: &name, Protocol: &proto, Port: &num})
	}
	for _, e := range eps {
		ready := e.ready
		x := discoveryv1.Endpoint{Addresses: []string{e.ip}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}
		if e.hostname != "" {
			h := e.hostname
			x.Hostname = &h
		}
		if e.pod != "" {
			x.TargetRef = &corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: e.pod}
		}
		sl.Endpoints = append(sl.Endpoints, x)
	}
	return sl
}

func pod(ns, name string, phase corev1.PodPhase, ips ...string) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
		Status:     corev1.PodStatus{Phase: phase},
	}
	for i, ip := range ips {
		if i == 0 {
			p.Status.PodIP = ip
		}
		p.Status.PodIPs = append(p.Status.PodIPs, corev1.PodIP{IP: ip})
	}
	return p
}

// clientsetAPI is the API over a generated clientset (the tests' fake
// one); dnsd itself talks REST (NewAPI) without linking a clientset.
type clientsetAPI struct{ cs k8s.Interface }

func (a clientsetAPI) ListWatch(resource string) cache.ListerWatcher {
	var lw *cache.ListWatch
	switch resource {
	case resServices:
		lw = typedListWatch[*corev1.ServiceList](a.cs.CoreV1().Services(""))
	case resSlices:
		lw = typedListWatch[*discoveryv1.EndpointSliceList](a.cs.DiscoveryV1().EndpointSlices(""))
	case resNamespace:
		lw = typedListWatch[*corev1.NamespaceList](a.cs.CoreV1().Namespaces())
	case resPods:
		lw = typedListWatch[*corev1.PodList](a.cs.CoreV1().Pods(""))
	default:
		panic(resource)
	}
	return cache.ToListWatcherWithWatchListSemantics(lw, a.cs)
}

// typedClient is what a generated client of one resource offers.
type typedClient[L runtime.Object] interface {
	List(context.Context, metav1.ListOptions) (L, error)
	Watch(context.Context, metav1.ListOptions) (watch.Interface, error)
}

func typedListWatch[L runtime.Object](c typedClient[L]) *cache.ListWatch {
	return &cache.ListWatch{
		ListWithContextFunc:  func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return c.List(ctx, o) },
		WatchFuncWithContext: c.Watch,
	}
}

// fakeSource runs a Source over a fake clientset holding objs and waits
// for its sync.
func fakeSource(t testing.TB, opts Options, objs ...runtime.Object) (*Source, *fake.Clientset) {
	t.Helper()
	client := fake.NewClientset(objs...)
	b := NewBackend(clientsetAPI{client}, BackendOptions{Pods: opts.Pods == PodsVerified})
	t.Cleanup(func() { b.Close() })
	return syncedSource(t, b, opts, 10*time.Second), client
}

// syncedSource makes a Source over b, closed when the test ends, and waits
// up to limit for its first sync.
func syncedSource(t testing.TB, b *Backend, opts Options, limit time.Duration) *Source {
	t.Helper()
	src, err := NewSource(b, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	if err := src.WaitSynced(ctx); err != nil {
		t.Fatalf("source never synced: %v", err)
	}
	if err := src.waitApplied(ctx); err != nil {
		t.Fatalf("the first sync's services were never applied: %v", err)
	}
	return src
}

// newPipeline serves src for its zones, with fallthrough off (the
// kubernetes default).
func newPipeline(t testing.TB, src pipeline.Source, zones ...string) *pipeline.Pipeline {
	t.Helper()
	p, err := pipeline.New([]pipeline.ZoneSpec{{Names: zones, Sources: []pipeline.SourceEntry{{Source: src}}}}, pipeline.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// resolve asks p and renders the answer as "RCODE rr; rr" with the
// records' owner, type and data (no TTL or class), sorted.
func resolve(p *pipeline.Pipeline, name string, qtype uint16) *dns.Msg {
	name = strings.ToLower(dns.Fqdn(name))
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	return p.Resolve(context.Background(), &pipeline.Request{Msg: m, Name: name, Type: qtype}).Msg
}

// render shows a response as "RCODE" then the answer records as
// "owner TYPE rdata", sorted, joined by "; ".
func render(m *dns.Msg) string {
	return dns.RcodeToString[m.Rcode] + " " + strings.Join(rrStrings(m.Answer), "; ")
}

func rrStrings(rrs []dns.RR) []string {
	var out []string
	for _, rr := range rrs {
		out = append(out, rrString(rr))
	}
	slices.Sort(out)
	return out
}

// rrString is "owner TYPE rdata" without TTL and class.
func rrString(rr dns.RR) string {
	f := strings.Fields(rr.String())
	return strings.Join(append([]string{f[0], f[3]}, f[4:]...), " ")
}

func expect(p *pipeline.Pipeline, name string, qtype uint16, want string) func() error {
	return func() error {
		if got := render(resolve(p, name, qtype)); got != want {
			return fmt.Errorf("%s %s:\n got %s\nwant %s", name, dns.TypeToString[qtype], got, want)
		}
		return nil
	}
}
