package e2e

// End-to-end tests of the forward source and the response cache through
// the built binary: real in-process upstream servers on loopback, a
// dnsd.yaml forwarding the root zone to them, dig-like queries.

import (
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/dnsd/dnsd/internal/dnstest"
	"github.com/dnsd/dnsd/sources/etcd/etcdtest"
)

// TestForwardCachingResolver: dnsd in front of an upstream answers like a
// caching resolver: forwarded answers, cache hits that never reach the
// upstream (across a reload too), local names untouched, and stale answers
// once the upstream is gone.
func TestForwardCachingResolver(t *testing.T) {
	up := dnstest.StartUpstream(t, nil)
	dir := t.TempDir()
	port, hport := freePort(t), freePort(t)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	writeFile(t, filepath.Join(dir, "dnsd.yaml"), fmt.Sprintf(`listen: ["%s"]
http: "127.0.0.1:%d"
cache: {serve_stale: 1h}
zones:
  example.internal:
    - hosts: {entries: ["10.0.0.10 db"]}
  .:
    - forward:
        upstreams: ["%s"]
        timeout: 300ms
        health_check: 100ms
`, addr, hport, up.Addr))
	p := startDnsd(t, dir)
	p.waitLog("dnsd started", 1)

	r, err := query(t, "udp", addr, "www.example.com", dns.TypeA)
	if err != nil {
		t.Fatal(err)
	}
	if got := dnstest.RData(r); got != "NOERROR:192.0.2.1" || !r.RecursionAvailable || r.Authoritative {
		t.Fatalf("forwarded answer %q ra=%v aa=%v", got, r.RecursionAvailable, r.Authoritative)
	}
	for _, netw := range []string{"udp", "tcp"} {
		r, err := query(t, netw, addr, "WWW.Example.COM", dns.TypeA)
		if err != nil || dnstest.RData(r) != "NOERROR:192.0.2.1" || r.Question[0].Name != "WWW.Example.COM." {
			t.Fatalf("%s cached answer: %v %v", netw, r, err)
		}
		if ttl := r.Answer[0].Header().Ttl; ttl > 300 || ttl < 290 {
			t.Fatalf("cached TTL %d", ttl)
		}
	}
	if n := up.Queries(); n != 1 {
		t.Fatalf("3 queries for one name reached the upstream %d times; want 1", n)
	}
	// Asked often (its packed answer kept), a cached answer's TTLs still
	// count down with time, a second per second, never up.
	start := time.Now()
	var first, prev uint32
	asked := 0 // all cache hits
	for i := 0; time.Since(start) < 3200*time.Millisecond; i++ {
		asked++
		r, err := query(t, "udp", addr, "www.example.com", dns.TypeA)
		if err != nil || dnstest.RData(r) != "NOERROR:192.0.2.1" {
			t.Fatalf("cached answer: %v %v", r, err)
		}
		ttl := r.Answer[0].Header().Ttl
		if i == 0 {
			first, prev = ttl, ttl
		}
		if ttl > prev {
			t.Fatalf("TTL went up from %d to %d", prev, ttl)
		}
		prev = ttl
		// The cache counts whole seconds since it stored the answer (a
		// moment before start): the drop is within a second of the time
		// gone by.
		if drop, gone := float64(first)-float64(ttl), time.Since(start).Seconds(); drop > gone+1.1 || drop < gone-1.1 {
			t.Fatalf("TTL %d %.1f s after %d: dropped %v", ttl, gone, first, drop)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if n := up.Queries(); n != 1 {
		t.Fatalf("cached answers reached the upstream: %d queries, want 1", n)
	}
	r, err = query(t, "udp", addr, "db.example.internal", dns.TypeA)
	if err != nil || dnstest.RData(r) != "NOERROR:10.0.0.10" || !r.Authoritative {
		t.Fatalf("local name: %v %v", r, err)
	}

	// An answer larger than the client's UDP size: TC=1, then the full
	// answer over TCP (from the cache).
	r, err = query(t, "udp", addr, "big.example.com", dns.TypeTXT)
	if err != nil || !r.Truncated || len(r.Answer) >= 20 {
		t.Fatalf("big answer over UDP without EDNS: %v %v", r, err)
	}
	r, err = query(t, "tcp", addr, "big.example.com", dns.TypeTXT)
	if err != nil || r.Truncated || len(r.Answer) != 20 {
		t.Fatalf("big answer over TCP: %v %v", r, err)
	}
	if n := up.Queries(); n != 2 {
		t.Fatalf("upstream asked %d times; want 2", n)
	}

	// A reload keeps the cache.
	p.signal(syscall.SIGHUP)
	p.waitLog("reloaded", 1)
	if r, err := query(t, "udp", addr, "www.example.com", dns.TypeA); err != nil || dnstest.RData(r) != "NOERROR:192.0.2.1" {
		t.Fatalf("after reload: %v %v", r, err)
	}
	if n := up.Queries(); n != 2 {
		t.Fatalf("the cache did not survive a reload: upstream asked %d times", n)
	}

	// The upstream dies: an expired entry is served stale (TTL 30), a name
	// never seen gets SERVFAIL.
	if r, err := query(t, "udp", addr, "short.example.com", dns.TypeA); err != nil || dnstest.RData(r) != "NOERROR:192.0.2.1" {
		t.Fatalf("short: %v %v", r, err)
	}
	up.Stop()
	time.Sleep(1200 * time.Millisecond)
	r, err = query(t, "udp", addr, "short.example.com", dns.TypeA)
	if err != nil || dnstest.RData(r) != "NOERROR:192.0.2.1" || r.Answer[0].Header().Ttl != 30 {
		t.Fatalf("stale answer: %v %v", r, err)
	}
	r, err = query(t, "udp", addr, "never.example.com", dns.TypeA)
	if err != nil || r.Rcode != dns.RcodeServerFailure {
		t.Fatalf("uncached name with the upstream dead: %v %v", r, err)
	}

	_, metrics := httpGet(t, fmt.Sprintf("http://127.0.0.1:%d/metrics", hport))
	for _, want := range []string{
		fmt.Sprintf("dnsd_cache_hits_total %d", 4+asked),
		"dnsd_cache_misses_total 5",
		"dnsd_cache_entries ",
		"dnsd_cache_stale_total 1",
		fmt.Sprintf(`dnsd_forward_requests_total{rcode="NOERROR",upstream="udp://%s"}`, up.Addr),
		fmt.Sprintf(`dnsd_forward_upstream_up{upstream="udp://%s"} 0`, up.Addr),
		"dnsd_forward_request_duration_seconds_bucket",
		`dnsd_responses_total{rcode="NOERROR",source="forward",view="default",zone="."}`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s\n%s", want, grep(metrics, "dnsd_cache"))
		}
	}
}

// TestForwardDeadUpstream: with one of two upstreams dead, every client
// query is answered (the dead one is tried, fails over, then marked down
// and skipped).
func TestForwardDeadUpstream(t *testing.T) {
	good := dnstest.StartUpstream(t, nil)
	dead := dnstest.StartUpstream(t, nil)
	dead.Stop()
	dir := t.TempDir()
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	writeFile(t, filepath.Join(dir, "dnsd.yaml"), fmt.Sprintf(`listen: ["%s"]
zones:
  .:
    - forward:
        upstreams: ["%s", "%s"]
        policy: round_robin
        timeout: 300ms
        max_fails: 2
`, addr, dead.Addr, good.Addr))
	p := startDnsd(t, dir)
	p.waitLog("dnsd started", 1)
	var slow int
	for i := 0; i < 40; i++ {
		start := time.Now()
		r, err := query(t, "udp", addr, fmt.Sprintf("n%d.example.com", i), dns.TypeA)
		if err != nil || dnstest.RData(r) != "NOERROR:192.0.2.1" {
			t.Fatalf("query %d: %v %v", i, r, err)
		}
		if time.Since(start) > 250*time.Millisecond {
			slow++
		}
	}
	if slow > 2 {
		t.Errorf("%d of 40 queries were slow: the dead upstream is not skipped", slow)
	}
	p.waitLog("forward upstream is down", 1)
}

// TestForwardLoopDetected: the upstream forwards back to dnsd. dnsd's loop
// probe comes back, the upstream is refused, and queries fail at once
// instead of circling.
func TestForwardLoopDetected(t *testing.T) {
	dir := t.TempDir()
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	relay := dnstest.StartUpstream(t, func(w dns.ResponseWriter, r *dns.Msg) {
		c := &dns.Client{Timeout: time.Second}
		resp, _, err := c.Exchange(r, addr)
		if err != nil {
			resp = new(dns.Msg).SetRcode(r, dns.RcodeServerFailure)
		}
		_ = w.WriteMsg(resp)
	})
	writeFile(t, filepath.Join(dir, "dnsd.yaml"), fmt.Sprintf("listen: [\"%s\"]\nzones:\n  .:\n    - forward: {upstreams: [\"%s\"], timeout: 500ms}\n", addr, relay.Addr))
	p := startDnsd(t, dir)
	p.waitLog("dnsd started", 1)
	p.waitLog("forwarding loop detected", 1)
	start := time.Now()
	r, err := query(t, "udp", addr, "www.example.com", dns.TypeA)
	if err != nil || r.Rcode != dns.RcodeServerFailure {
		t.Fatalf("query through a loop: %v %v", r, err)
	}
	if took := time.Since(start); took > 200*time.Millisecond {
		t.Errorf("a query through a detected loop took %v", took)
	}
}

// TestForwardCNAMEFromLocalSource: a CNAME held by a local source (etcd)
// to an external name is completed through the forward source, in one
// answer.
func TestForwardCNAMEFromLocalSource(t *testing.T) {
	up := dnstest.StartUpstream(t, nil)
	srv := etcdtest.Start(t, etcdtest.Options{})
	srv.Put("/skydns/internal/example/alias", `{"host":"www.example.com"}`)
	dir := t.TempDir()
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	writeFile(t, filepath.Join(dir, "dnsd.yaml"), fmt.Sprintf(`listen: ["%s"]
zones:
  example.internal:
    - etcd: {endpoints: ["%s"], ttl: 60s, sync_timeout: 10s}
  .:
    - forward: {upstreams: ["%s"]}
`, addr, srv.Endpoint(), up.Addr))
	p := startDnsd(t, dir)
	p.waitLog("dnsd started", 1)
	waitAnswer(t, addr, "alias.example.internal", dns.TypeA, "NOERROR:www.example.com.,192.0.2.1")
	r, err := query(t, "udp", addr, "alias.example.internal", dns.TypeA)
	if err != nil || len(r.Answer) != 2 || r.Answer[1].Header().Name != "www.example.com." {
		t.Fatalf("CNAME chain: %v %v", r, err)
	}
	if n := up.Queries(); n != 1 {
		t.Fatalf("upstream asked %d times; want 1 (www.example.com, then cached)", n)
	}
}

// POST /cache/flush empties the response cache, or with ?name= drops that
// name and the names below it; GET is 405.
func TestForwardCacheFlush(t *testing.T) {
	up := dnstest.StartUpstream(t, nil)
	s := startYAML(t, fmt.Sprintf("listen: [\"LISTEN\"]\nhttp: \"HTTP\"\nzones:\n  .:\n    - forward: {upstreams: [%q]}\n", up.Addr), nil)
	names := []string{"example.com", "a.example.com", "b.a.example.com", "notexample.com", "example.org"}
	for _, n := range names {
		waitAnswer(t, s.addr, n, dns.TypeA, "NOERROR:192.0.2.1")
	}
	post := func(query string) (int, string) {
		t.Helper()
		resp, err := http.Post(s.base+"/cache/flush"+query, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := post("?name=Example.COM"); code != 200 || strings.TrimSpace(body) != `{"removed": 3}` {
		t.Fatalf("flush example.com: %d %q, want 200 {\"removed\": 3}", code, body)
	}
	if v := metricValue(scrape(t, s.base), "dnsd_cache_entries", ""); v != 2 {
		t.Errorf("dnsd_cache_entries = %v after the flush, want 2", v)
	}
	before := up.Queries()
	waitAnswer(t, s.addr, "a.example.com", dns.TypeA, "NOERROR:192.0.2.1")
	waitAnswer(t, s.addr, "example.org", dns.TypeA, "NOERROR:192.0.2.1")
	if got := up.Queries() - before; got != 1 {
		t.Errorf("%d upstream queries for a flushed and a kept name, want 1 (the flushed one)", got)
	}
	if code, _ := httpGet(t, s.base+"/cache/flush"); code != http.StatusMethodNotAllowed {
		t.Errorf("GET /cache/flush: %d, want 405", code)
	}
	if code, _ := post("?name=bad..name"); code != http.StatusBadRequest {
		t.Errorf("flush of a malformed name: %d, want 400", code)
	}
	// An empty name (a script's unset variable) flushes nothing.
	if code, body := post("?name="); code != http.StatusBadRequest {
		t.Errorf("flush with an empty name: %d %q, want 400", code, body)
	}
	if code, body := post(""); code != 200 || strings.TrimSpace(body) != `{"removed": 3}` {
		t.Fatalf("flush all: %d %q, want 200 {\"removed\": 3}", code, body)
	}
}

// TestRootHostsParentsForwarded: dnsd as a machine's resolver, /etc/hosts
// then forward in the root zone. The parents of the hosts names
// (example.com, com) are the world's: their records come from upstream;
// an upstream NXDOMAIN for one of them is answered NODATA, since the
// hosts name below it exists; the hosts names themselves are local.
func TestRootHostsParentsForwarded(t *testing.T) {
	up := dnstest.StartUpstream(t, func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(r)
		q := r.Question[0]
		switch {
		case q.Name == "example.com." && q.Qtype == dns.TypeMX:
			m.Answer = append(m.Answer, &dns.MX{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeMX, Class: dns.ClassINET, Ttl: 300}, Preference: 10, Mx: "mail.example.com."})
		case q.Name == "example.com." || q.Name == "com.":
		default:
			m.Rcode = dns.RcodeNameError
		}
		_ = w.WriteMsg(m)
	})
	s := startYAML(t, fmt.Sprintf(`listen: ["LISTEN"]
zones:
  .:
    - hosts: {files: [hosts]}
    - forward: {upstreams: [%q]}
`, up.Addr), map[string]string{"hosts": "127.0.1.1 myhost.example.com myhost\n10.0.0.9 db.corp.invalid\n"})
	for _, tc := range []struct {
		name string
		qt   uint16
		want string
		aa   bool
	}{
		{"example.com.", dns.TypeMX, "NOERROR:10 mail.example.com.", false},
		{"myhost.example.com.", dns.TypeA, "NOERROR:127.0.1.1", true},
		{"myhost.example.com.", dns.TypeMX, "NOERROR:", true}, // a hosts name: NODATA, not forwarded
		{"corp.invalid.", dns.TypeA, "NOERROR:", true},        // upstream NXDOMAIN, local names below
	} {
		r := dnstest.Ask(t, s.addr, tc.name, tc.qt)
		if got := dnstest.RData(r); got != tc.want || r.Authoritative != tc.aa {
			t.Errorf("%s %s: %s AA=%v, want %s AA=%v", tc.name, dns.TypeToString[tc.qt], got, r.Authoritative, tc.want, tc.aa)
		}
	}
	if n := up.Queries(); n != 2 {
		t.Errorf("upstream asked %d times, want 2 (example.com MX, corp.invalid A)", n)
	}
}
