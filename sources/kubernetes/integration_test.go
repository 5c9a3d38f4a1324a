package kubernetes

// Integration tests against a real kube-apiserver (kubetest): objects are
// created through the API, dnsd's source watches them through a kubeconfig
// file like a user's.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dnsd/dnsd/internal/dnstest"
	"github.com/dnsd/dnsd/pipeline"
	"github.com/dnsd/dnsd/sources/kubernetes/kubetest"
)

var realZones = []string{"cluster.local.", "in-addr.arpa.", "ip6.arpa."}

// realBackend connects to the control plane through its kubeconfig file.
func realBackend(t *testing.T, c *kubetest.ControlPlane, pods bool) *Backend {
	t.Helper()
	rc, err := RESTConfig(ClientConfig{Kubeconfig: c.Kubeconfig, Context: "test", UserAgent: "dnsd-test"})
	if err != nil {
		t.Fatal(err)
	}
	api, err := NewAPI(rc)
	if err != nil {
		t.Fatal(err)
	}
	b := NewBackend(api, BackendOptions{Pods: pods})
	t.Cleanup(func() { b.Close() })
	return b
}

func realSource(t *testing.T, b *Backend, opts Options) (*Source, *pipeline.Pipeline) {
	t.Helper()
	src := syncedSource(t, b, opts, 20*time.Second)
	return src, newPipeline(t, src, opts.Zones...)
}

func must[T any](t *testing.T) func(T, error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

// propagated waits for an answer and reports how long it took.
func propagated(t *testing.T, p *pipeline.Pipeline, name string, qtype uint16, want string) time.Duration {
	t.Helper()
	start := time.Now()
	dnstest.EventuallyNil(t, 5*time.Second, expect(p, name, qtype, want))
	return time.Since(start)
}

func TestIntegrationRecords(t *testing.T) {
	c := controlPlane(t)
	ns := testNamespace(t, c.Client)
	ctx := context.Background()
	svcs := c.Client.CoreV1().Services(ns)
	slices := c.Client.DiscoveryV1().EndpointSlices(ns)

	web := must[*corev1.Service](t)(svcs.Create(ctx, clusterIPService(ns, "web", nil,
		port{name: "http", port: 80}, port{name: "dns", proto: corev1.ProtocolUDP, port: 53}), metav1.CreateOptions{}))
	// A single port may be unnamed: SRV on the service name only.
	plain := must[*corev1.Service](t)(svcs.Create(ctx, clusterIPService(ns, "plain", nil, port{port: 8080}), metav1.CreateOptions{}))
	dual := clusterIPService(ns, "dual", nil, port{name: "http", port: 80})
	policy := corev1.IPFamilyPolicyRequireDualStack
	dual.Spec.IPFamilyPolicy = &policy
	dual = must[*corev1.Service](t)(svcs.Create(ctx, dual, metav1.CreateOptions{}))
	if len(dual.Spec.ClusterIPs) != 2 {
		t.Fatalf("dual-stack service got %v", dual.Spec.ClusterIPs)
	}
	tcp := []port{{name: "peer", port: 2380}}
	must[*corev1.Service](t)(svcs.Create(ctx, headlessService(ns, "db", tcp...), metav1.CreateOptions{}))
	must[*discoveryv1.EndpointSlice](t)(slices.Create(ctx, endpointSlice(ns, "db", "db-a", discoveryv1.AddressTypeIPv4, tcp,
		ep{ip: "10.244.0.10", ready: true, hostname: "db-0"},
		ep{ip: "10.244.0.11", ready: false, hostname: "db-1"}), metav1.CreateOptions{}))
	must[*discoveryv1.EndpointSlice](t)(slices.Create(ctx, endpointSlice(ns, "db", "db-b", discoveryv1.AddressTypeIPv4, tcp,
		ep{ip: "10.244.0.12", ready: true, hostname: "db-2"}), metav1.CreateOptions{}))
	must[*discoveryv1.EndpointSlice](t)(slices.Create(ctx, endpointSlice(ns, "db", "db-c", discoveryv1.AddressTypeIPv6, tcp,
		ep{ip: "fd00:244::10", ready: true, hostname: "db-0"}), metav1.CreateOptions{}))
	must[*corev1.Service](t)(svcs.Create(ctx, externalNameService(ns, "ext", "www.example.com"), metav1.CreateOptions{}))
	lb := clusterIPService(ns, "lb", nil, port{name: "http", port: 80})
	lb.Spec.Type = corev1.ServiceTypeLoadBalancer
	lb.Spec.ExternalIPs = []string{"192.0.2.7"}
	lb = must[*corev1.Service](t)(svcs.Create(ctx, lb, metav1.CreateOptions{}))
	// The external names are read from every namespace: with -count=N
	// on one control plane, a load balancer left by an earlier run would
	// answer for the same addresses.
	t.Cleanup(func() { _ = svcs.Delete(context.Background(), "lb", metav1.DeleteOptions{}) })
	lb.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "198.51.100.1"}}
	lb = must[*corev1.Service](t)(svcs.UpdateStatus(ctx, lb, metav1.UpdateOptions{}))
	p1 := must[*corev1.Pod](t)(c.Client.CoreV1().Pods(ns).Create(ctx, pod(ns, "p1", ""), metav1.CreateOptions{}))
	p1.Status = pod(ns, "p1", corev1.PodRunning, "10.244.1.7", "fd00:244::1:7").Status
	must[*corev1.Pod](t)(c.Client.CoreV1().Pods(ns).UpdateStatus(ctx, p1, metav1.UpdateOptions{}))

	// Two sources over one backend (one connection, shared informers):
	// cluster names with verified pods, and expose: external. The backend
	// was opened without a pod watch: the source with pods: verified
	// starts one on it.
	b := realBackend(t, c, false)
	if len(b.informers()) != 3 {
		t.Fatalf("a backend opened without pods watches %d resources, want 3", len(b.informers()))
	}
	_, p := realSource(t, b, Options{Zones: realZones, TTL: 5 * time.Second, Pods: PodsVerified, Namespaces: []string{ns, "default"}})
	if len(b.informers()) != 4 {
		t.Fatalf("after a pods: verified source: %d informers, want 4 (the pod watch added)", len(b.informers()))
	}
	_, px := realSource(t, b, Options{Zones: []string{"example.com.", "in-addr.arpa."}, External: true})

	z := "." + ns + ".svc.cluster.local."
	webIP := web.Spec.ClusterIP
	d4, d6 := dual.Spec.ClusterIPs[0], dual.Spec.ClusterIPs[1]
	ptr := func(ip string) string { r, _ := dns.ReverseAddr(ip); return r }
	for _, tc := range []struct {
		name  string
		qtype uint16
		want  string
	}{
		{"kubernetes.default.svc.cluster.local.", dns.TypeA, "NOERROR kubernetes.default.svc.cluster.local. A 10.3.0.1"},
		{"web" + z, dns.TypeA, "NOERROR web" + z + " A " + webIP},
		{"web" + z, dns.TypeAAAA, "NOERROR "},
		{"_http._tcp.web" + z, dns.TypeSRV, "NOERROR _http._tcp.web" + z + " SRV 0 100 80 web" + z},
		{"_dns._udp.web" + z, dns.TypeSRV, "NOERROR _dns._udp.web" + z + " SRV 0 100 53 web" + z},
		{"web" + z, dns.TypeSRV, fmt.Sprintf("NOERROR web%[1]s SRV 0 100 53 web%[1]s; web%[1]s SRV 0 100 80 web%[1]s", z)},
		{"plain" + z, dns.TypeSRV, "NOERROR "}, // an unnamed port has no SRV record
		{"plain" + z, dns.TypeA, "NOERROR plain" + z + " A " + plain.Spec.ClusterIP},
		{"_tcp.plain" + z, dns.TypeSRV, "NXDOMAIN "},
		{ptr(webIP), dns.TypePTR, "NOERROR " + ptr(webIP) + " PTR web" + z},
		{"dual" + z, dns.TypeA, "NOERROR dual" + z + " A " + d4},
		{"dual" + z, dns.TypeAAAA, "NOERROR dual" + z + " AAAA " + d6},
		{ptr(d6), dns.TypePTR, "NOERROR " + ptr(d6) + " PTR dual" + z},
		{"db" + z, dns.TypeA, "NOERROR db" + z + " A 10.244.0.10; db" + z + " A 10.244.0.12"},
		{"db" + z, dns.TypeAAAA, "NOERROR db" + z + " AAAA fd00:244::10"},
		{"db-0.db" + z, dns.TypeAAAA, "NOERROR db-0.db" + z + " AAAA fd00:244::10"},
		{"db-1.db" + z, dns.TypeA, "NXDOMAIN "},
		{"_peer._tcp.db" + z, dns.TypeSRV, fmt.Sprintf("NOERROR _peer._tcp.db%[1]s SRV 0 100 2380 db-0.db%[1]s; _peer._tcp.db%[1]s SRV 0 100 2380 db-2.db%[1]s", z)},
		{ptr("10.244.0.12"), dns.TypePTR, "NOERROR " + ptr("10.244.0.12") + " PTR db-2.db" + z},
		{"ext" + z, dns.TypeCNAME, "NOERROR ext" + z + " CNAME www.example.com."},
		{"lb" + z, dns.TypeA, "NOERROR lb" + z + " A " + lb.Spec.ClusterIP},
		{"10-244-1-7." + ns + ".pod.cluster.local.", dns.TypeA, "NOERROR 10-244-1-7." + ns + ".pod.cluster.local. A 10.244.1.7"},
		{"fd00-244--1-7." + ns + ".pod.cluster.local.", dns.TypeAAAA, "NOERROR fd00-244--1-7." + ns + ".pod.cluster.local. AAAA fd00:244::1:7"},
		{"10-244-1-8." + ns + ".pod.cluster.local.", dns.TypeA, "NXDOMAIN "},
		{ns + ".svc.cluster.local.", dns.TypeA, "NOERROR "},
		{"kube-system.svc.cluster.local.", dns.TypeA, "NXDOMAIN "}, // namespaces filter
	} {
		if got := render(resolve(p, tc.name, tc.qtype)); got != tc.want {
			t.Errorf("%s %s:\n got %s\nwant %s", tc.name, dns.TypeToString[tc.qtype], got, tc.want)
		}
	}
	xz := "lb." + ns + ".example.com."
	for _, tc := range []struct {
		name  string
		qtype uint16
		want  string
	}{
		{xz, dns.TypeA, "NOERROR " + xz + " A 192.0.2.7; " + xz + " A 198.51.100.1"},
		{ptr("198.51.100.1"), dns.TypePTR, "NOERROR " + ptr("198.51.100.1") + " PTR " + xz},
		{"web." + ns + ".example.com.", dns.TypeA, "NXDOMAIN "},
		{ptr(webIP), dns.TypePTR, "NXDOMAIN "},
	} {
		if got := render(resolve(px, tc.name, tc.qtype)); got != tc.want {
			t.Errorf("external %s %s:\n got %s\nwant %s", tc.name, dns.TypeToString[tc.qtype], got, tc.want)
		}
	}

	// Propagation: each change is served within a second (generous bound:
	// 5 s; the observed times are logged).
	var lat []string
	note := func(what string, d time.Duration) {
		lat = append(lat, fmt.Sprintf("%s %s", what, d.Round(time.Millisecond)))
	}
	sl := must[*discoveryv1.EndpointSlice](t)(slices.Get(ctx, "db-a", metav1.GetOptions{}))
	yes := true
	sl.Endpoints[1].Conditions.Ready = &yes
	must[*discoveryv1.EndpointSlice](t)(slices.Update(ctx, sl, metav1.UpdateOptions{}))
	note("endpoint ready", propagated(t, p, "db-1.db"+z, dns.TypeA, "NOERROR db-1.db"+z+" A 10.244.0.11"))
	if err := slices.Delete(ctx, "db-b", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	note("slice deleted", propagated(t, p, "db-2.db"+z, dns.TypeA, "NXDOMAIN "))
	must[*corev1.Service](t)(svcs.Create(ctx, clusterIPService(ns, "late", nil, port{name: "http", port: 80}), metav1.CreateOptions{}))
	dnstest.EventuallyNil(t, 5*time.Second, func() error {
		if m := resolve(p, "late"+z, dns.TypeA); m.Rcode != dns.RcodeSuccess || len(m.Answer) != 1 {
			return errors.New("late service not served: " + render(m))
		}
		return nil
	})
	ext := must[*corev1.Service](t)(svcs.Get(ctx, "ext", metav1.GetOptions{}))
	ext.Spec.ExternalName = "other.example.org"
	must[*corev1.Service](t)(svcs.Update(ctx, ext, metav1.UpdateOptions{}))
	note("externalName changed", propagated(t, p, "ext"+z, dns.TypeCNAME, "NOERROR ext"+z+" CNAME other.example.org."))
	if err := svcs.Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	note("service deleted", propagated(t, p, "_http._tcp.web"+z, dns.TypeSRV, "NXDOMAIN "))
	dnstest.EventuallyNil(t, 5*time.Second, expect(p, ptr(webIP), dns.TypePTR, "NXDOMAIN "))
	if err := c.Client.CoreV1().Pods(ns).Delete(ctx, "p1", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	note("pod deleted", propagated(t, p, "10-244-1-7."+ns+".pod.cluster.local.", dns.TypeA, "NXDOMAIN "))
	t.Logf("propagation: %s", strings.Join(lat, ", "))
}

// The API server goes away while dnsd serves, and comes back; a source
// started during the outage answers SERVFAIL, then syncs by itself.
func TestIntegrationOutage(t *testing.T) {
	c := controlPlane(t)
	ns := testNamespace(t, c.Client)
	ctx := context.Background()
	svcs := c.Client.CoreV1().Services(ns)
	svc := must[*corev1.Service](t)(svcs.Create(ctx, clusterIPService(ns, "before", nil, port{name: "http", port: 80}), metav1.CreateOptions{}))
	z := "." + ns + ".svc.cluster.local."

	b := realBackend(t, c, false)
	_, p := realSource(t, b, Options{Zones: realZones})
	want := "NOERROR before" + z + " A " + svc.Spec.ClusterIP
	dnstest.EventuallyNil(t, 5*time.Second, expect(p, "before"+z, dns.TypeA, want))

	c.StopAPIServer()
	restarted := false
	defer func() {
		if !restarted {
			if err := c.StartAPIServer(); err != nil {
				t.Errorf("restarting the API server: %v", err)
			}
		}
	}()
	// Outage: the last known state is still served, for a while.
	for i := 0; i < 10; i++ {
		if got := render(resolve(p, "before"+z, dns.TypeA)); got != want {
			t.Fatalf("during the outage: %s, want %s", got, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// A source opened now does not block and answers SERVFAIL.
	b2 := realBackend(t, c, false)
	start := time.Now()
	src2, err := NewSource(b2, Options{Zones: realZones})
	if err != nil {
		t.Fatal(err)
	}
	defer src2.Close()
	if d := time.Since(start); d > time.Second {
		t.Errorf("opening a source with the API down took %s", d)
	}
	p2 := newPipeline(t, src2, realZones...)
	if m := resolve(p2, "before"+z, dns.TypeA); m.Rcode != dns.RcodeServerFailure {
		t.Fatalf("not synced: %s, want SERVFAIL", render(m))
	}
	if src2.Synced() {
		t.Fatal("synced with the API down")
	}

	if err := c.StartAPIServer(); err != nil {
		t.Fatal(err)
	}
	restarted = true
	// Recovery without a restart: new objects reach both sources.
	after := must[*corev1.Service](t)(svcs.Create(ctx, clusterIPService(ns, "after", nil, port{name: "http", port: 80}), metav1.CreateOptions{}))
	wantAfter := "NOERROR after" + z + " A " + after.Spec.ClusterIP
	dnstest.EventuallyNil(t, 60*time.Second, expect(p, "after"+z, dns.TypeA, wantAfter))
	ctx2, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := src2.WaitSynced(ctx2); err != nil {
		t.Fatalf("source opened during the outage never synced: %v", err)
	}
	dnstest.EventuallyNil(t, 5*time.Second, expect(p2, "after"+z, dns.TypeA, wantAfter))
	dnstest.EventuallyNil(t, 5*time.Second, expect(p2, "before"+z, dns.TypeA, want))
	// And deletions after the reconnection.
	if err := svcs.Delete(ctx, "before", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	dnstest.EventuallyNil(t, 5*time.Second, expect(p, "before"+z, dns.TypeA, "NXDOMAIN "))
}
