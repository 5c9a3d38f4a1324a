package forward

import (
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/dnsd/dnsd/internal/dnstest"
	"github.com/dnsd/dnsd/pipeline"
)

func TestKindAndExcept(t *testing.T) {
	u := startUpstream(t)
	s := newTestSource(t, poolOpts(u.Addr), defaultCacheConfig(), "corp.internal.", "lan.")
	if s.Kind() != Name || s.Kind() != "forward" {
		t.Fatalf("Kind() = %q", s.Kind())
	}
	for _, name := range []string{"corp.internal.", "a.b.corp.internal.", "x.lan."} {
		if r := s.lookup(t, name, dns.TypeA); r.Status != pipeline.NotMine {
			t.Errorf("%s is excepted: status %d", name, r.Status)
		}
	}
	for _, name := range []string{"xcorp.internal.", "internal.", "lan.example."} {
		if r := s.lookup(t, name, dns.TypeA); r.Status != pipeline.Answered {
			t.Errorf("%s is not excepted: status %d", name, r.Status)
		}
	}
	if u.count("corp.internal.") != 0 || u.count("a.b.corp.internal.") != 0 {
		t.Fatal("an excepted name was forwarded")
	}
}

// A second query is answered from the cache, with TTLs that go down with
// the entry's age, and goes upstream again once expired.
func TestCacheHitMissExpiry(t *testing.T) {
	u := startUpstream(t)
	s := newTestSource(t, poolOpts(u.Addr), defaultCacheConfig())
	if got := answerA(s.lookup(t, "www.example.", dns.TypeA)); got != "NOERROR:192.0.2.1/300" {
		t.Fatalf("first answer %s", got)
	}
	s.clock.advance(10*time.Second + 300*time.Millisecond)
	if got := answerA(s.lookup(t, "www.example.", dns.TypeA)); got != "NOERROR:192.0.2.1/290" {
		t.Fatalf("cached answer after 10.3 s: %s", got)
	}
	r1 := s.lookup(t, "www.example.", dns.TypeA)
	if u.count("www.example.") != 1 {
		t.Fatalf("upstream asked %d times; want 1", u.count("www.example."))
	}
	// Responses of one second are shared (no copy per query).
	if r2 := s.lookup(t, "www.example.", dns.TypeA); r1.Msg != r2.Msg {
		t.Error("two hits in the same second rendered two messages")
	}
	if h, m := counterValue(s.met.hits), counterValue(s.met.misses); h != 3 || m != 1 {
		t.Fatalf("hits %v misses %v; want 3, 1", h, m)
	}
	// Other type, DO or CD: other entries.
	s.lookup(t, "www.example.", dns.TypeAAAA)
	s.lookupFlags(t, "www.example.", dns.TypeA, true, false)
	s.lookupFlags(t, "www.example.", dns.TypeA, false, true)
	if n := u.count("www.example."); n != 4 {
		t.Fatalf("type/DO/CD variants: upstream asked %d times, want 4", n)
	}
	s.clock.advance(290 * time.Second)
	u.set(func(u *upstreamServer) { u.ip = "192.0.2.2" })
	if got := answerA(s.lookup(t, "www.example.", dns.TypeA)); got != "NOERROR:192.0.2.2/300" {
		t.Fatalf("after expiry: %s", got)
	}
}

// TestSaysWhenItWaits: a lookup that will ask upstream says so first
// (pipeline.Waiting: a TCP connection's reader lets the queries behind it
// go on); one answered from the cache does not.
func TestSaysWhenItWaits(t *testing.T) {
	u := startUpstream(t)
	s := newTestSource(t, poolOpts(u.Addr), defaultCacheConfig())
	var said int
	ctx := pipeline.WithWaitHook(context.Background(), func() { said++ })
	q := &pipeline.Question{Name: "www.example.", Type: dns.TypeA, Zone: "."}
	if got := answerA(s.Lookup(ctx, q)); got != "NOERROR:192.0.2.1/300" || said != 1 {
		t.Fatalf("miss: %s, said it waits %d times; want 1", got, said)
	}
	if got := answerA(s.Lookup(ctx, q)); got != "NOERROR:192.0.2.1/300" || said != 1 {
		t.Fatalf("hit: %s, said it waits %d times in all; want still 1", got, said)
	}
	if u.count("www.example.") != 1 {
		t.Fatalf("upstream asked %d times; want 1", u.count("www.example."))
	}
}

// Pin and Same (kept answers): an answer is pinned to the cache entry it
// came from, with the entry's age; Same is true while that entry would
// answer with the pinned records, and says its age now (the cache's own
// answer then has each TTL lowered by the seconds since the pin); false
// after expiry, once the entry was replaced or flushed, never for another
// question or an excepted name. A true Same counts as a cache hit.
func TestPinSame(t *testing.T) {
	u := startUpstream(t)
	s := newTestSource(t, poolOpts(u.Addr), defaultCacheConfig(), "lan.")
	s.lookup(t, "www.example.", dns.TypeA)
	m := s.lookup(t, "www.example.", dns.TypeA).Msg
	before := s.cache.peek(Key{Name: "www.example.", Type: dns.TypeA, Upstreams: s.pool.answers}, s.cache.now()).hits.Load()
	tok, pinAge := s.Pin("www.example.", dns.TypeA, false, false, m)
	if tok == nil {
		t.Fatal("Pin is nil for the message the cache answers with")
	}
	if got := tok.(*entry).hits.Load(); got != before {
		t.Errorf("Pin counted a hit towards prefetching: %d, was %d", got, before)
	}
	hits := counterValue(s.met.hits)
	if age, ok := s.Same(tok); !ok || age != pinAge {
		t.Fatalf("Same for the message the cache answers with: age %d (pinned at %d) %v", age, pinAge, ok)
	}
	if got := counterValue(s.met.hits); got != hits+1 {
		t.Errorf("hits %v after Same, want %v", got, hits+1)
	}
	for _, tc := range []struct {
		name   string
		qt     uint16
		do, cd bool
	}{{"www.example.", dns.TypeAAAA, false, false}, {"www.example.", dns.TypeA, true, false}, {"www.example.", dns.TypeA, false, true}, {"other.example.", dns.TypeA, false, false}, {"x.lan.", dns.TypeA, false, false}} {
		if tok, _ := s.Pin(tc.name, tc.qt, tc.do, tc.cd, m); tok != nil {
			t.Errorf("Pin for another question %+v", tc)
		}
	}
	if _, ok := s.Same(nil); ok {
		t.Error("Same is true for a nil token")
	}
	if _, ok := s.Same("x"); ok {
		t.Error("Same is true for a token that is no entry")
	}
	// As the entry ages, Same says its age; the cache answers with the
	// pinned records, each TTL lowered by the seconds since the pin.
	for _, step := range []time.Duration{1100 * time.Millisecond, 2 * time.Second, 30 * time.Second} {
		s.clock.advance(step)
		age, ok := s.Same(tok)
		if !ok {
			t.Fatalf("Same is false %v later", step)
		}
		aged := age - pinAge
		now := s.lookup(t, "www.example.", dns.TypeA).Msg
		if got, want := now.Answer[0].Header().Ttl, m.Answer[0].Header().Ttl-aged; got != want || aged == 0 {
			t.Fatalf("aged %d: the cache answers with TTL %d, the pinned answer lowered by it is %d", aged, got, want)
		}
	}
	m = s.lookup(t, "www.example.", dns.TypeA).Msg
	tok, pinAge = s.Pin("www.example.", dns.TypeA, false, false, m)
	if pinAge != 33 {
		t.Fatalf("pinned at age %d, want 33", pinAge)
	}
	s.cache.Flush("example.")
	if _, ok := s.Same(tok); ok {
		t.Fatal("Same is true after the entry was flushed")
	}
	m = s.lookup(t, "www.example.", dns.TypeA).Msg
	tok, _ = s.Pin("www.example.", dns.TypeA, false, false, m)
	s.clock.advance(300 * time.Second)
	if _, ok := s.Same(tok); ok {
		t.Fatal("Same is true after expiry")
	}
	s.lookup(t, "www.example.", dns.TypeA) // fetched again: the entry is replaced
	if _, ok := s.Same(tok); ok {
		t.Fatal("Same is true for a replaced entry")
	}

	// A record living longer than its entry (the entry lives for the
	// smallest TTL) is answered as stored in the entry's first second and
	// capped after: such an answer is pinned only after that second.
	k := Key{Name: "two.example.", Type: dns.TypeA, Upstreams: s.pool.answers}
	two := new(dns.Msg)
	two.SetQuestion(k.Name, k.Type)
	two.Response = true
	two.Answer = []dns.RR{dnstest.MustRR(t, "two.example. 300 IN A 192.0.2.7")}
	two.Ns = []dns.RR{dnstest.MustRR(t, "example. 60 IN NS ns.example.")}
	m = s.cache.Insert(k, two)
	if tok, _ = s.Pin(k.Name, k.Type, false, false, m); tok != nil {
		t.Fatal("pinned in its first second an answer whose records outlive the entry")
	}
	s.clock.advance(time.Second)
	m = s.lookup(t, k.Name, k.Type).Msg
	if got := m.Answer[0].Header().Ttl; got != 59 {
		t.Fatalf("a second later the record's TTL is %d, want 59", got)
	}
	if tok, pinAge = s.Pin(k.Name, k.Type, false, false, m); tok == nil || pinAge != 1 {
		t.Fatalf("a second later: pinned %v at %d", tok != nil, pinAge)
	}
	s.clock.advance(time.Second)
	if age, ok := s.Same(tok); !ok || age != 2 {
		t.Fatalf("pinned once capped: age %d %v", age, ok)
	}
}

func TestCacheMinMaxTTL(t *testing.T) {
	u := startUpstream(t)
	cc := defaultCacheConfig()
	cc.MinTTL, cc.MaxTTL = 60*time.Second, 120*time.Second
	s := newTestSource(t, poolOpts(u.Addr), cc)
	u.set(func(u *upstreamServer) { u.ttl = 5 })
	if got := answerA(s.lookup(t, "short.example.", dns.TypeA)); got != "NOERROR:192.0.2.1/60" {
		t.Fatalf("ttl 5 with min_ttl 60: %s", got)
	}
	u.set(func(u *upstreamServer) { u.ttl = 86400 })
	if got := answerA(s.lookup(t, "long.example.", dns.TypeA)); got != "NOERROR:192.0.2.1/120" {
		t.Fatalf("ttl 86400 with max_ttl 120: %s", got)
	}
	s.clock.advance(119 * time.Second)
	s.lookup(t, "long.example.", dns.TypeA)
	s.clock.advance(time.Second)
	s.lookup(t, "long.example.", dns.TypeA)
	if n := u.count("long.example."); n != 2 {
		t.Fatalf("max_ttl 120: upstream asked %d times over 120 s, want 2", n)
	}
	// min_ttl is for positive answers: an NXDOMAIN whose SOA says 5 s
	// is kept 5 s (it was raised to min_ttl).
	u.set(func(u *upstreamServer) { u.ttl, u.soaMin = 5, 5 })
	if r := s.lookup(t, "nx.example.", dns.TypeA); r.Msg.Rcode != dns.RcodeNameError || r.Msg.Ns[0].Header().Ttl != 5 {
		t.Fatalf("NXDOMAIN with SOA TTL and minimum 5, min_ttl 60: %v", r.Msg)
	}
	s.clock.advance(5 * time.Second)
	s.lookup(t, "nx.example.", dns.TypeA)
	if n := u.count("nx.example."); n != 2 {
		t.Fatalf("NXDOMAIN of SOA TTL 5 under min_ttl 60: upstream asked %d times over 5 s, want 2", n)
	}
	// A TTL above 2^31-1 counts as 0 (RFC 2181 §8): raised to min_ttl,
	// never to max_ttl.
	u.set(func(u *upstreamServer) { u.ttl = 1 << 31 })
	if got := answerA(s.lookup(t, "msb.example.", dns.TypeA)); got != "NOERROR:192.0.2.1/60" {
		t.Fatalf("ttl 2^31 with min_ttl 60: %s", got)
	}
	// TTL 0 answers are not cached (without min_ttl).
	cc.MinTTL = 0
	s2 := newTestSource(t, poolOpts(u.Addr), cc)
	u.set(func(u *upstreamServer) { u.ttl = 0 })
	s2.lookup(t, "zero.example.", dns.TypeA)
	s2.lookup(t, "zero.example.", dns.TypeA)
	if n := u.count("zero.example."); n != 2 {
		t.Fatalf("TTL 0: upstream asked %d times, want 2 (not cached)", n)
	}
	u.set(func(u *upstreamServer) { u.ttl = 1<<32 - 1 })
	s2.lookup(t, "max.example.", dns.TypeA)
	s2.lookup(t, "max.example.", dns.TypeA)
	if n := u.count("max.example."); n != 2 {
		t.Fatalf("TTL 2^32-1: upstream asked %d times, want 2 (it counts as 0: not cached)", n)
	}
}

// NXDOMAIN is cached for min(SOA TTL, SOA MINIMUM), capped by
// negative_ttl (RFC 2308); the SOA carries the remaining TTL.
func TestNegativeCaching(t *testing.T) {
	u := startUpstream(t)
	cc := defaultCacheConfig()
	cc.NegativeTTL = 30 * time.Second
	s := newTestSource(t, poolOpts(u.Addr), cc)
	r := s.lookup(t, "nx.example.", dns.TypeA)
	if r.Msg.Rcode != dns.RcodeNameError || len(r.Msg.Ns) != 1 || r.Msg.Ns[0].Header().Ttl != 30 {
		t.Fatalf("NXDOMAIN: %v", r.Msg)
	}
	s.clock.advance(29 * time.Second)
	r = s.lookup(t, "nx.example.", dns.TypeA)
	if r.Msg.Rcode != dns.RcodeNameError || r.Msg.Ns[0].Header().Ttl != 1 || u.count("nx.example.") != 1 {
		t.Fatalf("cached NXDOMAIN after 29 s: %v (upstream asked %d times)", r.Msg, u.count("nx.example."))
	}
	s.clock.advance(time.Second)
	s.lookup(t, "nx.example.", dns.TypeA)
	if u.count("nx.example.") != 2 {
		t.Fatal("negative entry outlived negative_ttl")
	}
	// SOA minimum below the cap wins.
	u.set(func(u *upstreamServer) { u.soaMin = 7 })
	r = s.lookup(t, "nx.other.", dns.TypeA)
	if r.Msg.Ns[0].Header().Ttl != 7 {
		t.Fatalf("SOA minimum 7: TTL %d", r.Msg.Ns[0].Header().Ttl)
	}
	// NODATA (NOERROR, no answer, SOA) is negative too.
	r = s.lookup(t, "nodata.example.", dns.TypeMX)
	if r.Msg.Rcode != dns.RcodeSuccess || len(r.Msg.Answer) != 0 {
		t.Fatalf("MX: %v", r.Msg)
	}
	// (the test upstream sends no SOA with NODATA: not cached, RFC 2308 §5)
	s.lookup(t, "nodata.example.", dns.TypeMX)
	if u.count("nodata.example.") != 2 {
		t.Fatal("a negative answer without SOA was cached")
	}
	// SERVFAIL is never cached.
	u.set(func(u *upstreamServer) { u.rcode = dns.RcodeServerFailure })
	s.lookup(t, "sf.example.", dns.TypeA)
	s.lookup(t, "sf.example.", dns.TypeA)
	if u.count("sf.example.") != 2 {
		t.Fatal("SERVFAIL was cached")
	}
}

// Upstreams gone: expired entries are answered with TTL 30 within
// serve_stale; a second stale answer does not wait for the upstreams again
// (failure recheck); beyond serve_stale, or with it off: SERVFAIL.
func TestServeStale(t *testing.T) {
	u := startUpstream(t)
	o := poolOpts(u.Addr)
	o.Timeout = 100 * time.Millisecond
	cc := defaultCacheConfig()
	cc.ServeStale = 10 * time.Minute
	s := newTestSource(t, o, cc)
	u.set(func(u *upstreamServer) { u.ttl = 60 })
	s.lookup(t, "www.example.", dns.TypeA)
	s.lookup(t, "nx.example.", dns.TypeA)
	u.set(func(u *upstreamServer) { u.silent = true })
	s.clock.advance(61 * time.Second)

	start := time.Now()
	if got := answerA(s.lookup(t, "www.example.", dns.TypeA)); got != "NOERROR:192.0.2.1/30" {
		t.Fatalf("stale answer: %s", got)
	}
	if took := time.Since(start); took < o.Timeout {
		t.Errorf("stale answered after %v, before the upstream timed out", took)
	}
	start = time.Now()
	if got := answerA(s.lookup(t, "www.example.", dns.TypeA)); got != "NOERROR:192.0.2.1/30" {
		t.Fatalf("second stale answer: %s", got)
	}
	if took := time.Since(start); took > o.Timeout/2 {
		t.Errorf("the second stale answer waited %v: it must come at once after a failed refresh", took)
	}
	r := s.lookup(t, "nx.example.", dns.TypeA)
	if r.Status != pipeline.Answered || r.Msg.Rcode != dns.RcodeNameError || r.Msg.Ns[0].Header().Ttl != 30 {
		t.Fatalf("stale NXDOMAIN: %v", r)
	}
	if counterValue(s.met.stale) != 3 {
		t.Errorf("dnsd_cache_stale_total = %v, want 3", counterValue(s.met.stale))
	}
	// Never cached: SERVFAIL (Failed).
	if r := s.lookup(t, "new.example.", dns.TypeA); r.Status != pipeline.Failed {
		t.Fatalf("uncached name with upstreams down: %v", answerA(r))
	}
	// Past the failure recheck, the upstream is asked again; back up, the
	// entry is fresh again.
	u.set(func(u *upstreamServer) { u.silent = false; u.ip = "192.0.2.9" })
	s.clock.advance(FailureRecheck)
	if got := answerA(s.lookup(t, "www.example.", dns.TypeA)); got != "NOERROR:192.0.2.9/60" {
		t.Fatalf("refreshed after the upstream came back: %s", got)
	}
	// Beyond the serve_stale window: gone.
	u.set(func(u *upstreamServer) { u.silent = true })
	s.clock.advance(11 * time.Minute)
	if r := s.lookup(t, "www.example.", dns.TypeA); r.Status != pipeline.Failed {
		t.Fatalf("beyond serve_stale: %v", answerA(r))
	}

	cc.ServeStale = 0
	s2 := newTestSource(t, o, cc)
	u.set(func(u *upstreamServer) { u.silent = false })
	s2.lookup(t, "www.example.", dns.TypeA)
	u.set(func(u *upstreamServer) { u.silent = true })
	s2.clock.advance(61 * time.Second)
	if r := s2.lookup(t, "www.example.", dns.TypeA); r.Status != pipeline.Failed {
		t.Fatalf("serve_stale 0: %v", answerA(r))
	}
}

// A slow refresh: the client gets the stale answer after StaleAnswerAfter
// and the refresh completes in the background.
func TestServeStaleSlowUpstream(t *testing.T) {
	u := startUpstream(t)
	o := poolOpts(u.Addr)
	o.Timeout = 5 * time.Second
	s := newTestSource(t, o, defaultCacheConfig())
	u.set(func(u *upstreamServer) { u.ttl = 60 })
	s.lookup(t, "www.example.", dns.TypeA)
	u.set(func(u *upstreamServer) { u.delay = StaleAnswerAfter + 500*time.Millisecond; u.ip = "192.0.2.5" })
	s.clock.advance(time.Minute)
	start := time.Now()
	if got := answerA(s.lookup(t, "www.example.", dns.TypeA)); got != "NOERROR:192.0.2.1/30" {
		t.Fatalf("slow refresh: %s", got)
	}
	if took := time.Since(start); took < StaleAnswerAfter-50*time.Millisecond || took > StaleAnswerAfter+400*time.Millisecond {
		t.Errorf("stale answer after %v; want about %v", took, StaleAnswerAfter)
	}
	dnstest.Eventually(t, "the background refresh", 5*time.Second, func() bool {
		k := keyA("www.example.")
		k.Upstreams = s.pool.answers
		m, ok := s.cache.Get(k)
		return ok && m.Answer[0].(*dns.A).A.String() == "192.0.2.5"
	})
}

// Concurrent identical misses make one upstream query.
func TestCoalescing(t *testing.T) {
	u := startUpstream(t)
	u.set(func(u *upstreamServer) { u.delay = 200 * time.Millisecond })
	s := newTestSource(t, poolOpts(u.Addr), defaultCacheConfig())
	var wg sync.WaitGroup
	results := make([]string, 20)
	for i := range results {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			results[i] = answerA(s.lookup(t, "same.example.", dns.TypeA))
		}(i)
	}
	wg.Wait()
	for i, r := range results {
		if r != "NOERROR:192.0.2.1/300" {
			t.Fatalf("client %d got %s", i, r)
		}
	}
	if n := u.count("same.example."); n != 1 {
		t.Fatalf("20 concurrent identical queries made %d upstream queries; want 1", n)
	}
}

// The client whose query leads a coalesced exchange goes away (its ctx
// ends): it fails at once, the others still get the answer.
func TestCoalescedLeaderCanceled(t *testing.T) {
	u := startUpstream(t)
	u.set(func(u *upstreamServer) { u.delay = 200 * time.Millisecond })
	o := poolOpts(u.Addr)
	o.Timeout = 2 * time.Second
	s := newTestSource(t, o, defaultCacheConfig())
	ctx, cancel := context.WithCancel(context.Background())
	leader := make(chan pipeline.Result)
	go func() {
		leader <- s.Lookup(ctx, &pipeline.Question{Name: "c.example.", Type: dns.TypeA})
	}()
	time.Sleep(30 * time.Millisecond)
	follower := make(chan string)
	go func() { follower <- answerA(s.lookup(t, "c.example.", dns.TypeA)) }()
	time.Sleep(30 * time.Millisecond)
	start := time.Now()
	cancel()
	if r := <-leader; r.Status != pipeline.Failed || time.Since(start) > 100*time.Millisecond {
		t.Fatalf("canceled client: %v after %v", r, time.Since(start))
	}
	if got := <-follower; got != "NOERROR:192.0.2.1/300" {
		t.Fatalf("the other client: %s", got)
	}
	if !s.pool.Up()[0] {
		t.Fatal("a canceled exchange counted as an upstream failure")
	}
}

// An upstream whose every attempt times out by a deadline of its own (a
// DoT server that accepts and never completes the handshake; a DoH
// request's deadline reads the same) is a failed upstream: the client
// gets the failure after the attempt's timeout, and its max_concurrent
// slot is free again. The exchange used to be taken for one whose first
// client had left, and asked again, forever.
func TestHungTLSUpstreamFails(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var accepted atomic.Int64
	go func() {
		var held []net.Conn // never spoken to
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			held = append(held, c)
		}
	}()
	o := poolOpts()
	o.Upstreams = []Upstream{{Proto: "tls", Addr: ln.Addr().String(), ServerName: "dns.test"}}
	o.MaxConcurrent = 1
	s := newTestSource(t, o, defaultCacheConfig())
	for i := range 2 {
		done := make(chan pipeline.Result, 1)
		go func() { done <- s.lookup(t, "hung.example.", dns.TypeA) }()
		select {
		case r := <-done:
			if r.Status != pipeline.Failed {
				t.Fatalf("lookup %d through a hung DoT upstream: %v, want a failure", i, r)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("lookup %d through a hung DoT upstream (timeout %v) still waits after 5 s", i, o.Timeout)
		}
	}
	if n := accepted.Load(); n > 4 {
		t.Errorf("two lookups made %d connections: asked again and again", n)
	}
}

// With max_concurrent 1, an expired entry is refreshed from a well
// upstream: the refresh runs on the waiting client's slot (it could never
// get a second one, and the entry was served stale for serve_stale).
func TestStaleRefreshWithOneSlot(t *testing.T) {
	u := startUpstream(t)
	o := poolOpts(u.Addr)
	o.MaxConcurrent = 1
	s := newTestSource(t, o, defaultCacheConfig())
	u.set(func(u *upstreamServer) { u.ttl = 60 })
	if got := answerA(s.lookup(t, "one.example.", dns.TypeA)); got != "NOERROR:192.0.2.1/60" {
		t.Fatalf("first answer: %s", got)
	}
	s.clock.advance(61 * time.Second)
	for i := range 3 {
		r := s.lookup(t, "one.example.", dns.TypeA)
		if got := answerA(r); got != "NOERROR:192.0.2.1/60" && got != "NOERROR:192.0.2.1/59" {
			t.Fatalf("answer %d after expiry: %s, want a fresh one (not stale)", i, got)
		}
	}
	if n := u.count("one.example."); n != 2 {
		t.Errorf("upstream asked %d times for one.example., want 2 (the first answer, one refresh)", n)
	}
	if counterValue(s.met.stale) != 0 {
		t.Errorf("%v stale answers from a well upstream", counterValue(s.met.stale))
	}
	// The slot is free again: another name is forwarded, not refused.
	if got := answerA(s.lookup(t, "two.example.", dns.TypeA)); got != "NOERROR:192.0.2.1/60" {
		t.Errorf("another name after the refresh: %s", got)
	}
}

// Coalescing works without a cache too (size 0), and nothing is kept.
func TestNoCache(t *testing.T) {
	u := startUpstream(t)
	cc := defaultCacheConfig()
	cc.Size = 0
	s := newTestSource(t, poolOpts(u.Addr), cc)
	s.lookup(t, "a.example.", dns.TypeA)
	s.lookup(t, "a.example.", dns.TypeA)
	if u.count("a.example.") != 2 || s.cache.Len() != 0 {
		t.Fatalf("size 0: upstream asked %d times, %d entries", u.count("a.example."), s.cache.Len())
	}
}

// A popular entry near its expiry is refreshed in the background; the
// client is answered from the cache meanwhile.
func TestPrefetch(t *testing.T) {
	u := startUpstream(t)
	u.set(func(u *upstreamServer) { u.ttl = 100 })
	s := newTestSource(t, poolOpts(u.Addr), defaultCacheConfig())
	s.lookup(t, "hot.example.", dns.TypeA)
	s.lookup(t, "cold.example.", dns.TypeA)
	for i := 0; i < PrefetchHits; i++ {
		s.lookup(t, "hot.example.", dns.TypeA)
	}
	s.clock.advance(50 * time.Second) // not yet in the last 10 %
	s.lookup(t, "hot.example.", dns.TypeA)
	time.Sleep(50 * time.Millisecond)
	if u.count("hot.example.") != 1 {
		t.Fatal("prefetched too early")
	}
	s.clock.advance(41 * time.Second)
	u.set(func(u *upstreamServer) { u.ip = "192.0.2.7" })
	if got := answerA(s.lookup(t, "hot.example.", dns.TypeA)); got != "NOERROR:192.0.2.1/9" {
		t.Fatalf("answer while prefetching: %s", got)
	}
	s.lookup(t, "cold.example.", dns.TypeA)
	dnstest.Eventually(t, "the prefetch", 5*time.Second, func() bool { return u.count("hot.example.") == 2 })
	dnstest.Eventually(t, "the refreshed entry", 5*time.Second, func() bool {
		return answerA(s.lookup(t, "hot.example.", dns.TypeA)) == "NOERROR:192.0.2.7/100"
	})
	if u.count("cold.example.") != 1 {
		t.Fatal("an entry asked once was prefetched")
	}
	if counterValue(s.met.prefetches) != 1 {
		t.Fatalf("dnsd_cache_prefetches_total = %v", counterValue(s.met.prefetches))
	}
	cc := defaultCacheConfig()
	cc.Prefetch = false
	s2 := newTestSource(t, poolOpts(u.Addr), cc)
	for i := 0; i < 5; i++ {
		s2.lookup(t, "off.example.", dns.TypeA)
	}
	s2.clock.advance(95 * time.Second)
	s2.lookup(t, "off.example.", dns.TypeA)
	time.Sleep(50 * time.Millisecond)
	if u.count("off.example.") != 1 {
		t.Fatal("prefetch: false still prefetched")
	}
}

// The cache holds at most size entries; entries asked often survive a
// stream of names asked once.
func TestEvictionKeepsHotEntries(t *testing.T) {
	u := startUpstream(t)
	cc := defaultCacheConfig()
	cc.Size = 50
	s := newTestSource(t, poolOpts(u.Addr), cc)
	for i := 0; i < 5; i++ {
		for j := 0; j < 3; j++ {
			s.lookup(t, fmt.Sprintf("hot%d.example.", i), dns.TypeA)
		}
	}
	for i := 0; i < 500; i++ {
		s.lookup(t, fmt.Sprintf("cold%d.example.", i), dns.TypeA)
		if i%40 == 0 { // the hot names stay hot
			for j := 0; j < 5; j++ {
				s.lookup(t, fmt.Sprintf("hot%d.example.", j), dns.TypeA)
			}
		}
	}
	if n := s.cache.Len(); n != 50 {
		t.Fatalf("%d entries; want the size, 50", n)
	}
	for i := 0; i < 5; i++ {
		if n := u.count(fmt.Sprintf("hot%d.example.", i)); n != 1 {
			t.Errorf("hot%d was evicted (%d upstream queries)", i, n)
		}
	}
}

// Over max_concurrent upstream exchanges: REFUSED.
func TestMaxConcurrent(t *testing.T) {
	u := startUpstream(t)
	u.set(func(u *upstreamServer) { u.delay = 200 * time.Millisecond })
	o := poolOpts(u.Addr)
	o.Timeout = 2 * time.Second
	o.MaxConcurrent = 2
	s := newTestSource(t, o, defaultCacheConfig())
	var wg sync.WaitGroup
	var mu sync.Mutex
	rcodes := map[int]int{}
	for i := 0; i < 6; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			r := s.lookup(t, fmt.Sprintf("n%d.example.", i), dns.TypeA)
			mu.Lock()
			defer mu.Unlock()
			if r.Status != pipeline.Answered {
				rcodes[-1]++
				return
			}
			rcodes[r.Msg.Rcode]++
		}(i)
	}
	wg.Wait()
	if rcodes[dns.RcodeSuccess] != 2 || rcodes[dns.RcodeRefused] != 4 {
		t.Fatalf("6 concurrent misses with max_concurrent 2: %v; want 2 NOERROR, 4 REFUSED", rcodes)
	}
	// Cache hits do not count.
	for i := 0; i < 10; i++ {
		if r := s.lookup(t, "n0.example.", dns.TypeA); r.Msg.Rcode != dns.RcodeSuccess && r.Msg.Rcode != dns.RcodeRefused {
			t.Fatal(r.Msg)
		}
	}
}

// Clients that join an identical query in flight hold a max_concurrent
// slot too: a flood of one name at a dead upstream gets REFUSED at once
// beyond the bound instead of piling up waiters.
func TestMaxConcurrentCountsJoinedClients(t *testing.T) {
	o := poolOpts(blackHole(t))
	o.Timeout = time.Second
	o.MaxConcurrent = 3
	s := newTestSource(t, o, defaultCacheConfig())
	const clients = 20
	var wg sync.WaitGroup
	var refusedFast, failed atomic.Int32
	for i := 0; i < clients; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			r := s.lookup(t, "same.example.", dns.TypeA)
			switch {
			case r.Status == pipeline.Answered && r.Msg.Rcode == dns.RcodeRefused && time.Since(start) < 500*time.Millisecond:
				refusedFast.Add(1)
			case r.Status == pipeline.Failed:
				failed.Add(1)
			default:
				t.Errorf("unexpected result after %v: %+v", time.Since(start), r)
			}
		}()
	}
	wg.Wait()
	if refusedFast.Load() != clients-3 || failed.Load() != 3 {
		t.Fatalf("%d clients of one name, max_concurrent 3: %d refused at once, %d waited and failed; want %d and 3",
			clients, refusedFast.Load(), failed.Load(), clients-3)
	}
	if got := counterValue(s.met.busy); got != clients-3 {
		t.Errorf("dnsd_forward_busy_total = %v, want %d", got, clients-3)
	}
}

// A loop probe that comes back is refused and its upstream is never used
// again; a pool with only looping upstreams fails at once.
func TestLoopProbeComesBack(t *testing.T) {
	u := startUpstream(t)
	reg := prometheus.NewRegistry()
	met := NewMetrics(reg, nil)
	p, err := NewPool(poolOpts(u.Addr), met, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	cache := NewCache(CacheConfig{})
	defer cache.Close()
	s := NewSource(p, cache, met, nil, "example.", time.Minute)
	p.CheckLoop("example.")
	probe := probeOf(p.probes, p)
	if probe == "" || !(len(probe) > len(loopPrefix)) {
		t.Fatal("no probe registered")
	}
	// The upstream answered the probe (no loop): still usable.
	time.Sleep(50 * time.Millisecond)
	if !p.Up()[0] {
		t.Fatal("a normal upstream was marked looping")
	}
	r := s.Lookup(context.Background(), &pipeline.Question{Name: probe, Type: dns.TypeHINFO})
	if r.Status != pipeline.Answered || r.Msg.Rcode != dns.RcodeRefused {
		t.Fatalf("the probe coming back: %v", r)
	}
	if p.Up()[0] || counterValue(met.loops) != 1 {
		t.Fatal("the looping upstream is still used")
	}
	if r := s.Lookup(context.Background(), &pipeline.Question{Name: "x.example.", Type: dns.TypeA}); r.Status != pipeline.Failed {
		t.Fatalf("only a looping upstream: %v", r)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "dnsd_forward_upstream_up" {
			if len(mf.Metric) != 1 || mf.Metric[0].GetGauge().GetValue() != 0 {
				t.Fatalf("dnsd_forward_upstream_up of a looping upstream: %v", mf.Metric)
			}
		}
	}
	// The loop is fixed: the next check (at a reload) uses the upstream
	// again.
	dnstest.Eventually(t, "the upstream used again", 5*time.Second, func() bool {
		p.CheckLoop("example.")
		return p.Up()[0]
	})
	p.Close()
	if p.probes.n.Load() != 0 {
		t.Fatal("probes still registered after Close")
	}
}

// probeOf returns the name of a probe in flight that pool p sent ("" if
// none).
func probeOf(probes *LoopProbes, p *Pool) string {
	var probe string
	probes.m.Range(func(k, v any) bool {
		if v.(*probeState).u.pool == p {
			probe = k.(string)
		}
		return true
	})
	return probe
}

// A probe sent by one pool that comes back through a forward source on
// another pool (another zone, other settings) is still recognised: the
// pools of one Kind share their probes.
func TestLoopProbeSharedAcrossPools(t *testing.T) {
	u := startUpstream(t)
	probes := NewLoopProbes()
	a, err := NewPool(poolOpts(u.Addr), nil, probes, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	o := poolOpts(u.Addr)
	o.Timeout = 3 * time.Second // another pool
	b, err := NewPool(o, nil, probes, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	cache := NewCache(CacheConfig{})
	defer cache.Close()
	sb := NewSource(b, cache, nil, nil, "other.", time.Minute)
	a.CheckLoop("example.")
	probe := probeOf(probes, a)
	if probe == "" {
		t.Fatal("no probe registered")
	}
	r := sb.Lookup(context.Background(), &pipeline.Question{Name: probe, Type: dns.TypeHINFO})
	if r.Status != pipeline.Answered || r.Msg.Rcode != dns.RcodeRefused {
		t.Fatalf("pool a's probe through pool b's source: %v", r)
	}
	if a.Up()[0] {
		t.Fatal("pool a's looping upstream is still used")
	}
	if !b.Up()[0] {
		t.Fatal("pool b's upstream was marked looping")
	}
}

// A CNAME from a local source to an external name is completed through the
// forward source of the root zone.
func TestPipelineCNAMEToForward(t *testing.T) {
	u := startUpstream(t)
	s := newTestSource(t, poolOpts(u.Addr), defaultCacheConfig())
	local := staticSource{"alias.example.internal.": {dnstest.MustRR(t, "alias.example.internal. 60 IN CNAME www.example.com.")}}
	p, err := pipeline.New([]pipeline.ZoneSpec{
		{Names: []string{"example.internal."}, Sources: []pipeline.SourceEntry{{Source: local}}},
		{Names: []string{"."}, Sources: []pipeline.SourceEntry{{Source: s.Source}}},
	}, pipeline.Options{})
	if err != nil {
		t.Fatal(err)
	}
	q := new(dns.Msg)
	q.SetQuestion("alias.example.internal.", dns.TypeA)
	r := p.Resolve(context.Background(), &pipeline.Request{Msg: q, Name: "alias.example.internal.", Type: dns.TypeA})
	if r.Msg.Rcode != dns.RcodeSuccess || len(r.Msg.Answer) != 2 {
		t.Fatalf("answer %v", r.Msg)
	}
	if c, ok := r.Msg.Answer[0].(*dns.CNAME); !ok || c.Target != "www.example.com." {
		t.Fatalf("first record %v", r.Msg.Answer[0])
	}
	if a, ok := r.Msg.Answer[1].(*dns.A); !ok || a.A.String() != "192.0.2.1" || a.Hdr.Name != "www.example.com." {
		t.Fatalf("second record %v", r.Msg.Answer[1])
	}
	if u.count("www.example.com.") != 1 || u.count("alias.example.internal.") != 0 {
		t.Fatal("wrong upstream queries")
	}
	// Directly forwarded names are answered as the upstream gave them.
	q.SetQuestion("www.example.org.", dns.TypeA)
	r = p.Resolve(context.Background(), &pipeline.Request{Msg: q, Name: "www.example.org.", Type: dns.TypeA})
	if r.Source != "forward" || r.Msg.Authoritative || !r.Msg.RecursionAvailable || len(r.Msg.Answer) != 1 {
		t.Fatalf("forwarded answer %v (source %q)", r.Msg, r.Source)
	}
}

// staticSource is a local source with fixed records.
type staticSource map[string][]dns.RR

func (s staticSource) Lookup(_ context.Context, q *pipeline.Question) pipeline.Result {
	if rrs, ok := s[q.Name]; ok {
		return pipeline.Result{Status: pipeline.Found, RRs: rrs}
	}
	return pipeline.Result{Status: pipeline.NotMine}
}
func (staticSource) Kind() string   { return "static" }
func (staticSource) TTL() uint32    { return 60 }
func (staticSource) Serial() uint32 { return 1 }

func counterValue(c prometheus.Counter) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		panic(err)
	}
	return m.GetCounter().GetValue()
}

// Pipeline.Forwards, which the cache uses after a reload: a name reaches a
// forward source when every source before it falls through and the forward
// source takes it.
func TestPipelineForwards(t *testing.T) {
	fwd := NewSource(nil, nil, nil, []string{"skip.example."}, ".", time.Minute)
	local := staticSource{}
	p, err := pipeline.New([]pipeline.ZoneSpec{
		{Names: []string{"open.test."}, Sources: []pipeline.SourceEntry{{Source: local, Fallthrough: true}, {Source: fwd}}},
		{Names: []string{"closed.test."}, Sources: []pipeline.SourceEntry{{Source: local, Fallthrough: false}, {Source: fwd}}},
		{Names: []string{"local.test."}, Sources: []pipeline.SourceEntry{{Source: local}}},
		{Names: []string{"."}, Sources: []pipeline.SourceEntry{{Source: fwd, Fallthrough: true}}},
	}, pipeline.Options{})
	if err != nil {
		t.Fatal(err)
	}
	takes := func(name string) func(pipeline.Source) bool {
		return func(s pipeline.Source) bool { return !s.(*Source).Excepted(name) }
	}
	for name, want := range map[string]bool{
		"a.open.test.":     true,
		"a.closed.test.":   false,
		"a.local.test.":    false,
		"www.example.":     true,
		"a.skip.example.":  false,
		"skip.example.":    false,
		"xskip.example.":   true,
		"a.b.c.open.test.": true,
	} {
		if got := p.Forwards(name, takes(name)); got != want {
			t.Errorf("Forwards(%s) = %v, want %v", name, got, want)
		}
	}
	if !p.Forwards("a.skip.example.", nil) {
		t.Error("Forwards with takes nil must accept any forward source")
	}
}

// A stale entry whose refresh failed is refreshed at once when an upstream
// has come back up since, not only after the failure recheck window.
func TestStaleRefreshedWhenUpstreamRecovers(t *testing.T) {
	u := startUpstream(t)
	o := poolOpts(u.Addr)
	o.Timeout = 100 * time.Millisecond
	o.MaxFails = 1
	cc := defaultCacheConfig()
	cc.ServeStale = 10 * time.Minute
	s := newTestSource(t, o, cc)
	u.set(func(u *upstreamServer) { u.ttl = 60 })
	s.lookup(t, "www.example.", dns.TypeA)
	u.set(func(u *upstreamServer) { u.silent = true })
	s.clock.advance(61 * time.Second)
	if got := answerA(s.lookup(t, "www.example.", dns.TypeA)); got != "NOERROR:192.0.2.1/30" {
		t.Fatalf("stale answer: %s", got)
	}
	dnstest.Eventually(t, "the upstream marked down", 5*time.Second, func() bool { return !s.pool.Up()[0] })
	u.set(func(u *upstreamServer) { u.silent = false; u.ip = "192.0.2.9" })
	dnstest.Eventually(t, "the upstream back up (health probe)", 5*time.Second, func() bool { return s.pool.Up()[0] })
	// Well inside the failure recheck window.
	if got := answerA(s.lookup(t, "www.example.", dns.TypeA)); got != "NOERROR:192.0.2.9/60" {
		t.Fatalf("after the upstream came back: %s, want a fresh answer at once", got)
	}
}
