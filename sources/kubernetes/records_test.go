package kubernetes

import (
	"context"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/dnsd/dnsd/internal/dnstest"
	"github.com/dnsd/dnsd/pipeline"
)

const zones = "cluster.local."

var allZones = []string{"cluster.local.", "10.in-addr.arpa.", "ip6.arpa."}

func TestDashedAndUndash(t *testing.T) {
	for _, tc := range []struct {
		addr, label string
	}{
		{"10.244.4.10", "10-244-4-10"},
		{"0.0.0.0", "0-0-0-0"},
		{"fd00:10:244::5", "fd00-10-244--5"},
		{"2001:db8::1", "2001-db8--1"},
		{"::1", "--1"},
	} {
		a := netip.MustParseAddr(tc.addr)
		if got := dashed(a); got != tc.label {
			t.Errorf("dashed(%s) = %q, want %q", tc.addr, got, tc.label)
		}
		back, ok := undash(tc.label)
		if !ok || back != a {
			t.Errorf("undash(%q) = %v %v, want %s", tc.label, back, ok, a)
		}
	}
	for _, label := range []string{"", "1-2-3", "1-2-3-4-5", "256-1-1-1", "a-b-c-d", "x", "1-2-3-04x", "fe80--1%eth0", "--ffff-a00-1"} {
		if a, ok := undash(label); ok {
			t.Errorf("undash(%q) = %v, want not an address", label, a)
		}
	}
	// Full IPv6 form is accepted too.
	if a, ok := undash("2001-0db8-0000-0000-0000-0000-0000-0001"); !ok || a != netip.MustParseAddr("2001:db8::1") {
		t.Errorf("undash(full form) = %v %v", a, ok)
	}
}

func TestPodName(t *testing.T) {
	for _, tc := range []struct {
		name, zone string
		want       string // "" = not a pod name
	}{
		{"1-2-3-4.default.pod.cluster.local.", "cluster.local.", "1.2.3.4"},
		{"fd00-1--2.ns.pod.cluster.local.", "cluster.local.", "fd00:1::2"},
		{"1-2-3-4.pod.cluster.local.", "cluster.local.", ""},         // no namespace
		{"1-2-3-4.a.b.pod.cluster.local.", "cluster.local.", ""},     // two labels
		{"1-2-3-4.default.svc.cluster.local.", "cluster.local.", ""}, // not pod
		{"1-2-3-4.default.pod.cluster.local.", "other.", ""},         // other zone
		{"web.default.pod.cluster.local.", "cluster.local.", ""},     // not an address
		{"1-2-3-4.default.pod.example.cluster.local.", "cluster.local.", ""},
	} {
		a, ok := podName(tc.name, tc.zone)
		got := ""
		if ok {
			got = a.String()
		}
		if got != tc.want {
			t.Errorf("podName(%q, %q) = %q, want %q", tc.name, tc.zone, got, tc.want)
		}
	}
}

func TestReverseName(t *testing.T) {
	for addr, want := range map[string]string{
		"10.3.0.1":    "1.0.3.10.in-addr.arpa.",
		"10.3.0.100":  "100.0.3.10.in-addr.arpa.",
		"2001:db8::1": "1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.8.b.d.0.1.0.0.2.ip6.arpa.",
	} {
		if got := reverseName(netip.MustParseAddr(addr)); got != want {
			t.Errorf("reverseName(%s) = %q, want %q", addr, got, want)
		}
		if ref, _ := dns.ReverseAddr(addr); ref != want {
			t.Errorf("miekg/dns disagrees: %q", ref)
		}
	}
}

// cluster is the unit tests' cluster: every kind of service.
func cluster() []runtime.Object {
	tcp443 := []port{{name: "https", port: 443}}
	pub := headlessService("default", "pub", port{name: "http", port: 80})
	pub.Spec.PublishNotReadyAddresses = true
	lb := clusterIPService("default", "lb", []string{"10.96.0.50"}, port{name: "http", port: 80})
	lb.Spec.Type = corev1.ServiceTypeLoadBalancer
	lb.Spec.ExternalIPs = []string{"192.0.2.7"}
	lb.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "198.51.100.1"}, {Hostname: "lb.example.com"}}
	elb := clusterIPService("default", "elb", []string{"10.96.0.51"}, port{name: "http", port: 80})
	elb.Spec.Type = corev1.ServiceTypeLoadBalancer
	elb.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{Hostname: "abc.elb.example.com"}}
	return []runtime.Object{
		namespace("default"), namespace("empty-ns"), namespace("hidden"),
		clusterIPService("default", "kubernetes", []string{"10.3.0.1", "2001:db8::1"}, port{name: "https", port: 443}, port{port: 8443}),
		headlessService("default", "headless", tcp443...),
		endpointSlice("default", "headless", "headless-a", discoveryv1.AddressTypeIPv4, tcp443,
			ep{ip: "10.3.0.100", ready: true, hostname: "my-pet"},
			ep{ip: "10.3.0.101", ready: true, hostname: "my-pet-2"},
			ep{ip: "10.3.0.102", ready: true, pod: "web-0"},
			ep{ip: "10.3.0.103", ready: false, hostname: "sick"}),
		endpointSlice("default", "headless", "headless-b", discoveryv1.AddressTypeIPv6, tcp443,
			ep{ip: "2001:db8::100", ready: true, hostname: "my-pet"}),
		// A second IPv4 slice of the same service (big services have many).
		endpointSlice("default", "headless", "headless-c", discoveryv1.AddressTypeIPv4, tcp443,
			ep{ip: "10.3.0.104", ready: true, hostname: "my-pet-3"}),
		headlessService("default", "none-ready", tcp443...),
		endpointSlice("default", "none-ready", "none-ready-a", discoveryv1.AddressTypeIPv4, tcp443,
			ep{ip: "10.3.0.110", ready: false}),
		pub,
		endpointSlice("default", "pub", "pub-a", discoveryv1.AddressTypeIPv4, []port{{name: "http", port: 8080}},
			ep{ip: "10.3.0.120", ready: false}),
		externalNameService("default", "foo", "www.example.com"),
		clusterIPService("default", "web", []string{"10.96.0.10"}, port{name: "http", port: 80}, port{name: "dns", proto: corev1.ProtocolUDP, port: 53}),
		endpointSlice("default", "web", "web-a", discoveryv1.AddressTypeIPv4, []port{{name: "http", port: 8080}},
			ep{ip: "10.244.1.5", ready: true, pod: "web-5d78b4dcbd-6rgv4"},
			ep{ip: "10.244.1.6", ready: false}),
		lb, elb,
		clusterIPService("hidden", "secret", []string{"10.96.0.99"}, port{name: "http", port: 80}),
		// Headless services whose slices were written by hand: one without
		// ports (its SRV takes the service's named port), one whose slice
		// port has no name (the same), one with an unnamed port only (no SRV).
		headlessService("default", "noports", port{name: "http", port: 80}),
		endpointSlice("default", "noports", "noports-a", discoveryv1.AddressTypeIPv4, nil,
			ep{ip: "10.3.0.130", ready: true, hostname: "np-0"}),
		headlessService("default", "unnamedslice", port{name: "https", port: 443}),
		endpointSlice("default", "unnamedslice", "unnamedslice-a", discoveryv1.AddressTypeIPv4, []port{{port: 8443}},
			ep{ip: "10.3.0.131", ready: true, hostname: "us-0"}),
		headlessService("default", "unnamed", port{port: 9000}),
		endpointSlice("default", "unnamed", "unnamed-a", discoveryv1.AddressTypeIPv4, []port{{port: 9000}},
			ep{ip: "10.3.0.132", ready: true, hostname: "un-0"}),
	}
}

func TestRecords(t *testing.T) {
	src, _ := fakeSource(t, Options{Zones: allZones, TTL: 5 * time.Second, Pods: PodsInsecure, Namespaces: []string{"default", "empty-ns"}}, cluster()...)
	p := newPipeline(t, src, allZones...)
	for _, tc := range []struct {
		name  string
		qtype uint16
		want  string
	}{
		{"dns-version.cluster.local", dns.TypeTXT, `NOERROR dns-version.cluster.local. TXT "1.1.0"`},
		// ClusterIP, dual stack.
		{"kubernetes.default.svc.cluster.local", dns.TypeA, "NOERROR kubernetes.default.svc.cluster.local. A 10.3.0.1"},
		{"kubernetes.default.svc.cluster.local", dns.TypeAAAA, "NOERROR kubernetes.default.svc.cluster.local. AAAA 2001:db8::1"},
		{"KUBERNETES.Default.svc.cluster.local", dns.TypeA, "NOERROR kubernetes.default.svc.cluster.local. A 10.3.0.1"},
		{"kubernetes.default.svc.cluster.local", dns.TypeMX, "NOERROR "},
		{"_https._tcp.kubernetes.default.svc.cluster.local", dns.TypeSRV, "NOERROR _https._tcp.kubernetes.default.svc.cluster.local. SRV 0 100 443 kubernetes.default.svc.cluster.local."},
		// The named port's SRV at the service name too; the unnamed port
		// (8443) has none.
		{"kubernetes.default.svc.cluster.local", dns.TypeSRV, "NOERROR kubernetes.default.svc.cluster.local. SRV 0 100 443 kubernetes.default.svc.cluster.local."},
		{"_tcp.kubernetes.default.svc.cluster.local", dns.TypeSRV, "NOERROR "}, // empty non-terminal
		{"_http._tcp.kubernetes.default.svc.cluster.local", dns.TypeSRV, "NXDOMAIN "},
		{"_https._udp.kubernetes.default.svc.cluster.local", dns.TypeSRV, "NXDOMAIN "},
		{"1.0.3.10.in-addr.arpa", dns.TypePTR, "NOERROR 1.0.3.10.in-addr.arpa. PTR kubernetes.default.svc.cluster.local."},
		{"1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.8.b.d.0.1.0.0.2.ip6.arpa", dns.TypePTR, "NOERROR 1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.8.b.d.0.1.0.0.2.ip6.arpa. PTR kubernetes.default.svc.cluster.local."},
		{"0.3.10.in-addr.arpa", dns.TypePTR, "NOERROR "}, // empty non-terminal
		{"9.9.9.10.in-addr.arpa", dns.TypePTR, "NXDOMAIN "},
		// Headless: every ready endpoint of every slice.
		{"headless.default.svc.cluster.local", dns.TypeA, "NOERROR headless.default.svc.cluster.local. A 10.3.0.100; headless.default.svc.cluster.local. A 10.3.0.101; headless.default.svc.cluster.local. A 10.3.0.102; headless.default.svc.cluster.local. A 10.3.0.104"},
		{"headless.default.svc.cluster.local", dns.TypeAAAA, "NOERROR headless.default.svc.cluster.local. AAAA 2001:db8::100"},
		{"my-pet.headless.default.svc.cluster.local", dns.TypeA, "NOERROR my-pet.headless.default.svc.cluster.local. A 10.3.0.100"},
		{"my-pet.headless.default.svc.cluster.local", dns.TypeAAAA, "NOERROR my-pet.headless.default.svc.cluster.local. AAAA 2001:db8::100"},
		{"my-pet-3.headless.default.svc.cluster.local", dns.TypeA, "NOERROR my-pet-3.headless.default.svc.cluster.local. A 10.3.0.104"},
		{"10-3-0-102.headless.default.svc.cluster.local", dns.TypeA, "NOERROR 10-3-0-102.headless.default.svc.cluster.local. A 10.3.0.102"},
		{"web-0.headless.default.svc.cluster.local", dns.TypeA, "NXDOMAIN "}, // endpoint_pod_names off
		{"sick.headless.default.svc.cluster.local", dns.TypeA, "NXDOMAIN "},  // not ready
		// Headless services: a named port of the service that a slice does
		// not list gets its SRV with the service's number; unnamed ports
		// (the service's or a slice's) get none.
		{"_http._tcp.noports.default.svc.cluster.local", dns.TypeSRV, "NOERROR _http._tcp.noports.default.svc.cluster.local. SRV 0 100 80 np-0.noports.default.svc.cluster.local."},
		{"noports.default.svc.cluster.local", dns.TypeSRV, "NOERROR noports.default.svc.cluster.local. SRV 0 100 80 np-0.noports.default.svc.cluster.local."},
		{"_https._tcp.unnamedslice.default.svc.cluster.local", dns.TypeSRV, "NOERROR _https._tcp.unnamedslice.default.svc.cluster.local. SRV 0 100 443 us-0.unnamedslice.default.svc.cluster.local."},
		{"unnamed.default.svc.cluster.local", dns.TypeSRV, "NOERROR "},
		{"unnamed.default.svc.cluster.local", dns.TypeA, "NOERROR unnamed.default.svc.cluster.local. A 10.3.0.132"},
		{"_https._tcp.headless.default.svc.cluster.local", dns.TypeSRV, "NOERROR " +
			"_https._tcp.headless.default.svc.cluster.local. SRV 0 100 443 10-3-0-102.headless.default.svc.cluster.local.; " +
			"_https._tcp.headless.default.svc.cluster.local. SRV 0 100 443 my-pet-2.headless.default.svc.cluster.local.; " +
			"_https._tcp.headless.default.svc.cluster.local. SRV 0 100 443 my-pet-3.headless.default.svc.cluster.local.; " +
			"_https._tcp.headless.default.svc.cluster.local. SRV 0 100 443 my-pet.headless.default.svc.cluster.local."},
		{"100.0.3.10.in-addr.arpa", dns.TypePTR, "NOERROR 100.0.3.10.in-addr.arpa. PTR my-pet.headless.default.svc.cluster.local."},
		{"103.0.3.10.in-addr.arpa", dns.TypePTR, "NXDOMAIN "},
		// No ready endpoint: NXDOMAIN, SRV too.
		{"none-ready.default.svc.cluster.local", dns.TypeA, "NXDOMAIN "},
		{"_https._tcp.none-ready.default.svc.cluster.local", dns.TypeSRV, "NXDOMAIN "},
		// publishNotReadyAddresses: not-ready endpoints count.
		{"pub.default.svc.cluster.local", dns.TypeA, "NOERROR pub.default.svc.cluster.local. A 10.3.0.120"},
		{"_http._tcp.pub.default.svc.cluster.local", dns.TypeSRV, "NOERROR _http._tcp.pub.default.svc.cluster.local. SRV 0 100 8080 10-3-0-120.pub.default.svc.cluster.local."},
		// ExternalName: a CNAME; the pipeline follows it (here to no zone).
		{"foo.default.svc.cluster.local", dns.TypeA, "NOERROR foo.default.svc.cluster.local. CNAME www.example.com."},
		{"foo.default.svc.cluster.local", dns.TypeCNAME, "NOERROR foo.default.svc.cluster.local. CNAME www.example.com."},
		{"x.foo.default.svc.cluster.local", dns.TypeA, "NXDOMAIN "},
		// ClusterIP service with endpoints: hostnames of ready endpoints,
		// SRV to the service name with the service's ports.
		{"web.default.svc.cluster.local", dns.TypeA, "NOERROR web.default.svc.cluster.local. A 10.96.0.10"},
		{"_dns._udp.web.default.svc.cluster.local", dns.TypeSRV, "NOERROR _dns._udp.web.default.svc.cluster.local. SRV 0 100 53 web.default.svc.cluster.local."},
		{"10-244-1-5.web.default.svc.cluster.local", dns.TypeA, "NOERROR 10-244-1-5.web.default.svc.cluster.local. A 10.244.1.5"},
		{"10-244-1-6.web.default.svc.cluster.local", dns.TypeA, "NXDOMAIN "},
		{"5.1.244.10.in-addr.arpa", dns.TypePTR, "NOERROR 5.1.244.10.in-addr.arpa. PTR 10-244-1-5.web.default.svc.cluster.local."},
		{"10.0.96.10.in-addr.arpa", dns.TypePTR, "NOERROR 10.0.96.10.in-addr.arpa. PTR web.default.svc.cluster.local."},
		// LoadBalancer: the ClusterIP only (expose: cluster_ip).
		{"lb.default.svc.cluster.local", dns.TypeA, "NOERROR lb.default.svc.cluster.local. A 10.96.0.50"},
		{"lb.default.cluster.local", dns.TypeA, "NXDOMAIN "},
		// Structure: NODATA for what exists, NXDOMAIN for the rest.
		{"svc.cluster.local", dns.TypeA, "NOERROR "},
		{"pod.cluster.local", dns.TypeA, "NOERROR "},
		{"default.svc.cluster.local", dns.TypeA, "NOERROR "},
		{"empty-ns.svc.cluster.local", dns.TypeA, "NOERROR "},
		{"nope.svc.cluster.local", dns.TypeA, "NXDOMAIN "},
		{"nope.default.svc.cluster.local", dns.TypeA, "NXDOMAIN "},
		{"cluster.local", dns.TypeA, "NOERROR "},
		{"other.cluster.local", dns.TypeA, "NXDOMAIN "},
		// namespaces filter: hidden is not exposed.
		{"hidden.svc.cluster.local", dns.TypeA, "NXDOMAIN "},
		{"secret.hidden.svc.cluster.local", dns.TypeA, "NXDOMAIN "},
		{"99.0.96.10.in-addr.arpa", dns.TypePTR, "NXDOMAIN "},
		// pods: insecure: any address, in an existing exposed namespace.
		{"1-2-3-4.default.pod.cluster.local", dns.TypeA, "NOERROR 1-2-3-4.default.pod.cluster.local. A 1.2.3.4"},
		{"fd00-1--2.default.pod.cluster.local", dns.TypeAAAA, "NOERROR fd00-1--2.default.pod.cluster.local. AAAA fd00:1::2"},
		{"1-2-3-4.default.pod.cluster.local", dns.TypeAAAA, "NOERROR "},
		{"1-2-3-4.nope.pod.cluster.local", dns.TypeA, "NXDOMAIN "},
		{"1-2-3-4.hidden.pod.cluster.local", dns.TypeA, "NXDOMAIN "},
		{"default.pod.cluster.local", dns.TypeA, "NOERROR "},
		{"web.default.pod.cluster.local", dns.TypeA, "NXDOMAIN "},
	} {
		if got := render(resolve(p, tc.name, tc.qtype)); got != tc.want {
			t.Errorf("%s %s:\n got %s\nwant %s", tc.name, dns.TypeToString[tc.qtype], got, tc.want)
		}
	}

	// SRV targets come with their addresses in the additional section.
	m := resolve(p, "_https._tcp.headless.default.svc.cluster.local", dns.TypeSRV)
	if got := len(m.Extra); got != 5 {
		t.Errorf("SRV additional section: %d records, want 5 (4 A + 1 AAAA): %v", got, m.Extra)
	}
	// Every answer is authoritative with the source's TTL.
	m = resolve(p, "kubernetes.default.svc.cluster.local", dns.TypeA)
	if !m.Authoritative || m.Answer[0].Header().Ttl != 5 {
		t.Errorf("AA=%v TTL=%d, want AA and TTL 5", m.Authoritative, m.Answer[0].Header().Ttl)
	}
	// Negative answers carry the SOA with the source's TTL as minimum.
	m = resolve(p, "nope.svc.cluster.local", dns.TypeA)
	if len(m.Ns) != 1 || m.Ns[0].(*dns.SOA).Minttl != 5 {
		t.Errorf("NXDOMAIN authority: %v", m.Ns)
	}
}

func TestEndpointPodNames(t *testing.T) {
	src, _ := fakeSource(t, Options{Zones: []string{zones}, EndpointPodNames: true}, cluster()...)
	p := newPipeline(t, src, zones)
	for _, tc := range []struct{ name, want string }{
		{"web-0.headless.default.svc.cluster.local", "NOERROR web-0.headless.default.svc.cluster.local. A 10.3.0.102"},
		{"10-3-0-102.headless.default.svc.cluster.local", "NXDOMAIN "},
		{"my-pet.headless.default.svc.cluster.local", "NOERROR my-pet.headless.default.svc.cluster.local. A 10.3.0.100"}, // hostname wins
		{"web-5d78b4dcbd-6rgv4.web.default.svc.cluster.local", "NOERROR web-5d78b4dcbd-6rgv4.web.default.svc.cluster.local. A 10.244.1.5"},
		// pods: disabled
		{"1-2-3-4.default.pod.cluster.local", "NXDOMAIN "},
		{"pod.cluster.local", "NXDOMAIN "},
		// no reverse zone: no PTR
		{"hidden.svc.cluster.local", "NOERROR "},
	} {
		if got := render(resolve(p, tc.name, dns.TypeA)); got != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, got, tc.want)
		}
	}
}

func TestExposeExternal(t *testing.T) {
	zs := []string{"example.com.", "in-addr.arpa."}
	src, _ := fakeSource(t, Options{Zones: zs, External: true, Pods: PodsInsecure}, cluster()...)
	p := newPipeline(t, src, zs...)
	for _, tc := range []struct {
		name  string
		qtype uint16
		want  string
	}{
		{"lb.default.example.com", dns.TypeA, "NOERROR lb.default.example.com. A 192.0.2.7; lb.default.example.com. A 198.51.100.1"},
		{"_http._tcp.lb.default.example.com", dns.TypeSRV, "NOERROR _http._tcp.lb.default.example.com. SRV 0 100 80 lb.default.example.com."},
		{"1.100.51.198.in-addr.arpa", dns.TypePTR, "NOERROR 1.100.51.198.in-addr.arpa. PTR lb.default.example.com."},
		{"elb.default.example.com", dns.TypeCNAME, "NOERROR elb.default.example.com. CNAME abc.elb.example.com."},
		{"kubernetes.default.example.com", dns.TypeA, "NXDOMAIN "}, // no ClusterIPs ever
		{"kubernetes.default.svc.example.com", dns.TypeA, "NXDOMAIN "},
		{"50.0.96.10.in-addr.arpa", dns.TypePTR, "NXDOMAIN "},
		{"default.example.com", dns.TypeA, "NOERROR "},
		{"dns-version.example.com", dns.TypeTXT, "NXDOMAIN "},
		{"1-2-3-4.default.pod.example.com", dns.TypeA, "NXDOMAIN "},
	} {
		if got := render(resolve(p, tc.name, tc.qtype)); got != tc.want {
			t.Errorf("%s %s:\n got %s\nwant %s", tc.name, dns.TypeToString[tc.qtype], got, tc.want)
		}
	}
}

func TestPodsVerified(t *testing.T) {
	objs := append(cluster(),
		pod("default", "a", corev1.PodRunning, "10.244.0.7", "fd00::7"),
		pod("default", "done", corev1.PodSucceeded, "10.244.0.8"),
		pod("hidden", "h", corev1.PodRunning, "10.244.0.9"),
	)
	src, client := fakeSource(t, Options{Zones: []string{zones}, Pods: PodsVerified, Namespaces: []string{"default"}}, objs...)
	p := newPipeline(t, src, zones)
	for _, tc := range []struct {
		name  string
		qtype uint16
		want  string
	}{
		{"10-244-0-7.default.pod.cluster.local", dns.TypeA, "NOERROR 10-244-0-7.default.pod.cluster.local. A 10.244.0.7"},
		{"fd00--7.default.pod.cluster.local", dns.TypeAAAA, "NOERROR fd00--7.default.pod.cluster.local. AAAA fd00::7"},
		{"10-244-0-8.default.pod.cluster.local", dns.TypeA, "NXDOMAIN "}, // finished
		{"10-244-0-9.hidden.pod.cluster.local", dns.TypeA, "NXDOMAIN "},
		{"1-2-3-4.default.pod.cluster.local", dns.TypeA, "NXDOMAIN "},  // no such pod
		{"10-244-0-7.other.pod.cluster.local", dns.TypeA, "NXDOMAIN "}, // wrong namespace
	} {
		if got := render(resolve(p, tc.name, tc.qtype)); got != tc.want {
			t.Errorf("%s %s:\n got %s\nwant %s", tc.name, dns.TypeToString[tc.qtype], got, tc.want)
		}
	}
	// A pod's deletion removes its record.
	if err := client.CoreV1().Pods("default").Delete(context.Background(), "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	dnstest.EventuallyNil(t, 5*time.Second, expect(p, "10-244-0-7.default.pod.cluster.local", dns.TypeA, "NXDOMAIN "))
}

// Changes reach the answers: create, update (slices moving, readiness),
// delete; empty non-terminals come and go with their children.
func TestPropagation(t *testing.T) {
	src, client := fakeSource(t, Options{Zones: allZones}, namespace("default"))
	p := newPipeline(t, src, allZones...)
	ctx := context.Background()
	svcs := client.CoreV1().Services("default")
	eps := client.DiscoveryV1().EndpointSlices("default")

	// A slice before its service: nothing until the service exists.
	tcp := []port{{name: "http", port: 80}}
	if _, err := eps.Create(ctx, endpointSlice("default", "db", "db-1", discoveryv1.AddressTypeIPv4, tcp, ep{ip: "10.1.0.1", ready: true, hostname: "db-0"}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	if got := render(resolve(p, "db.default.svc.cluster.local", dns.TypeA)); got != "NXDOMAIN " {
		t.Fatalf("slice without service: %s", got)
	}
	if _, err := svcs.Create(ctx, headlessService("default", "db", tcp...), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	dnstest.EventuallyNil(t, 5*time.Second, expect(p, "db-0.db.default.svc.cluster.local", dns.TypeA, "NOERROR db-0.db.default.svc.cluster.local. A 10.1.0.1"))
	serial := src.Serial()

	// A second slice adds to the same names.
	if _, err := eps.Create(ctx, endpointSlice("default", "db", "db-2", discoveryv1.AddressTypeIPv4, tcp, ep{ip: "10.1.0.2", ready: true, hostname: "db-1"}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	dnstest.EventuallyNil(t, 5*time.Second, expect(p, "db.default.svc.cluster.local", dns.TypeA, "NOERROR db.default.svc.cluster.local. A 10.1.0.1; db.default.svc.cluster.local. A 10.1.0.2"))
	if src.Serial() <= serial {
		t.Errorf("serial did not advance: %d then %d", serial, src.Serial())
	}
	// Readiness flips.
	sl := endpointSlice("default", "db", "db-1", discoveryv1.AddressTypeIPv4, tcp, ep{ip: "10.1.0.1", ready: false, hostname: "db-0"})
	if _, err := eps.Update(ctx, sl, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	dnstest.EventuallyNil(t, 5*time.Second, expect(p, "db.default.svc.cluster.local", dns.TypeA, "NOERROR db.default.svc.cluster.local. A 10.1.0.2"))
	dnstest.EventuallyNil(t, 5*time.Second, expect(p, "db-0.db.default.svc.cluster.local", dns.TypeA, "NXDOMAIN "))
	dnstest.EventuallyNil(t, 5*time.Second, expect(p, "1.0.1.10.in-addr.arpa", dns.TypePTR, "NXDOMAIN "))
	dnstest.EventuallyNil(t, 5*time.Second, expect(p, "2.0.1.10.in-addr.arpa", dns.TypePTR, "NOERROR 2.0.1.10.in-addr.arpa. PTR db-1.db.default.svc.cluster.local."))
	// Headless → ClusterIP.
	svc := clusterIPService("default", "db", []string{"10.96.5.5"}, tcp...)
	if _, err := svcs.Update(ctx, svc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	dnstest.EventuallyNil(t, 5*time.Second, expect(p, "db.default.svc.cluster.local", dns.TypeA, "NOERROR db.default.svc.cluster.local. A 10.96.5.5"))
	dnstest.EventuallyNil(t, 5*time.Second, expect(p, "_http._tcp.db.default.svc.cluster.local", dns.TypeSRV, "NOERROR _http._tcp.db.default.svc.cluster.local. SRV 0 100 80 db.default.svc.cluster.local."))
	// Deleting the last ready slice of... then the service: everything goes,
	// including the empty non-terminals.
	if err := eps.Delete(ctx, "db-2", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	dnstest.EventuallyNil(t, 5*time.Second, expect(p, "db-1.db.default.svc.cluster.local", dns.TypeA, "NXDOMAIN "))
	if err := svcs.Delete(ctx, "db", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	dnstest.EventuallyNil(t, 5*time.Second, expect(p, "db.default.svc.cluster.local", dns.TypeA, "NXDOMAIN "))
	dnstest.EventuallyNil(t, 5*time.Second, expect(p, "_tcp.db.default.svc.cluster.local", dns.TypeSRV, "NXDOMAIN "))
	dnstest.EventuallyNil(t, 5*time.Second, expect(p, "5.5.96.10.in-addr.arpa", dns.TypePTR, "NXDOMAIN "))
	dnstest.EventuallyNil(t, 5*time.Second, expect(p, "0.1.10.in-addr.arpa", dns.TypePTR, "NXDOMAIN "))
	dnstest.EventuallyNil(t, 5*time.Second, expect(p, "default.svc.cluster.local", dns.TypeA, "NOERROR "))

	// Namespaces come and go.
	if _, err := client.CoreV1().Namespaces().Create(ctx, namespace("team"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	dnstest.EventuallyNil(t, 5*time.Second, expect(p, "team.svc.cluster.local", dns.TypeA, "NOERROR "))
	if err := client.CoreV1().Namespaces().Delete(ctx, "team", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	dnstest.EventuallyNil(t, 5*time.Second, expect(p, "team.svc.cluster.local", dns.TypeA, "NXDOMAIN "))
}

// Until the first sync, every name of the zone is SERVFAIL.
func TestNotSyncedIsServfail(t *testing.T) {
	src := &Source{ix: newIndex(nil, new(atomic.Uint32)), syncedCh: make(chan struct{})}
	r := src.Lookup(context.Background(), &pipeline.Question{Name: "x.default.svc.cluster.local.", Type: dns.TypeA, Zone: zones})
	if r.Status != pipeline.Failed {
		t.Fatalf("before sync: status %v, want Failed", r.Status)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if src.WaitSynced(ctx) == nil {
		t.Fatal("WaitSynced returned nil before the sync")
	}
	p := newPipeline(t, src, zones)
	if m := resolve(p, "kubernetes.default.svc.cluster.local", dns.TypeA); m.Rcode != dns.RcodeServerFailure {
		t.Fatalf("rcode %s, want SERVFAIL", dns.RcodeToString[m.Rcode])
	}
}

// A hit allocates nothing inside the source.
func TestLookupAllocs(t *testing.T) {
	src, _ := fakeSource(t, Options{Zones: allZones}, cluster()...)
	for _, name := range []string{
		"kubernetes.default.svc.cluster.local.",
		"my-pet.headless.default.svc.cluster.local.",
		"_https._tcp.headless.default.svc.cluster.local.",
		"1.0.3.10.in-addr.arpa.",
		"nope.default.svc.cluster.local.",
	} {
		q := &pipeline.Question{Name: name, Type: dns.TypeA, Zone: zones}
		if n := testing.AllocsPerRun(200, func() { src.Lookup(context.Background(), q) }); n != 0 {
			t.Errorf("Lookup(%s): %.1f allocs, want 0", name, n)
		}
	}
}

// The index keeps empty non-terminals exactly as long as a name below
// them exists, and merges owners at one name.
func TestIndexOwners(t *testing.T) {
	ix := newIndex([]string{"z."}, new(atomic.Uint32))
	a := &dns.A{Hdr: dns.RR_Header{Name: "x.a.b.z.", Rrtype: dns.TypeA, Class: dns.ClassINET}, A: netip.MustParseAddr("1.1.1.1").AsSlice()}
	b := &dns.A{Hdr: dns.RR_Header{Name: "x.a.b.z.", Rrtype: dns.TypeA, Class: dns.ClassINET}, A: netip.MustParseAddr("2.2.2.2").AsSlice()}
	ix.set("one", []contribution{{name: "x.a.b.z.", rrs: []dns.RR{a}}})
	ix.set("two", []contribution{{name: "x.a.b.z.", rrs: []dns.RR{b, a}}})
	if rrs, ok := ix.lookup("x.a.b.z."); !ok || len(rrs) != 2 {
		t.Fatalf("merged: %v %v", rrs, ok)
	}
	for _, n := range []string{"a.b.z.", "b.z."} {
		if rrs, ok := ix.lookup(n); !ok || len(rrs) != 0 {
			t.Fatalf("%s: %v %v, want an empty non-terminal", n, rrs, ok)
		}
	}
	if _, ok := ix.lookup("z."); ok {
		t.Fatal("the root is never stored")
	}
	ix.set("one", nil)
	if rrs, _ := ix.lookup("x.a.b.z."); len(rrs) != 2 {
		t.Fatalf("after one left: %v", rrs)
	}
	ix.set("two", []contribution{{name: "y.b.z.", rrs: nil}})
	for n, want := range map[string]bool{"x.a.b.z.": false, "a.b.z.": false, "b.z.": true, "y.b.z.": true} {
		if _, ok := ix.lookup(n); ok != want {
			t.Errorf("%s exists=%v, want %v", n, ok, want)
		}
	}
	ix.set("two", nil)
	if ix.count.Load() != 0 || len(ix.owners) != 0 {
		t.Fatalf("index not empty: %d names, %d owners", ix.count.Load(), len(ix.owners))
	}
}

// A zone key with reverse zones only: PTR targets are named in
// cluster.local, and no forward name exists in the key.
func TestReverseOnlyZoneKey(t *testing.T) {
	src, _ := fakeSource(t, Options{Zones: []string{"10.in-addr.arpa."}}, cluster()...)
	p := newPipeline(t, src, "10.in-addr.arpa.")
	for _, tc := range []struct {
		name  string
		qtype uint16
		want  string
	}{
		{"1.0.3.10.in-addr.arpa", dns.TypePTR, "NOERROR 1.0.3.10.in-addr.arpa. PTR kubernetes.default.svc.cluster.local."},
		{"100.0.3.10.in-addr.arpa", dns.TypePTR, "NOERROR 100.0.3.10.in-addr.arpa. PTR my-pet.headless.default.svc.cluster.local."},
		{"0.3.10.in-addr.arpa", dns.TypePTR, "NOERROR "},
		{"10.in-addr.arpa", dns.TypeSOA, "NOERROR 10.in-addr.arpa. SOA"},
	} {
		got := render(resolve(p, tc.name, tc.qtype))
		if tc.qtype == dns.TypeSOA {
			got = strings.Join(strings.Fields(got)[:3], " ")
		}
		if got != tc.want {
			t.Errorf("%s %s:\n got %s\nwant %s", tc.name, dns.TypeToString[tc.qtype], got, tc.want)
		}
	}
	if n := src.ix.count.Load(); n == 0 {
		t.Fatal("empty index")
	}
	src.ix.each(func(k string, _ *entry) bool {
		if !strings.HasSuffix(k, ".in-addr.arpa.") {
			t.Errorf("forward name %s built in a reverse-only key", k)
		}
		return true
	})
}

// A source rebuilt over the same backend (a reload with other settings)
// starts from the current serial, never below it, and shares the
// backend's informers (its records come from their memory).
func TestRebuiltSourceSerial(t *testing.T) {
	first, client := fakeSource(t, Options{Zones: []string{zones}}, cluster()...)
	before := first.Serial()
	second, err := NewSource(first.b, Options{Zones: []string{zones}, TTL: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := second.WaitSynced(ctx); err != nil {
		t.Fatal(err)
	}
	first.Close()
	if second.Serial() <= before {
		t.Fatalf("serial went from %d to %d", before, second.Serial())
	}
	p := newPipeline(t, second, zones)
	if m := resolve(p, "kubernetes.default.svc.cluster.local", dns.TypeA); len(m.Answer) != 1 || m.Answer[0].Header().Ttl != 30 {
		t.Fatalf("rebuilt source: %v", m)
	}
	// The closed source's handlers are gone: events reach only the new one.
	if _, err := client.CoreV1().Namespaces().Create(context.Background(), namespace("later"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	dnstest.EventuallyNil(t, 5*time.Second, expect(p, "later.svc.cluster.local", dns.TypeA, "NOERROR "))
}

// The programming latency starts at the slice's last-change-trigger-time
// (the change that caused it), not at the event's arrival.
func TestProgrammingLatencyFromTriggerTime(t *testing.T) {
	tcp := []port{{name: "http", port: 80}}
	src, client := fakeSource(t, Options{Zones: allZones}, namespace("default"), headlessService("default", "db", tcp...))
	p := newPipeline(t, src, allZones...)
	sl := endpointSlice("default", "db", "db-1", discoveryv1.AddressTypeIPv4, tcp, ep{ip: "10.1.0.1", ready: true})
	sl.Annotations = map[string]string{corev1.EndpointsLastChangeTriggerTime: time.Now().Add(-3 * time.Second).Format(time.RFC3339Nano)}
	if _, err := client.DiscoveryV1().EndpointSlices("default").Create(context.Background(), sl, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	dnstest.EventuallyNil(t, 5*time.Second, expect(p, "db.default.svc.cluster.local", dns.TypeA, "NOERROR db.default.svc.cluster.local. A 10.1.0.1"))
	var m dto.Metric
	var sum float64
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if err := src.b.metrics.latency.Write(&m); err != nil {
			t.Fatal(err)
		}
		if sum = m.GetHistogram().GetSampleSum(); sum >= 3 {
			break
		}
	}
	if sum < 3 || sum > 60 {
		t.Fatalf("programming latency sum %.3fs, want about 3s (from the trigger time)", sum)
	}
}

// TestFirstSyncLazy: the first sync declares the source synced before it
// builds the services' records. While they are still being built, every
// answer for a name in the forward zone is already the one a fully built
// source gives (the name's service is built first, on demand), the
// additional records of SRV answers included; a reverse name waits until
// every service is built, then has its PTR.
func TestFirstSyncLazy(t *testing.T) {
	objs := cluster()
	opts := Options{Zones: []string{zones, "in-addr.arpa."}, TTL: 5 * time.Second}
	full, _ := fakeSource(t, opts, objs...)

	release := make(chan struct{})
	reached := make(chan struct{})
	lazyOpts := opts
	lazyOpts.lazyHook = func() { close(reached); <-release }
	client := fake.NewClientset(objs...)
	b := NewBackend(clientsetAPI{client}, BackendOptions{})
	t.Cleanup(func() { b.Close() })
	src, err := NewSource(b, lazyOpts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Close() })
	released := false
	defer func() {
		if !released {
			close(release)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := src.WaitSynced(ctx); err != nil {
		t.Fatal(err)
	}
	<-reached
	if !src.lazy.Load() || len(src.pending) == 0 {
		t.Fatalf("synced with nothing left to build (lazy %v, %d pending)", src.lazy.Load(), len(src.pending))
	}

	pf, pl := newPipeline(t, full, zones, "in-addr.arpa."), newPipeline(t, src, zones, "in-addr.arpa.")
	var names, reverse []string
	full.ix.each(func(name string, _ *entry) bool {
		if strings.HasSuffix(name, ".in-addr.arpa.") {
			reverse = append(reverse, name)
		} else {
			names = append(names, name)
		}
		return true
	})
	names = append(names, "nope.default.svc."+zones, "x.nope.svc."+zones, "a.b.headless.default.svc."+zones, "svc."+zones)
	if len(reverse) == 0 {
		t.Fatal("no reverse names in the built source")
	}
	for _, n := range names {
		for _, qt := range []uint16{dns.TypeA, dns.TypeAAAA, dns.TypeSRV, dns.TypeCNAME, dns.TypeTXT} {
			want, got := resolve(pf, n, qt), resolve(pl, n, qt)
			if w, g := render(want)+" | "+strings.Join(rrStrings(want.Extra), "; "), render(got)+" | "+strings.Join(rrStrings(got.Extra), "; "); g != w {
				t.Errorf("%s %s while building: %s, built: %s", n, dns.TypeToString[qt], g, w)
			}
		}
	}
	if !src.lazy.Load() {
		t.Fatal("the lookups finished the build")
	}

	// A reverse name needs every service: its answer waits for them.
	done := make(chan string, 1)
	go func() { done <- render(resolve(pl, reverse[0], dns.TypePTR)) }()
	select {
	case g := <-done:
		t.Fatalf("PTR %s answered (%s) while services were still to be built", reverse[0], g)
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	released = true
	if g, w := <-done, render(resolve(pf, reverse[0], dns.TypePTR)); g != w {
		t.Fatalf("PTR %s: %s, want %s", reverse[0], g, w)
	}
	if err := src.waitApplied(ctx); err != nil {
		t.Fatal(err)
	}
	if src.ix.count.Load() != full.ix.count.Load() {
		t.Fatalf("%d names once built, want %d", src.ix.count.Load(), full.ix.count.Load())
	}
}
