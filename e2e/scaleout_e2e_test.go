package e2e

// End-to-end tests of scale-out: several dnsd processes on one etcd (and
// one Kubernetes API server) answer the same data, each change reaches
// every one of them, and killing one changes nothing for the others. See
// docs/scaling.md.

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dnsd/dnsd/internal/dnstest"
	"github.com/dnsd/dnsd/sources/etcd/etcdtest"
	"github.com/dnsd/dnsd/sources/kubernetes/kubetest"
)

// The bound a change must reach every instance within. The freshness goal
// is 100 ms; the bound is generous for shared CI machines, and the
// measured delays are logged.
const (
	fleetBound = 2 * time.Second
	fleetGoal  = 100 * time.Millisecond
)

// instance is one dnsd of a fleet.
type instance struct {
	p    *proc
	addr string // DNS, UDP and TCP
	base string // http://host:port
}

// startFleet starts n dnsd processes, each with its own directory, ports
// and the zone block zones (indented for `zones:`), and waits until every
// one is ready.
func startFleet(t *testing.T, n int, zones string) []*instance {
	t.Helper()
	var fleet []*instance
	for i := range n {
		dir := t.TempDir()
		port, hport := freePort(t), freePort(t)
		in := &instance{addr: fmt.Sprintf("127.0.0.1:%d", port), base: fmt.Sprintf("http://127.0.0.1:%d", hport)}
		writeFile(t, filepath.Join(dir, "dnsd.yaml"), fmt.Sprintf("listen: [%q]\nhttp: \"127.0.0.1:%d\"\nzones:\n%s", in.addr, hport, zones))
		in.p = startDnsd(t, dir, "-config", "dnsd.yaml")
		t.Logf("instance %d: dns %s, http %s", i, in.addr, in.base)
		fleet = append(fleet, in)
	}
	for _, in := range fleet {
		in.p.waitLog("dnsd started", 1)
		waitReady(t, in.base, 200)
	}
	return fleet
}

// reachAll polls every instance until each answers name/qtype with want
// (rendered as rdata renders it) and returns how long each took from
// start. It fails the test after fleetBound.
func reachAll(t *testing.T, fleet []*instance, start time.Time, name string, qtype uint16, want string) []time.Duration {
	t.Helper()
	took := make([]time.Duration, len(fleet))
	c := &dns.Client{Net: "udp", Timeout: 200 * time.Millisecond}
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), qtype)
	last := make([]string, len(fleet))
	for left := len(fleet); left > 0; {
		for i, in := range fleet {
			if took[i] != 0 {
				continue
			}
			r, _, err := c.Exchange(m, in.addr)
			if err == nil {
				last[i] = dnstest.RData(r)
			} else {
				last[i] = err.Error()
			}
			if last[i] == want {
				took[i] = time.Since(start)
				left--
			}
		}
		if left > 0 && time.Since(start) > fleetBound {
			t.Fatalf("%s %s not %q on every instance within %v; last answers %q", name, dns.TypeToString[qtype], want, fleetBound, last)
		}
		time.Sleep(2 * time.Millisecond)
	}
	return took
}

// sameAnswers requires every instance to give the same answer (rcode and
// sorted records of every section) for each name. SOA serials are left
// out: each instance counts its own (docs/scaling.md).
func sameAnswers(t *testing.T, fleet []*instance, qtype uint16, names ...string) {
	t.Helper()
	for _, name := range names {
		var first string
		for i, in := range fleet {
			r, err := query(t, "udp", in.addr, name, qtype)
			if err != nil {
				t.Fatalf("instance %d, %s: %v", i, name, err)
			}
			got := fmt.Sprint(dns.RcodeToString[r.Rcode], sortedRRs(r.Answer), sortedRRs(r.Ns), sortedRRs(r.Extra))
			if i == 0 {
				first = got
			} else if got != first {
				t.Fatalf("%s %s: instance 0 answers %s, instance %d %s", name, dns.TypeToString[qtype], first, i, got)
			}
		}
	}
}

func sortedRRs(rrs []dns.RR) []string {
	var out []string
	for _, rr := range rrs {
		switch rr := rr.(type) {
		case *dns.OPT:
		case *dns.SOA:
			c := *rr
			c.Serial = 0
			out = append(out, c.String())
		default:
			out = append(out, rr.String())
		}
	}
	slices.Sort(out)
	return out
}

// kill stops in with SIGKILL and waits for it to be gone.
func (in *instance) kill(t *testing.T) {
	t.Helper()
	in.p.signal(syscall.SIGKILL)
	select {
	case <-in.p.done:
	case <-time.After(10 * time.Second):
		t.Fatal("dnsd did not die on SIGKILL")
	}
}

// logDelays logs what each change took per instance, against the goal.
func logDelays(t *testing.T, what string, d []time.Duration) {
	t.Helper()
	worst := slices.Max(d)
	note := "within"
	if worst > fleetGoal {
		note = "OVER"
	}
	t.Logf("%-34s reached every instance in %v (per instance %v; %s the %v goal)", what, worst.Round(100*time.Microsecond), roundAll(d), note, fleetGoal)
}

func roundAll(d []time.Duration) []time.Duration {
	out := make([]time.Duration, len(d))
	for i, x := range d {
		out[i] = x.Round(100 * time.Microsecond)
	}
	return out
}

// TestScaleOutEtcd: two dnsd on one etcd. Both answer the same data; a
// put and a delete reach both; after one is killed with SIGKILL the
// other keeps answering, stays ready and still sees every change.
func TestScaleOutEtcd(t *testing.T) {
	srv := etcdtest.Start(t, etcdtest.Options{})
	srv.Put("/skydns/internal/example/web/x1", `{"host":"10.0.1.1"}`)
	srv.Put("/skydns/internal/example/web/x2", `{"host":"10.0.1.2"}`)
	srv.Put("/skydns/internal/example/_tcp/_pg", `{"host":"10.0.2.1","port":5432}`)
	srv.Put("/skydns/internal/example/txt", `{"text":"one fleet"}`)
	fleet := startFleet(t, 2, fmt.Sprintf(`  example.internal:
    - etcd:
        endpoints: [%q]
        prefix: /skydns
        ttl: 30s
        sync_timeout: 10s
`, srv.Endpoint()))
	sameAnswers(t, fleet, dns.TypeA, "web.example.internal", "nope.example.internal", "example.internal")
	sameAnswers(t, fleet, dns.TypeSRV, "_pg._tcp.example.internal")
	sameAnswers(t, fleet, dns.TypeTXT, "txt.example.internal")

	var all []time.Duration
	for i := range 5 {
		name := fmt.Sprintf("new%d.example.internal", i)
		start := time.Now()
		srv.Put(fmt.Sprintf("/skydns/internal/example/new%d", i), fmt.Sprintf(`{"host":"10.0.3.%d"}`, i))
		d := reachAll(t, fleet, start, name, dns.TypeA, fmt.Sprintf("NOERROR:10.0.3.%d", i))
		logDelays(t, "put "+name, d)
		all = append(all, d...)
	}
	start := time.Now()
	srv.Delete("/skydns/internal/example/web/x2")
	d := reachAll(t, fleet, start, "web.example.internal", dns.TypeA, "NOERROR:10.0.1.1")
	logDelays(t, "delete web/x2", d)
	all = append(all, d...)
	start = time.Now()
	srv.Delete("/skydns/internal/example/new0")
	d = reachAll(t, fleet, start, "new0.example.internal", dns.TypeA, "NXDOMAIN:")
	logDelays(t, "delete new0", d)
	all = append(all, d...)
	slices.Sort(all)
	t.Logf("etcd change → served on both instances: median %v, max %v over %d observations (goal %v)",
		all[len(all)/2].Round(100*time.Microsecond), all[len(all)-1].Round(100*time.Microsecond), len(all), fleetGoal)

	// One instance dies hard; the other is not affected.
	fleet[0].kill(t)
	rest := fleet[1:]
	for range 20 {
		for _, netw := range []string{"udp", "tcp"} {
			r, err := query(t, netw, rest[0].addr, "web.example.internal", dns.TypeA)
			if err != nil || dnstest.RData(r) != "NOERROR:10.0.1.1" {
				t.Fatalf("%s after the other instance was killed: %v %v", netw, r, err)
			}
		}
	}
	if code, body := httpGet(t, rest[0].base+"/ready"); code != 200 {
		t.Fatalf("/ready of the survivor = %d %q", code, body)
	}
	start = time.Now()
	srv.Put("/skydns/internal/example/after", `{"host":"10.0.4.1"}`)
	logDelays(t, "put after the kill", reachAll(t, rest, start, "after.example.internal", dns.TypeA, "NOERROR:10.0.4.1"))
	start = time.Now()
	srv.Delete("/skydns/internal/example/txt")
	logDelays(t, "delete after the kill", reachAll(t, rest, start, "txt.example.internal", dns.TypeTXT, "NXDOMAIN:"))
	rest[0].p.stop(syscall.SIGTERM)
}

// TestScaleOutKubernetes: two dnsd on one kube-apiserver, as
// TestScaleOutEtcd. Skipped without the kube-apiserver binary (see
// scripts/k8s-tools.sh), except under CI=true.
func TestScaleOutKubernetes(t *testing.T) {
	cp := kubetest.StartFor(t)
	k := cp.Client
	ctx := context.Background()
	fleet := startFleet(t, 2, fmt.Sprintf(`  cluster.local:
    - kubernetes:
        kubeconfig: %s
        context: test
        ttl: 5s
        sync_timeout: 30s
`, cp.Kubeconfig))
	sameAnswers(t, fleet, dns.TypeA, "kubernetes.default.svc.cluster.local", "nope.default.svc.cluster.local")
	sameAnswers(t, fleet, dns.TypeSRV, "_https._tcp.kubernetes.default.svc.cluster.local")

	ns := "fleet"
	if _, err := k.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	reachAll(t, fleet, time.Now(), ns+".svc.cluster.local", dns.TypeA, "NOERROR:")
	create := func(name string) *corev1.Service {
		t.Helper()
		svc, err := k.CoreV1().Services(ns).Create(ctx, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return svc
	}
	for _, name := range []string{"api", "web"} {
		start := time.Now()
		svc := create(name)
		fqdn := name + "." + ns + ".svc.cluster.local"
		logDelays(t, "create "+fqdn, reachAll(t, fleet, start, fqdn, dns.TypeA, "NOERROR:"+svc.Spec.ClusterIP))
	}
	start := time.Now()
	if err := k.CoreV1().Services(ns).Delete(ctx, "api", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	logDelays(t, "delete api."+ns, reachAll(t, fleet, start, "api."+ns+".svc.cluster.local", dns.TypeA, "NXDOMAIN:"))
	sameAnswers(t, fleet, dns.TypeSRV, "_http._tcp.web."+ns+".svc.cluster.local")

	fleet[0].kill(t)
	rest := fleet[1:]
	for range 20 {
		r, err := query(t, "udp", rest[0].addr, "kubernetes.default.svc.cluster.local", dns.TypeA)
		if err != nil || r.Rcode != dns.RcodeSuccess || len(r.Answer) == 0 {
			t.Fatalf("after the other instance was killed: %v %v", r, err)
		}
	}
	if code, body := httpGet(t, rest[0].base+"/ready"); code != 200 {
		t.Fatalf("/ready of the survivor = %d %q", code, body)
	}
	start = time.Now()
	svc := create("after")
	logDelays(t, "create after the kill", reachAll(t, rest, start, "after."+ns+".svc.cluster.local", dns.TypeA, "NOERROR:"+svc.Spec.ClusterIP))
	rest[0].p.stop(syscall.SIGTERM)
}
