package e2e

// End-to-end test of the kubernetes source: a real kube-apiserver (built by
// scripts/k8s-tools.sh), the dnsd binary configured with a kubeconfig file
// as a user would, queried over UDP and TCP. Skipped without the
// kube-apiserver binary, except under CI=true where it fails.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"
	"gopkg.in/yaml.v3"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sclient "k8s.io/client-go/kubernetes"

	"github.com/dnsd/dnsd/internal/dnstest"
	"github.com/dnsd/dnsd/sources/kubernetes/kubetest"
)

func TestKubernetesE2E(t *testing.T) {
	cp := kubetest.StartFor(t)
	k := cp.Client
	ctx := context.Background()

	// dnsd starts while the API server is down: its other zones answer at
	// once, cluster names are SERVFAIL (never NXDOMAIN), /ready is 503.
	cp.StopAPIServer()
	dir := t.TempDir()
	port, hport := freePort(t), freePort(t)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	writeFile(t, filepath.Join(dir, "dnsd.yaml"), fmt.Sprintf(`listen: ["%s"]
http: "127.0.0.1:%d"
zones:
  cluster.local:
    - kubernetes:
        kubeconfig: %[3]s
        context: test
        pods: insecure
        ttl: 5s
        sync_timeout: 2s
  # Reverse zones in a key of their own: PTR targets are in cluster.local,
  # and both keys share one connection to the cluster.
  in-addr.arpa ip6.arpa:
    - kubernetes: {kubeconfig: %[3]s, context: test, ttl: 5s, sync_timeout: 2s}
  example.com:
    - hosts:
        entries: ["192.0.2.53 www.example.com", "2001:db8::1 www.example.com"]
`, addr, hport, cp.Kubeconfig))
	// `dnsd check` validates the kubeconfig without touching the network.
	check := exec.Command(dnsdBin, "check", "-config", "dnsd.yaml")
	check.Dir = dir
	if out, err := check.CombinedOutput(); err != nil {
		t.Fatalf("dnsd check: %v\n%s", err, out)
	}
	p := startDnsd(t, dir, "-config", "dnsd.yaml")
	p.waitLog("dnsd started", 1)
	base := fmt.Sprintf("http://127.0.0.1:%d", hport)
	waitAnswer(t, addr, "www.example.com", dns.TypeA, "NOERROR:192.0.2.53")
	waitAnswer(t, addr, "kubernetes.default.svc.cluster.local", dns.TypeA, "SERVFAIL:")
	p.waitLog("kubernetes API server unreachable", 1)
	if code, body := httpGet(t, base+"/ready"); code != 503 || !strings.Contains(body, "kubernetes") {
		t.Fatalf("/ready before the sync: %d %q, want 503 naming kubernetes", code, body)
	}

	if err := cp.StartAPIServer(); err != nil {
		t.Fatal(err)
	}
	dnstest.EventuallyNil(t, 60*time.Second, func() error {
		if code, _ := httpGet(t, base+"/ready"); code != 200 {
			return fmt.Errorf("/ready still %d after the API server came up", code)
		}
		return nil
	})

	if n := strings.Count(p.stderr.String(), "kubernetes connection opened"); n != 1 {
		t.Errorf("two zone keys with one kubeconfig opened %d connections, want 1", n)
	}

	createConformanceObjects(t, k)
	t.Run("conformance", func(t *testing.T) { conformance(t, addr) })

	// A reload with unchanged settings keeps the sources, their connection
	// and their state: no relist, no SERVFAIL window.
	p.signal(syscall.SIGHUP)
	p.waitLog("reloaded", 1)
	waitAnswer(t, addr, "100.0.3.10.in-addr.arpa", dns.TypePTR, "NOERROR:my-pet.headless.default.svc.cluster.local.")
	if n := strings.Count(p.stderr.String(), "kubernetes connection opened"); n != 1 {
		t.Errorf("after a reload: %d connections opened, want 1", n)
	}

	// Changes are served within a second (generous bound: 5 s).
	ns := "e2e"
	if _, err := k.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitAnswer(t, addr, "e2e.svc.cluster.local", dns.TypeA, "NOERROR:")
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "api", Namespace: ns},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}},
	}
	start := time.Now()
	svc, err := k.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitAnswer(t, addr, "api.e2e.svc.cluster.local", dns.TypeA, "NOERROR:"+svc.Spec.ClusterIP)
	t.Logf("service create → served over UDP in %s", time.Since(start).Round(time.Millisecond))
	waitAnswer(t, addr, "_http._tcp.api.e2e.svc.cluster.local", dns.TypeSRV, "NOERROR:0 100 80 api.e2e.svc.cluster.local.")

	// API outage: the last state is served; after the restart, changes
	// flow again without restarting dnsd.
	cp.StopAPIServer()
	p.waitLog("kubernetes API server unreachable", 2) // once at start, once now
	for _, netw := range []string{"udp", "tcp"} {
		r, err := query(t, netw, addr, "api.e2e.svc.cluster.local", dns.TypeA)
		if err != nil || dnstest.RData(r) != "NOERROR:"+svc.Spec.ClusterIP {
			t.Fatalf("%s during the outage: %v %v", netw, r, err)
		}
	}
	// Down long enough for client-go's backoff between list attempts to
	// have grown past ten seconds.
	time.Sleep(15 * time.Second)
	waitAnswer(t, addr, "api.e2e.svc.cluster.local", dns.TypeA, "NOERROR:"+svc.Spec.ClusterIP)
	if code, _ := httpGet(t, base+"/ready"); code != 200 {
		t.Errorf("/ready during an outage after the first sync: %d, want 200 (the last state is served)", code)
	}
	if err := cp.StartAPIServer(); err != nil {
		t.Fatal(err)
	}
	if err := k.CoreV1().Services(ns).Delete(ctx, "api", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// The informers list again as soon as the API server takes
	// connections, not after client-go's backoff (up to a minute): a
	// generous bound for what takes a second or two.
	deleted := time.Now()
	dnstest.EventuallyNil(t, 20*time.Second, func() error {
		if r, err := query(t, "udp", addr, "api.e2e.svc.cluster.local", dns.TypeA); err != nil || r.Rcode != dns.RcodeNameError {
			return fmt.Errorf("deletion after the API server's restart not served: %v %v", r, err)
		}
		return nil
	})
	t.Logf("a deletion made once the API server was back served in %s", time.Since(deleted).Round(time.Millisecond))
	p.waitLog("kubernetes API server reachable again", 2)

	_, metrics := httpGet(t, base+"/metrics")
	for _, want := range []string{
		`dnsd_source_synced{source="kubernetes `,
		`dnsd_kubernetes_events_total{resource="service",type="add"}`,
		`dnsd_kubernetes_events_total{resource="endpointslice",type="add"}`,
		"dnsd_kubernetes_programming_latency_seconds_count",
		`dnsd_responses_total{rcode="NOERROR",source="kubernetes",view="default",zone="cluster.local."}`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if !strings.Contains(grep(metrics, "dnsd_source_synced{"), "} 1") {
		t.Errorf("dnsd_source_synced: %s", grep(metrics, "dnsd_source_synced"))
	}

	// pods: insecure -> verified on a reload: a pod watch is added to the
	// connection, no second connection (no re-list of the services); a
	// made-up pod address is no longer answered.
	cfgFile := filepath.Join(dir, "dnsd.yaml")
	reloads := 1
	reload := func(old, new string) {
		t.Helper()
		writeFile(t, cfgFile, strings.Replace(readFile(t, cfgFile), old, new, 1))
		p.signal(syscall.SIGHUP)
		reloads++
		p.waitLog("reloaded", reloads)
	}
	opened := func() int { return strings.Count(p.stderr.String(), "kubernetes connection opened") }
	reload("pods: insecure", "pods: verified")
	waitAnswer(t, addr, "1-2-3-4.default.pod.cluster.local", dns.TypeA, "NXDOMAIN:")
	if n := opened(); n != 1 {
		t.Errorf("after turning pods: verified on: %d connections opened, want 1", n)
	}
	if n := strings.Count(p.stderr.String(), "watching pods on this connection"); n != 1 {
		t.Errorf("the pod watch was started %d times, want 1", n)
	}

	// endpoint_pod_names turned on by a reload names an endpoint without a
	// hostname by its pod, from the connection's memory: no second
	// connection, no re-list.
	https, tcp, p443 := "https", corev1.ProtocolTCP, int32(443)
	podSlice := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "headless-pods", Labels: map[string]string{discoveryv1.LabelServiceName: "headless"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: &https, Protocol: &tcp, Port: &p443}},
		Endpoints: []discoveryv1.Endpoint{{
			Addresses: []string{"10.3.0.4"},
			TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "web-0"},
		}},
	}
	if _, err := k.DiscoveryV1().EndpointSlices("default").Create(ctx, podSlice, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitAnswer(t, addr, "10-3-0-4.headless.default.svc.cluster.local", dns.TypeA, "NOERROR:10.3.0.4")
	waitAnswer(t, addr, "web-0.headless.default.svc.cluster.local", dns.TypeA, "NXDOMAIN:")
	reload("pods: verified", "pods: verified\n        endpoint_pod_names: true")
	waitAnswer(t, addr, "web-0.headless.default.svc.cluster.local", dns.TypeA, "NOERROR:10.3.0.4")
	if n := opened(); n != 1 {
		t.Errorf("after turning endpoint_pod_names on: %d connections opened, want 1", n)
	}

	p.stop(syscall.SIGTERM)
}

// createConformanceObjects builds the cluster of the Kubernetes DNS
// specification's examples in namespace default: kubernetes (10.3.0.1,
// made dual-stack with 2001:db8::1), headless with the example endpoints,
// foo as ExternalName www.example.com, and a headless service without a
// ready endpoint.
func createConformanceObjects(t *testing.T, k k8sclient.Interface) {
	t.Helper()
	ctx := context.Background()
	svcs := k.CoreV1().Services("default")
	kube, err := svcs.Get(ctx, "kubernetes", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	policy := corev1.IPFamilyPolicyPreferDualStack
	kube.Spec.IPFamilyPolicy = &policy
	kube.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}
	kube.Spec.ClusterIPs = []string{"10.3.0.1", "2001:db8::1"}
	if _, err := svcs.Update(ctx, kube, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("making default/kubernetes dual-stack: %v", err)
	}
	https := "https"
	tcp := corev1.ProtocolTCP
	p443 := int32(443)
	for _, s := range []*corev1.Service{
		{ObjectMeta: metav1.ObjectMeta{Name: "headless"}, Spec: corev1.ServiceSpec{ClusterIP: "None", Ports: []corev1.ServicePort{{Name: "https", Port: 443, Protocol: tcp}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "unready"}, Spec: corev1.ServiceSpec{ClusterIP: "None", Ports: []corev1.ServicePort{{Name: "https", Port: 443, Protocol: tcp}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "foo"}, Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "www.example.com"}},
	} {
		if _, err := svcs.Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	yes, no := true, false
	endpoint := func(ip, host string, ready *bool) discoveryv1.Endpoint {
		e := discoveryv1.Endpoint{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: ready}}
		if host != "" {
			e.Hostname = &host
		}
		return e
	}
	slice := func(name, svc string, family discoveryv1.AddressType, eps ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
		return &discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Name: name, Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
			AddressType: family,
			Ports:       []discoveryv1.EndpointPort{{Name: &https, Protocol: &tcp, Port: &p443}},
			Endpoints:   eps,
		}
	}
	for _, sl := range []*discoveryv1.EndpointSlice{
		slice("headless-v4", "headless", discoveryv1.AddressTypeIPv4,
			endpoint("10.3.0.1", "438934893", &yes), endpoint("10.3.0.2", "my-pet-2", &yes), endpoint("10.3.0.3", "", &yes)),
		slice("headless-v4-b", "headless", discoveryv1.AddressTypeIPv4, endpoint("10.3.0.100", "my-pet", &yes)),
		slice("headless-v6", "headless", discoveryv1.AddressTypeIPv6,
			endpoint("2001:db8::1", "", &yes), endpoint("2001:db8::2", "", &yes), endpoint("2001:db8::3", "", &yes), endpoint("2001:db8::100", "my-pet", &yes)),
		slice("unready-v4", "unready", discoveryv1.AddressTypeIPv4, endpoint("10.3.0.200", "", &no)),
	} {
		if _, err := k.DiscoveryV1().EndpointSlices("default").Create(ctx, sl, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// conformanceCase is one example of the Kubernetes DNS-Based Service
// Discovery specification 1.1.0: the question and the records its answer
// example shows (rdata; SRV priority and weight are not prescribed and
// are left out). Each must be in dnsd's answer.
type conformanceCase struct {
	section string
	name    string
	qtype   uint16
	rcode   int
	want    []string
}

var conformanceCases = []conformanceCase{
	{"2.2 schema version", "dns-version.cluster.local.", dns.TypeTXT, dns.RcodeSuccess, []string{`TXT "1.1.0"`}},
	{"2.3.1 A", "kubernetes.default.svc.cluster.local.", dns.TypeA, dns.RcodeSuccess, []string{"A 10.3.0.1"}},
	{"2.3.1 AAAA", "kubernetes.default.svc.cluster.local.", dns.TypeAAAA, dns.RcodeSuccess, []string{"AAAA 2001:db8::1"}},
	{"2.3.2 SRV", "_https._tcp.kubernetes.default.svc.cluster.local.", dns.TypeSRV, dns.RcodeSuccess, []string{"SRV 443 kubernetes.default.svc.cluster.local."}},
	{"2.3.3 PTR v4", "1.0.3.10.in-addr.arpa.", dns.TypePTR, dns.RcodeSuccess, []string{"PTR kubernetes.default.svc.cluster.local."}},
	{"2.3.3 PTR v6", "1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.8.b.d.0.1.0.0.2.ip6.arpa.", dns.TypePTR, dns.RcodeSuccess, []string{"PTR kubernetes.default.svc.cluster.local."}},
	{"2.4.1 A", "headless.default.svc.cluster.local.", dns.TypeA, dns.RcodeSuccess, []string{"A 10.3.0.1", "A 10.3.0.2", "A 10.3.0.3"}},
	{"2.4.1 AAAA", "headless.default.svc.cluster.local.", dns.TypeAAAA, dns.RcodeSuccess, []string{"AAAA 2001:db8::1", "AAAA 2001:db8::2", "AAAA 2001:db8::3"}},
	{"2.4.1 no ready endpoint", "unready.default.svc.cluster.local.", dns.TypeA, dns.RcodeNameError, nil},
	{"2.4.1 hostname A", "my-pet.headless.default.svc.cluster.local.", dns.TypeA, dns.RcodeSuccess, []string{"A 10.3.0.100"}},
	{"2.4.1 hostname AAAA", "my-pet.headless.default.svc.cluster.local.", dns.TypeAAAA, dns.RcodeSuccess, []string{"AAAA 2001:db8::100"}},
	{"2.4.2 SRV", "_https._tcp.headless.default.svc.cluster.local.", dns.TypeSRV, dns.RcodeSuccess, []string{
		"SRV 443 my-pet.headless.default.svc.cluster.local.",
		"SRV 443 my-pet-2.headless.default.svc.cluster.local.",
		"SRV 443 438934893.headless.default.svc.cluster.local.",
	}},
	{"2.4.3 PTR v4", "100.0.3.10.in-addr.arpa.", dns.TypePTR, dns.RcodeSuccess, []string{"PTR my-pet.headless.default.svc.cluster.local."}},
	{"2.4.3 PTR v6", "0.0.1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.8.b.d.0.1.0.0.2.ip6.arpa.", dns.TypePTR, dns.RcodeSuccess, []string{"PTR my-pet.headless.default.svc.cluster.local."}},
	{"2.5 CNAME (IPv4)", "foo.default.svc.cluster.local.", dns.TypeA, dns.RcodeSuccess, []string{"CNAME www.example.com.", "A 192.0.2.53"}},
	{"2.5 CNAME (IPv6)", "foo.default.svc.cluster.local.", dns.TypeAAAA, dns.RcodeSuccess, []string{"CNAME www.example.com.", "AAAA 2001:db8::1"}},
	{"2.6 pod A (deprecated)", "1-2-3-4.default.pod.cluster.local.", dns.TypeA, dns.RcodeSuccess, []string{"A 1.2.3.4"}},
}

// conformance checks every example over UDP and TCP, with additional
// A/AAAA records for SRV targets.
func conformance(t *testing.T, addr string) {
	for _, tc := range conformanceCases {
		for _, netw := range []string{"udp", "tcp"} {
			var got []string
			var r *dns.Msg
			deadline := time.Now().Add(5 * time.Second)
			for {
				var err error
				r, err = queryEDNS(netw, addr, tc.name, tc.qtype)
				if err == nil {
					got = typedRdata(r.Answer)
					if r.Rcode == tc.rcode && containsAll(got, tc.want) {
						break
					}
				}
				if time.Now().After(deadline) {
					if err != nil {
						t.Fatalf("%s: %s %s over %s: %v", tc.section, tc.name, dns.TypeToString[tc.qtype], netw, err)
					}
					t.Errorf("%s: %s %s over %s: got %s %q, want %s with %q", tc.section, tc.name, dns.TypeToString[tc.qtype], netw,
						dns.RcodeToString[r.Rcode], got, dns.RcodeToString[tc.rcode], tc.want)
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			if !r.Authoritative {
				t.Errorf("%s: %s over %s: not authoritative", tc.section, tc.name, netw)
			}
			if tc.qtype == dns.TypeSRV {
				for _, rr := range r.Answer {
					target := rr.(*dns.SRV).Target
					if !slices.ContainsFunc(r.Extra, func(x dns.RR) bool { return strings.EqualFold(x.Header().Name, target) }) {
						t.Errorf("%s: no additional address for SRV target %s", tc.section, target)
					}
				}
			}
		}
	}
}

// queryEDNS asks like a modern stub resolver: EDNS0 with a 1232-byte
// buffer (answers with many SRV records and their addresses exceed 512).
func queryEDNS(netw, addr, name string, qtype uint16) (*dns.Msg, error) {
	c := &dns.Client{Net: netw, Timeout: 2 * time.Second}
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), qtype)
	m.SetEdns0(1232, false)
	r, _, err := c.Exchange(m, addr)
	if err == nil && r.Truncated {
		return r, fmt.Errorf("truncated answer over %s", netw)
	}
	return r, err
}

// typedRdata renders records as "TYPE rdata" (SRV: "SRV port target").
func typedRdata(rrs []dns.RR) []string {
	var out []string
	for _, rr := range rrs {
		if srv, ok := rr.(*dns.SRV); ok {
			out = append(out, fmt.Sprintf("SRV %d %s", srv.Port, srv.Target))
			continue
		}
		f := strings.Fields(rr.String())
		out = append(out, strings.Join(f[3:], " "))
	}
	return out
}

func containsAll(got, want []string) bool {
	for _, w := range want {
		if !slices.Contains(got, w) {
			return false
		}
	}
	return true
}

// BenchmarkKubernetesScale measures the dnsd binary (built without the
// race detector) holding 10,000 services / 100,000 endpoints of a real
// API server (goal: under 300 MiB RSS): time to the first sync, RSS
// after it, peak RSS, and the latency of one change at that size.
//
//	go test -run '^$' -bench KubernetesScale -benchtime 1x .
func BenchmarkKubernetesScale(b *testing.B) {
	bin := kubetest.Require(b)
	dir := b.TempDir()
	cp, err := kubetest.Start(bin, filepath.Join(dir, "cp"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(cp.Close)
	fast := *cp.Config
	fast.QPS, fast.Burst = -1, 0
	k, err := k8sclient.NewForConfig(&fast)
	if err != nil {
		b.Fatal(err)
	}
	const services, perService = 10000, 10
	start := time.Now()
	if err := kubetest.CreateScale(context.Background(), k, services, perService); err != nil {
		b.Fatal(err)
	}
	b.Logf("created %d services and %d endpoints in %s", services, services*perService, time.Since(start).Round(time.Second))

	dnsd := filepath.Join(dir, "dnsd")
	if out, err := exec.Command("go", "build", "-o", dnsd, ".").CombinedOutput(); err != nil {
		b.Fatalf("go build: %v\n%s", err, out)
	}
	port, hport := freePort(b), freePort(b)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	cfg := filepath.Join(dir, "dnsd.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`listen: ["%s"]
http: "127.0.0.1:%d"
zones:
  cluster.local 10.in-addr.arpa:
    - kubernetes: {kubeconfig: %s, context: test, sync_timeout: 60s}
`, addr, hport, cp.Kubeconfig)), 0o644); err != nil {
		b.Fatal(err)
	}
	for range b.N {
		cmd := exec.Command(dnsd, "-config", cfg)
		cmd.Stderr = io.Discard
		start := time.Now()
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		ready := false
		for time.Since(start) < 120*time.Second {
			resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/ready", hport))
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == 200 {
					ready = true
					break
				}
			}
			time.Sleep(20 * time.Millisecond)
		}
		sync := time.Since(start)
		if !ready {
			cmd.Process.Kill()
			cmd.Wait()
			b.Fatal("dnsd never ready")
		}
		// Let the GC settle, then read the RSS as an operator would.
		time.Sleep(3 * time.Second)
		rss, hwm := procRSS(b, cmd.Process.Pid)

		// One change at this size: programming latency over the wire.
		sl, err := k.DiscoveryV1().EndpointSlices("ns-7").Get(context.Background(), "svc-7", metav1.GetOptions{})
		if err != nil {
			b.Fatal(err)
		}
		host := fmt.Sprintf("moved-%d", time.Now().UnixNano())
		sl.Endpoints[0].Hostname = &host
		changed := time.Now()
		if _, err := k.DiscoveryV1().EndpointSlices("ns-7").Update(context.Background(), sl, metav1.UpdateOptions{}); err != nil {
			b.Fatal(err)
		}
		var latency time.Duration
		for {
			r, err := queryEDNS("udp", addr, host+".svc-7.ns-7.svc.cluster.local.", dns.TypeA)
			if err == nil && r.Rcode == dns.RcodeSuccess && len(r.Answer) == 1 {
				latency = time.Since(changed)
				break
			}
			if time.Since(changed) > 10*time.Second {
				b.Fatal("change never served")
			}
			time.Sleep(time.Millisecond)
		}
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
		b.ReportMetric(sync.Seconds(), "sync-s")
		b.ReportMetric(float64(rss)/(1<<10), "rss-MiB")
		b.ReportMetric(float64(hwm)/(1<<10), "peak-rss-MiB")
		b.ReportMetric(float64(latency.Microseconds())/1000, "change-ms")
	}
}

// procRSS reads VmRSS and VmHWM (KiB) of pid.
func procRSS(b *testing.B, pid int) (rss, hwm int) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		v, _ := strconv.Atoi(f[1])
		switch f[0] {
		case "VmRSS:":
			rss = v
		case "VmHWM:":
			hwm = v
		}
	}
	return rss, hwm
}

// TestKubernetesRBAC proves that the RBAC objects docs/sources/kubernetes.md
// documents for running dnsd outside the cluster are enough: they are
// read from the doc's YAML block and created on an API server with RBAC
// authorization. dnsd, authenticated with a token of the documented
// ServiceAccount (as `kubectl create token` gives), does not sync without
// the ClusterRoleBinding, and with it serves services and verified pods.
func TestKubernetesRBAC(t *testing.T) {
	cp := kubetest.StartFor(t)
	k := cp.Client
	ctx := context.Background()
	sa, role, binding := docRBAC(t)

	// The API server creates kube-system shortly after it is ready.
	dnstest.EventuallyNil(t, 30*time.Second, func() error {
		if _, err := k.CoreV1().Namespaces().Get(ctx, sa.Namespace, metav1.GetOptions{}); err != nil {
			return fmt.Errorf("namespace %s: %w", sa.Namespace, err)
		}
		return nil
	})
	if _, err := k.CoreV1().ServiceAccounts(sa.Namespace).Create(ctx, sa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := k.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	expiry := int64(3600)
	tr, err := k.CoreV1().ServiceAccounts(sa.Namespace).CreateToken(ctx, sa.Name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := cp.KubeconfigFor("dnsd", tr.Status.Token)
	if err != nil {
		t.Fatal(err)
	}

	// A service and a running pod with an address, in a namespace of
	// their own.
	ns := "rbac"
	if _, err := k.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	svc, err := k.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod, err := k.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p1"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.244.1.7", PodIPs: []corev1.PodIP{{IP: "10.244.1.7"}}}
	if _, err := k.CoreV1().Pods(ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	run := func() (p *proc, addr, base string) {
		port, hport := freePort(t), freePort(t)
		addr = fmt.Sprintf("127.0.0.1:%d", port)
		writeFile(t, filepath.Join(dir, "dnsd.yaml"), fmt.Sprintf(`listen: ["%s"]
http: "127.0.0.1:%d"
zones:
  cluster.local:
    - kubernetes: {kubeconfig: %s, context: test, pods: verified, ttl: 5s, sync_timeout: 2s}
`, addr, hport, kubeconfig))
		p = startDnsd(t, dir, "-config", "dnsd.yaml")
		p.waitLog("dnsd started", 1)
		return p, addr, fmt.Sprintf("http://127.0.0.1:%d", hport)
	}

	// Without the ClusterRoleBinding the API server refuses: no sync,
	// names are SERVFAIL, /ready is 503.
	p, addr, base := run()
	p.waitLog("kubernetes API list/watch failed", 1)
	waitAnswer(t, addr, "web.rbac.svc.cluster.local", dns.TypeA, "SERVFAIL:")
	if code, body := httpGet(t, base+"/ready"); code != 503 || !strings.Contains(body, "kubernetes") {
		t.Fatalf("/ready without the binding: %d %q, want 503 naming kubernetes", code, body)
	}
	if !strings.Contains(p.stderr.String(), "forbidden") {
		t.Errorf("no list/watch was forbidden without the binding:\n%s", p.stderr.String())
	}
	p.stop(syscall.SIGTERM)

	// With it, dnsd syncs everything it watches.
	if _, err := k.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p, addr, base = run()
	dnstest.EventuallyNil(t, 30*time.Second, func() error {
		if code, body := httpGet(t, base+"/ready"); code != 200 {
			return fmt.Errorf("/ready still %d %q after start with the documented RBAC", code, body)
		}
		return nil
	})
	waitAnswer(t, addr, "web.rbac.svc.cluster.local", dns.TypeA, "NOERROR:"+svc.Spec.ClusterIP)
	waitAnswer(t, addr, "_http._tcp.web.rbac.svc.cluster.local", dns.TypeSRV, "NOERROR:0 100 80 web.rbac.svc.cluster.local.")
	waitAnswer(t, addr, "10-244-1-7.rbac.pod.cluster.local", dns.TypeA, "NOERROR:10.244.1.7")
	waitAnswer(t, addr, "10-244-1-8.rbac.pod.cluster.local", dns.TypeA, "NXDOMAIN:") // no pod has it
	if out := p.stderr.String(); strings.Contains(out, "list/watch failed") {
		t.Errorf("a list/watch failed with the documented RBAC:\n%s", out)
	}
	p.stop(syscall.SIGTERM)
}

// docRBAC reads the ServiceAccount, ClusterRole and ClusterRoleBinding of
// the first YAML block of docs/sources/kubernetes.md's section on running
// dnsd on a VM.
func docRBAC(t *testing.T) (*corev1.ServiceAccount, *rbacv1.ClusterRole, *rbacv1.ClusterRoleBinding) {
	t.Helper()
	const section = "## Running dnsd on a VM against a cluster"
	b, err := os.ReadFile(filepath.Join("docs", "sources", "kubernetes.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	i := strings.Index(doc, section)
	if i < 0 {
		t.Fatalf("docs/sources/kubernetes.md has no %q", section)
	}
	doc = doc[i:]
	i = strings.Index(doc, "```yaml\n")
	if i < 0 {
		t.Fatal("no YAML block in the doc's section " + section)
	}
	doc = doc[i+len("```yaml\n"):]
	block, _, ok := strings.Cut(doc, "```")
	if !ok {
		t.Fatal("unterminated YAML block in the doc's section " + section)
	}
	// The block is indented under a list item.
	var lines []string
	for _, l := range strings.Split(block, "\n") {
		lines = append(lines, strings.TrimPrefix(l, "   "))
	}
	var (
		sa      *corev1.ServiceAccount
		role    *rbacv1.ClusterRole
		binding *rbacv1.ClusterRoleBinding
	)
	dec := yaml.NewDecoder(strings.NewReader(strings.Join(lines, "\n")))
	for {
		var m map[string]any
		if err := dec.Decode(&m); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("the doc's RBAC YAML: %v", err)
		}
		j, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		var obj any
		switch m["kind"] {
		case "ServiceAccount":
			sa = &corev1.ServiceAccount{}
			obj = sa
		case "ClusterRole":
			role = &rbacv1.ClusterRole{}
			obj = role
		case "ClusterRoleBinding":
			binding = &rbacv1.ClusterRoleBinding{}
			obj = binding
		default:
			t.Fatalf("unexpected kind %v in the doc's RBAC YAML", m["kind"])
		}
		d := json.NewDecoder(bytes.NewReader(j))
		d.DisallowUnknownFields()
		if err := d.Decode(obj); err != nil {
			t.Fatalf("the doc's %v: %v", m["kind"], err)
		}
	}
	if sa == nil || role == nil || binding == nil {
		t.Fatal("the doc's RBAC YAML lacks a ServiceAccount, a ClusterRole or a ClusterRoleBinding")
	}
	return sa, role, binding
}
