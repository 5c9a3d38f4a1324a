package e2e

// Failure injection through the built binary: for each fault, dnsd keeps
// answering what it knew (no SERVFAIL or NXDOMAIN for names it had),
// reports the fault (/ready, metrics, one log line per change of state)
// and recovers by itself. Each test logs a line
//
//	FAULT <name> recovery=<duration>
//
// measured from the end of the fault to the first correct fresh answer;
// docs/reliability.md quotes them. Bounds on those times are generous:
// they are reported, not asserted.

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
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

// prober is a set of clients querying names in a loop over UDP, each
// answer checked against the answers acceptable for that name (rdata
// strings as rdata renders them). An answer outside the set, or none
// within the timeout, is a failure.
type prober struct {
	addr string
	stop chan struct{}
	wg   sync.WaitGroup

	mu      sync.Mutex
	want    map[string]map[string]bool
	n       int
	bad     int
	samples []string
}

func startProber(t *testing.T, addr string, clients int, want map[string][]string) *prober {
	t.Helper()
	p := &prober{addr: addr, stop: make(chan struct{}), want: map[string]map[string]bool{}}
	names := make([]string, 0, len(want))
	for name, answers := range want {
		names = append(names, name)
		p.allow(name, answers...)
	}
	for i := range clients {
		p.wg.Add(1)
		go p.run(names, i)
	}
	t.Cleanup(p.halt)
	return p
}

func (p *prober) run(names []string, offset int) {
	defer p.wg.Done()
	c := &dns.Client{Timeout: 2 * time.Second}
	for i := offset; ; i++ {
		select {
		case <-p.stop:
			return
		default:
		}
		name := names[i%len(names)]
		m := new(dns.Msg)
		m.SetQuestion(dns.Fqdn(name), dns.TypeA)
		r, _, err := c.Exchange(m, p.addr)
		got := ""
		if err != nil {
			got = "error: " + err.Error()
		} else {
			got = dnstest.RData(r)
		}
		p.mu.Lock()
		p.n++
		if !p.want[name][got] {
			p.bad++
			if len(p.samples) < 5 {
				p.samples = append(p.samples, fmt.Sprintf("%s %s: %s", time.Now().Format("15:04:05.000"), name, got))
			}
		}
		p.mu.Unlock()
		time.Sleep(5 * time.Millisecond)
	}
}

// allow adds acceptable answers for name.
func (p *prober) allow(name string, answers ...string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.want[name] == nil {
		p.want[name] = map[string]bool{}
	}
	for _, a := range answers {
		p.want[name][a] = true
	}
}

func (p *prober) halt() {
	select {
	case <-p.stop:
	default:
		close(p.stop)
	}
	p.wg.Wait()
}

// finish stops the clients and fails the test if any answer was wrong or
// missing.
func (p *prober) finish(t *testing.T) {
	t.Helper()
	p.halt()
	p.mu.Lock()
	defer p.mu.Unlock()
	t.Logf("prober: %d queries, %d failed or wrong", p.n, p.bad)
	if p.n == 0 {
		t.Error("prober sent no query")
	}
	if p.bad > 0 {
		t.Errorf("%d of %d answers failed or were wrong during the fault, e.g.:\n%s", p.bad, p.n, strings.Join(p.samples, "\n"))
	}
}

// recovered polls ok until it holds (up to limit) and reports the time
// since the fault ended in the suite's parseable form.
func recovered(t *testing.T, fault string, end time.Time, limit time.Duration, ok func() bool) time.Duration {
	t.Helper()
	for !ok() {
		if time.Since(end) > limit {
			t.Fatalf("FAULT %s: not recovered %s after the fault ended", fault, limit)
		}
		time.Sleep(10 * time.Millisecond)
	}
	d := time.Since(end)
	t.Logf("FAULT %s recovery=%s", fault, d.Round(time.Millisecond))
	return d
}

// answers reports whether name's A answer is want now.
func answers(t *testing.T, addr, name, want string) bool {
	r, err := query(t, "udp", addr, name, dns.TypeA)
	return err == nil && dnstest.RData(r) == want
}

// eventuallyMetric polls /metrics until the series name{labels} has value
// want.
func eventuallyMetric(t *testing.T, base, name, labels string, want float64) {
	t.Helper()
	dnstest.EventuallyNil(t, 10*time.Second, func() error {
		m := scrape(t, base)
		if v := metricValue(m, name, labels); v != want {
			return fmt.Errorf("%s{%s} = %v, want %v:\n%s", name, labels, v, want, grep(m, name))
		}
		return nil
	})
}

// logCount counts the log lines of p that contain every one of subs.
func logCount(p *proc, subs ...string) int {
	n := 0
	for _, l := range strings.Split(p.stderr.String(), "\n") {
		all := true
		for _, s := range subs {
			all = all && strings.Contains(l, s)
		}
		if all {
			n++
		}
	}
	return n
}

// etcd killed while dnsd serves, a change (and a compaction) made before
// dnsd reconnects, etcd back: the last data is served throughout, the
// outage is reported and logged once, the change is served afterwards.
func TestFailureEtcdKilled(t *testing.T) {
	srv := etcdtest.Start(t, etcdtest.Options{})
	srv.Put("/skydns/internal/example/a", `{"host":"10.0.0.1"}`)
	srv.Put("/skydns/internal/example/b", `{"host":"10.0.0.2"}`)
	srv.Put("/skydns/internal/example/c", `{"host":"10.0.0.3"}`)
	s := startYAML(t, fmt.Sprintf(`listen: ["LISTEN"]
http: "HTTP"
zones:
  example.internal:
    - etcd: {endpoints: ["%s"], sync_timeout: 5s}
  static.internal:
    - hosts: {entries: ["10.9.0.1 s"]}
`, srv.Endpoint()), nil)
	waitReady(t, s.base, 200)
	waitAnswer(t, s.addr, "a.example.internal", dns.TypeA, "NOERROR:10.0.0.1")
	pr := startProber(t, s.addr, 2, map[string][]string{
		"a.example.internal": {"NOERROR:10.0.0.1"},
		"b.example.internal": {"NOERROR:10.0.0.2", "NOERROR:10.0.0.22"},
		"c.example.internal": {"NOERROR:10.0.0.3", "NXDOMAIN:"},
		"s.static.internal":  {"NOERROR:10.9.0.1"},
	})

	srv.Stop()
	start := time.Now()
	took := waitReadyCause(t, s.base, 200, causeWithin, "etcd "+srv.Endpoint(), "connection refused")
	t.Logf("etcd down: reported in /ready after %s", took.Round(time.Millisecond))
	eventuallyMetric(t, s.base, "dnsd_etcd_up", `backend="`, 0)
	time.Sleep(3*time.Second - time.Since(start))

	srv.Restart()
	end := time.Now()
	srv.Put("/skydns/internal/example/b", `{"host":"10.0.0.22"}`)
	srv.Delete("/skydns/internal/example/c")
	srv.Compact()
	recovered(t, "etcd-killed", end, 30*time.Second, func() bool {
		return answers(t, s.addr, "b.example.internal", "NOERROR:10.0.0.22") && answers(t, s.addr, "c.example.internal", "NXDOMAIN:")
	})
	eventuallyMetric(t, s.base, "dnsd_etcd_up", `backend="`, 1)
	waitReady(t, s.base, 200)
	if _, body := httpGet(t, s.base+"/ready"); body != "ready\n" {
		t.Errorf("/ready after recovery: %q", body)
	}
	pr.finish(t)
	if n := logCount(s.proc, "level=WARN", "etcd unreachable"); n != 1 {
		t.Errorf("%d WARN lines for one etcd outage, want 1", n)
	}
	if n := logCount(s.proc, "level=INFO", "etcd reachable again"); n != 1 {
		t.Errorf("%d recovery lines, want 1", n)
	}
}

// The kube-apiserver killed and restarted: cluster names keep answering,
// /ready says why, one line each way, and a service created after the
// restart is served.
func TestFailureKubeAPIServerKilled(t *testing.T) {
	cp := kubetest.StartFor(t)
	createService := func(name, ip string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := cp.Client.CoreV1().Services("default").Create(ctx, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec:       corev1.ServiceSpec{ClusterIP: ip, Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}
	createService("web", "10.3.0.50")
	s := startYAML(t, fmt.Sprintf(`listen: ["LISTEN"]
http: "HTTP"
zones:
  cluster.local:
    - kubernetes: {kubeconfig: %s, context: test, sync_timeout: 10s}
`, cp.Kubeconfig), nil)
	waitReady(t, s.base, 200)
	waitAnswer(t, s.addr, "web.default.svc.cluster.local", dns.TypeA, "NOERROR:10.3.0.50")
	pr := startProber(t, s.addr, 2, map[string][]string{
		"web.default.svc.cluster.local":        {"NOERROR:10.3.0.50"},
		"kubernetes.default.svc.cluster.local": {"NOERROR:10.3.0.1"},
	})

	cp.StopAPIServer()
	took := waitReadyCause(t, s.base, 200, 10*time.Second, "kubernetes "+cp.URL, "connection refused")
	t.Logf("API server down: reported in /ready %s after it stopped", took.Round(time.Millisecond))
	time.Sleep(2 * time.Second)
	if err := cp.StartAPIServer(); err != nil {
		t.Fatal(err)
	}
	end := time.Now()
	createService("web2", "10.3.0.51")
	recovered(t, "kube-apiserver-killed", end, 60*time.Second, func() bool {
		return answers(t, s.addr, "web2.default.svc.cluster.local", "NOERROR:10.3.0.51")
	})
	pr.finish(t)
	if n := logCount(s.proc, "level=WARN", "kubernetes API server unreachable"); n != 1 {
		t.Errorf("%d WARN lines for one API server outage, want 1", n)
	}
	if n := logCount(s.proc, "level=ERROR"); n != 0 {
		t.Errorf("%d ERROR lines during an API server outage, want none", n)
	}
	s.waitLog("kubernetes API server reachable again", 1)
}

// Every forward upstream black-holed (queries vanish), then back: a cached
// name is served stale meanwhile, both upstreams are reported down, and
// after the fault the fresh answer is served and both are up again.
func TestFailureUpstreamsBlackholed(t *testing.T) {
	var dark atomic.Bool
	var ip atomic.Value
	ip.Store("192.0.2.1")
	handler := func(w dns.ResponseWriter, r *dns.Msg) {
		if dark.Load() {
			return // black hole: no answer at all
		}
		m := new(dns.Msg)
		m.SetReply(r)
		m.RecursionAvailable = true
		if q := r.Question[0]; q.Qtype == dns.TypeA {
			m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 1}, A: net.ParseIP(ip.Load().(string))})
		}
		_ = w.WriteMsg(m)
	}
	u1, u2 := dnstest.StartUpstream(t, handler), dnstest.StartUpstream(t, handler)
	s := startYAML(t, fmt.Sprintf(`listen: ["LISTEN"]
http: "HTTP"
cache: {serve_stale: 1h}
zones:
  local.internal:
    - hosts: {entries: ["10.9.0.1 s"]}
  .:
    - forward:
        upstreams: ["%s", "%s"]
        timeout: 300ms
        health_check: 100ms
        max_fails: 2
`, u1.Addr, u2.Addr), nil)
	waitAnswer(t, s.addr, "cached.example.com", dns.TypeA, "NOERROR:192.0.2.1")

	dark.Store(true)
	start := time.Now()
	time.Sleep(1100 * time.Millisecond) // the cached answer's TTL (1 s) runs out
	pr := startProber(t, s.addr, 2, map[string][]string{
		"cached.example.com": {"NOERROR:192.0.2.1"}, // stale until the fault ends
		"s.local.internal":   {"NOERROR:10.9.0.1"},
	})
	for _, u := range []string{u1.Addr, u2.Addr} {
		eventuallyMetric(t, s.base, "dnsd_forward_upstream_up", u, 0)
	}
	t.Logf("upstreams black-holed: both reported down after %s", time.Since(start).Round(time.Millisecond))
	time.Sleep(time.Second)

	pr.allow("cached.example.com", "NOERROR:192.0.2.2")
	ip.Store("192.0.2.2")
	dark.Store(false)
	end := time.Now()
	// A name not in the cache is answered as soon as an upstream answers;
	// a name served stale is refreshed once a health probe has found an
	// upstream up again (not only 30 s, RFC 8767's stale-refresh time,
	// after its last failed refresh).
	n := 0
	recovered(t, "upstreams-blackholed-uncached", end, 30*time.Second, func() bool {
		n++
		return answers(t, s.addr, fmt.Sprintf("new%d.example.com", n), "NOERROR:192.0.2.2")
	})
	recovered(t, "upstreams-blackholed", end, 10*time.Second, func() bool {
		return answers(t, s.addr, "cached.example.com", "NOERROR:192.0.2.2")
	})
	for _, u := range []string{u1.Addr, u2.Addr} {
		eventuallyMetric(t, s.base, "dnsd_forward_upstream_up", u, 1)
	}
	pr.finish(t)
	for _, u := range []string{u1.Addr, u2.Addr} {
		if n := logCount(s.proc, "forward upstream is down", u); n != 1 {
			t.Errorf("%s: %d 'down' lines, want 1", u, n)
		}
		if n := logCount(s.proc, "forward upstream is up again", u); n != 1 {
			t.Errorf("%s: %d 'up again' lines, want 1", u, n)
		}
	}
}

// A hosts file deleted, truncated, replaced by binary junk and rewritten in
// place: names it had never fail; each time the next good content is
// served. A file emptied on purpose (it stays empty) is applied after the
// 1 s grace: its names go away.
func TestFailureHostsFile(t *testing.T) {
	good := "10.0.0.1 a.example.internal\n10.0.0.2 b.example.internal\n"
	s := startYAML(t, `listen: ["LISTEN"]
http: "HTTP"
zones:
  example.internal:
    - hosts: {files: [hosts]}
`, map[string]string{"hosts": good})
	path := filepath.Join(s.dir, "hosts")
	waitAnswer(t, s.addr, "a.example.internal", dns.TypeA, "NOERROR:10.0.0.1")
	pr := startProber(t, s.addr, 2, map[string][]string{
		"a.example.internal": {"NOERROR:10.0.0.1"},
		"b.example.internal": {"NOERROR:10.0.0.2"},
	})
	replace := func(content string) { // as an editor or a deployment tool does
		t.Helper()
		tmp := path + ".tmp"
		writeFile(t, tmp, content)
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}

	// Deleted: the last good data stays; a new file is served.
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	s.waitLog("hosts file unreadable, keeping its last good data", 1)
	time.Sleep(500 * time.Millisecond)
	replace(good + "10.0.0.3 c.example.internal\n")
	end := time.Now()
	recovered(t, "hosts-deleted", end, 10*time.Second, func() bool { return answers(t, s.addr, "c.example.internal", "NOERROR:10.0.0.3") })

	// Truncated (an in-place rewrite starts so), refilled within the grace.
	if err := os.Truncate(path, 0); err != nil {
		t.Fatal(err)
	}
	time.Sleep(400 * time.Millisecond)
	writeFile(t, path, good+"10.0.0.4 d.example.internal\n")
	end = time.Now()
	recovered(t, "hosts-truncated", end, 10*time.Second, func() bool { return answers(t, s.addr, "d.example.internal", "NOERROR:10.0.0.4") })

	// Binary junk in which no line parses: the last good data stays.
	replace("\x7fELF\x02\x01\x01\x00\x00\x00\x00\n\x00\x00\x03\x00>\x00\x01\x00\xff\xfe\n~~~~ \x01\x02\x03\n")
	s.waitLog("hosts file has no valid line, keeping its last good data", 1)
	time.Sleep(500 * time.Millisecond)
	replace(good + "10.0.0.5 e.example.internal\n")
	end = time.Now()
	recovered(t, "hosts-garbage", end, 10*time.Second, func() bool { return answers(t, s.addr, "e.example.internal", "NOERROR:10.0.0.5") })

	// Rewritten in place in two writes with a pause: never half-served.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = f.WriteString("10.0.0.6 f.example.internal\n")
	time.Sleep(30 * time.Millisecond)
	_, _ = f.WriteString(good)
	f.Close()
	end = time.Now()
	recovered(t, "hosts-rewritten-in-place", end, 10*time.Second, func() bool { return answers(t, s.addr, "f.example.internal", "NOERROR:10.0.0.6") })
	pr.finish(t)

	// Emptied on purpose: applied once it has stayed empty for 1 s.
	if err := os.Truncate(path, 0); err != nil {
		t.Fatal(err)
	}
	end = time.Now()
	d := recovered(t, "hosts-emptied-on-purpose", end, 10*time.Second, func() bool { return answers(t, s.addr, "a.example.internal", "NXDOMAIN:") })
	if d < 900*time.Millisecond {
		t.Errorf("an empty file was applied after %s, before its 1 s grace", d)
	}
}

// dnsd.yaml edited to garbage then SIGHUP: the running configuration keeps
// serving, the error is counted and logged with FILE:LINE:COL; fixed and
// SIGHUP again: the new configuration is served.
func TestFailureConfigGarbage(t *testing.T) {
	cfg := `listen: ["LISTEN"]
http: "HTTP"
zones:
  example.internal:
    - hosts: {entries: ["10.0.0.1 a"%s]}
`
	s := startYAML(t, fmt.Sprintf(cfg, ""), nil)
	waitAnswer(t, s.addr, "a.example.internal", dns.TypeA, "NOERROR:10.0.0.1")
	pr := startProber(t, s.addr, 2, map[string][]string{"a.example.internal": {"NOERROR:10.0.0.1"}})

	s.reload(t, "listen: [\"LISTEN\"]\nzones:\n  example.internal:\n    - hosts: {entries: [\"10.0.0.1 a\"], ttl: soon}\n    - hsots: {}\n\x00\x01garbage: [\n", false, 1)
	if !regexp.MustCompile(`dnsd\.yaml:\d+:\d+`).MatchString(grep(s.stderr.String(), "reload failed")) {
		t.Errorf("reload error without FILE:LINE:COL:\n%s", grep(s.stderr.String(), "reload failed"))
	}
	eventuallyMetric(t, s.base, "dnsd_reload_total", `result="error"`, 1)
	time.Sleep(300 * time.Millisecond)

	end := time.Now()
	s.reload(t, fmt.Sprintf(cfg, `, "10.0.0.2 b"`), true, 1)
	recovered(t, "config-garbage", end, 10*time.Second, func() bool { return answers(t, s.addr, "b.example.internal", "NOERROR:10.0.0.2") })
	pr.finish(t)
	eventuallyMetric(t, s.base, "dnsd_reload_total", `result="success"`, 1)
}

// 50 SIGHUPs alternating two configurations while 4 clients query names
// of a hosts file, inline entries that differ between the two, and a
// forwarded name: not one failed or wrong answer, no failed reload.
func TestFailureReloadStorm(t *testing.T) {
	up := dnstest.StartUpstream(t, nil)
	cfg := `listen: ["LISTEN"]
http: "HTTP"
zones:
  example.internal:
    - hosts: {files: [hosts], entries: ["%s flip"]}
  .:
    - forward: {upstreams: ["%s"]}
`
	s := startYAML(t, fmt.Sprintf(cfg, "10.0.0.10", up.Addr), map[string]string{"hosts": "10.0.0.1 a.example.internal\n"})
	waitAnswer(t, s.addr, "flip.example.internal", dns.TypeA, "NOERROR:10.0.0.10")
	pr := startProber(t, s.addr, 4, map[string][]string{
		"a.example.internal":    {"NOERROR:10.0.0.1"},
		"flip.example.internal": {"NOERROR:10.0.0.10", "NOERROR:10.0.0.11", "NOERROR:10.0.0.12"},
		"www.example.com":       {"NOERROR:192.0.2.1"},
	})
	var last time.Time
	for i := range 50 {
		ip := []string{"10.0.0.11", "10.0.0.10"}[i%2]
		if i == 49 {
			ip = "10.0.0.12" // the last configuration is told apart
		}
		tmp := s.cfg + ".tmp"
		writeFile(t, tmp, s.expand(fmt.Sprintf(cfg, ip, up.Addr)))
		if err := os.Rename(tmp, s.cfg); err != nil {
			t.Fatal(err)
		}
		s.signal(syscall.SIGHUP)
		last = time.Now()
		time.Sleep(40 * time.Millisecond)
	}
	recovered(t, "reload-storm", last, 30*time.Second, func() bool {
		return answers(t, s.addr, "flip.example.internal", "NOERROR:10.0.0.12")
	})
	pr.finish(t)
	m := scrape(t, s.base)
	if v := metricValue(m, "dnsd_reload_total", `result="error"`); v != 0 {
		t.Errorf("%v failed reloads during the storm", v)
	}
	t.Logf("reloads applied: %v", metricValue(m, "dnsd_reload_total", `result="success"`))
	if !answers(t, s.addr, "flip.example.internal", "NOERROR:10.0.0.12") {
		t.Error("after the storm the last configuration is not the one served")
	}
}
