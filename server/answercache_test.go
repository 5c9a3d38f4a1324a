package server

import (
	"bytes"
	"context"
	"fmt"
	"hash/maphash"
	"math"
	"math/rand/v2"
	"net"
	"net/netip"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/dnsd/dnsd/config"
	"github.com/dnsd/dnsd/internal/dnstest"
	"github.com/dnsd/dnsd/pipeline"
)

// changingSource is a local source whose records can be replaced while it
// serves, raising its serial afterwards as real sources do.
type changingSource struct {
	rrs    atomic.Pointer[map[string][]dns.RR]
	serial atomic.Uint32
}

func (c *changingSource) set(rrs map[string][]dns.RR) {
	c.rrs.Store(&rrs)
	c.serial.Add(1)
}

func (c *changingSource) Lookup(_ context.Context, q *pipeline.Question) pipeline.Result {
	if rrs, ok := (*c.rrs.Load())[q.Name]; ok {
		return pipeline.Result{Status: pipeline.Found, RRs: rrs}
	}
	return pipeline.Result{Status: pipeline.NotMine}
}
func (c *changingSource) Kind() string   { return "hosts" }
func (c *changingSource) TTL() uint32    { return 30 }
func (c *changingSource) Serial() uint32 { return c.serial.Load() }

// countingResolver counts the resolutions that reach the pipeline.
type countingResolver struct {
	*pipeline.Pipeline
	n atomic.Int64
}

func (c *countingResolver) Resolve(ctx context.Context, req *pipeline.Request) pipeline.Response {
	c.n.Add(1)
	return c.Pipeline.Resolve(ctx, req)
}

func rr(t testing.TB, s string) dns.RR {
	t.Helper()
	r, err := dns.NewRR(s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func answerTestServers(t testing.TB, src *changingSource) (kept, plain *Server, res *countingResolver) {
	t.Helper()
	p, err := pipeline.New([]pipeline.ZoneSpec{{Names: []string{"example.test."}, Sources: []pipeline.SourceEntry{{Source: src}}}}, pipeline.Options{})
	if err != nil {
		t.Fatal(err)
	}
	set := compile(Settings{ACL: config.ACL{Default: true}, Limits: config.Limits{UDPBuffer: 1232}})
	res = &countingResolver{Pipeline: p}
	kept = New(Options{Resolver: res, Observer: nopObserver{}})
	kept.set.Store(set)
	if kept.set.gen().fresh == nil {
		t.Fatal("no answer cache for a resolver with Fresh")
	}
	plain = New(Options{Resolver: p, Observer: nopObserver{}})
	plain.answers = nil
	plain.set.Store(set)
	return kept, plain, res
}

// TestKeptAnswersAreTheSame: for every shape of query the cache may serve
// (hit, NODATA, NXDOMAIN, CNAME, with and without EDNS, DO, CD, RD, any
// ID) and some it must not (mixed case, EDNS options), the bytes answered
// by a server that keeps answers equal those of one that resolves every
// query, on the first, second and later asking — and the later ones do
// not reach the resolver.
func TestKeptAnswersAreTheSame(t *testing.T) {
	src := &changingSource{}
	src.set(map[string][]dns.RR{
		"www.example.test.":   {rr(t, "www.example.test. 60 IN A 192.0.2.1"), rr(t, "www.example.test. 60 IN A 192.0.2.2")},
		"alias.example.test.": {rr(t, "alias.example.test. 60 IN CNAME elsewhere.invalid.")},
		"v6.example.test.":    {rr(t, "v6.example.test. 60 IN AAAA 2001:db8::1")},
	})
	kept, plain, res := answerTestServers(t, src)
	client := netip.MustParseAddr("127.0.0.1")
	ctx := context.Background()
	ask := func(s *Server, in []byte) []byte {
		sc := &scratch{}
		out := append([]byte(nil), s.serveRaw(ctx, sc, protoUDP, client, true, in)...)
		s.release(sc)
		return out
	}
	type variant struct {
		name      string
		qtype     uint16
		edns, do  bool
		cd, rd    bool
		option    bool // an EDNS option (cookie): never kept
		cacheable bool
	}
	var vs []variant
	for _, n := range []string{"www.example.test.", "v6.example.test.", "alias.example.test.", "nope.example.test.", "example.test."} {
		for _, qt := range []uint16{dns.TypeA, dns.TypeAAAA, dns.TypeSOA, dns.TypeTXT} {
			for f := range 16 {
				vs = append(vs, variant{name: n, qtype: qt, edns: f&1 != 0, do: f&3 == 3, cd: f&4 != 0, rd: f&8 != 0, cacheable: true})
			}
		}
	}
	vs = append(vs,
		variant{name: "WWW.example.test.", qtype: dns.TypeA, rd: true},
		variant{name: "www.Example.TEST.", qtype: dns.TypeA, edns: true},
		variant{name: "www.example.test.", qtype: dns.TypeA, edns: true, option: true},
	)
	id := uint16(1)
	for _, v := range vs {
		for i := range 4 {
			q := query(v.name, v.qtype)
			id++
			q.Id = id
			q.RecursionDesired = v.rd
			q.CheckingDisabled = v.cd
			if v.edns {
				q.SetEdns0(4096, v.do)
				if v.option {
					q.IsEdns0().Option = append(q.IsEdns0().Option, &dns.EDNS0_COOKIE{Code: dns.EDNS0COOKIE, Cookie: "0102030405060708"})
				}
			}
			in := pack(t, q)
			before := res.n.Load()
			got, want1 := ask(kept, in), ask(plain, in)
			if !bytes.Equal(got, want1) {
				var g, w dns.Msg
				_ = g.Unpack(got)
				_ = w.Unpack(want1)
				t.Fatalf("%+v, asking %d: kept answer differs\n got: %v\nwant: %v", v, i, &g, &w)
			}
			if got[0] != byte(id>>8) || got[1] != byte(id) {
				t.Fatalf("%+v: answer with the wrong ID", v)
			}
			resolved := res.n.Load() != before
			switch {
			case v.cacheable && i >= 2 && resolved:
				t.Errorf("%+v, asking %d: resolved again, want the kept answer", v, i)
			case !v.cacheable && !resolved:
				t.Errorf("%+v, asking %d: answered from the cache, must be resolved", v, i)
			}
		}
	}
}

// TestKeptAnswerFollowsChanges: a changed record is answered at once, by
// the next query after the source's change; a new pipeline generation
// (a reload) makes every kept answer stale too.
func TestKeptAnswerFollowsChanges(t *testing.T) {
	src := &changingSource{}
	src.set(map[string][]dns.RR{"www.example.test.": {rr(t, "www.example.test. 60 IN A 192.0.2.1")}})
	kept, _, res := answerTestServers(t, src)
	client := netip.MustParseAddr("127.0.0.1")
	addr := func(name string) string {
		sc := &scratch{}
		defer kept.release(sc)
		var m dns.Msg
		if err := m.Unpack(kept.serveRaw(context.Background(), sc, protoUDP, client, true, pack(t, query(name, dns.TypeA)))); err != nil {
			t.Fatal(err)
		}
		if len(m.Answer) == 0 {
			return dns.RcodeToString[m.Rcode]
		}
		return m.Answer[0].(*dns.A).A.String()
	}
	for range 3 {
		if got := addr("www.example.test."); got != "192.0.2.1" {
			t.Fatalf("got %s, want 192.0.2.1", got)
		}
	}
	src.set(map[string][]dns.RR{"www.example.test.": {rr(t, "www.example.test. 60 IN A 192.0.2.9")}})
	for range 3 {
		if got := addr("www.example.test."); got != "192.0.2.9" {
			t.Fatalf("after the change: got %s, want 192.0.2.9", got)
		}
	}
	for range 3 {
		if got := addr("new.example.test."); got != "NXDOMAIN" {
			t.Fatalf("got %s, want NXDOMAIN", got)
		}
	}
	src.set(map[string][]dns.RR{"new.example.test.": {rr(t, "new.example.test. 60 IN A 192.0.2.7")}})
	if got := addr("new.example.test."); got != "192.0.2.7" {
		t.Fatalf("a name added after its NXDOMAIN was kept: got %s, want 192.0.2.7", got)
	}

	// Another generation over other data: the old stamps are not fresh.
	other := &changingSource{}
	other.set(map[string][]dns.RR{"new.example.test.": {rr(t, "new.example.test. 60 IN A 192.0.2.70")}})
	p2, err := pipeline.New([]pipeline.ZoneSpec{{Names: []string{"example.test."}, Sources: []pipeline.SourceEntry{{Source: other}}}}, pipeline.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		addr("new.example.test.") // kept by now
	}
	res.Pipeline = p2
	if got := addr("new.example.test."); got != "192.0.2.70" {
		t.Fatalf("after a new generation: got %s, want 192.0.2.70", got)
	}
}

// TestKeptAnswerAgedOutIsExtended: an answer that reaches its age limit is
// resolved again; when the new answer is the one kept, the kept entry is
// extended in place (no new entry, so no allocation), and when it differs
// the new one replaces it. Either way the client gets the new resolution's
// bytes.
func TestKeptAnswerAgedOutIsExtended(t *testing.T) {
	src := &changingSource{}
	src.set(map[string][]dns.RR{"www.example.test.": {rr(t, "www.example.test. 60 IN A 192.0.2.1")}})
	kept, plain, res := answerTestServers(t, src)
	client := netip.MustParseAddr("127.0.0.1")
	ask := func(s *Server, id uint16) []byte {
		sc := &scratch{}
		defer s.release(sc)
		q := query("www.example.test.", dns.TypeA)
		q.Id = id
		return bytes.Clone(s.serveRaw(context.Background(), sc, protoUDP, client, true, pack(t, q)))
	}
	entry := func() *keptAnswer {
		return keptEntry(kept, answerKey{name: "www.example.test.", qtype: dns.TypeA, st: kept.set.Load()})
	}
	for i := range 3 {
		ask(kept, uint16(i))
	}
	e := entry()
	if e == nil {
		t.Fatal("answer not kept")
	}
	e.until.Store(1) // aged out
	n := res.n.Load()
	if got, want := ask(kept, 77), ask(plain, 77); !bytes.Equal(got, want) {
		t.Fatalf("after aging out: %x, want %x", got, want)
	}
	if res.n.Load() != n+1 {
		t.Fatalf("an aged-out answer was not resolved again (%d resolutions)", res.n.Load()-n)
	}
	if entry() != e || e.until.Load() <= time.Now().UnixNano() {
		t.Fatalf("the same answer was not extended in place (entry %p, was %p)", entry(), e)
	}
	n = res.n.Load()
	ask(kept, 78)
	if res.n.Load() != n {
		t.Fatal("the extended answer was not reused")
	}
	// Aged out with other data behind it: replaced.
	src.set(map[string][]dns.RR{"www.example.test.": {rr(t, "www.example.test. 60 IN A 192.0.2.2")}})
	e.until.Store(1)
	if got, want := ask(kept, 79), ask(plain, 79); !bytes.Equal(got, want) {
		t.Fatalf("after a change: %x, want %x", got, want)
	}
	if e2 := entry(); e2 == e || e2 == nil {
		t.Fatal("a changed answer did not replace the kept one")
	}
}

// TestKeptAnswerOverTCP: an answer kept from UDP serves TCP too, with the
// length prefix and the TCP query's ID.
func TestKeptAnswerOverTCP(t *testing.T) {
	src := &changingSource{}
	src.set(map[string][]dns.RR{"www.example.test.": {rr(t, "www.example.test. 60 IN A 192.0.2.1")}})
	kept, _, res := answerTestServers(t, src)
	if err := kept.Apply(context.Background(), []config.Listen{{Proto: "udp", Addr: "127.0.0.1:0"}, {Proto: "tcp", Addr: "127.0.0.1:0"}}, Settings{ACL: config.ACL{Default: true}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kept.Shutdown(context.Background()) })
	var udp, tcp string
	for _, a := range kept.Addrs() {
		if _, ok := a.(*net.UDPAddr); ok {
			udp = a.String()
		} else {
			tcp = a.String()
		}
	}
	for range 3 {
		if r := dnstest.Exchange(t, "udp", udp, query("www.example.test.", dns.TypeA)); len(r.Answer) != 1 {
			t.Fatalf("udp: %v", r)
		}
	}
	before := res.n.Load()
	for i := range 3 {
		q := query("www.example.test.", dns.TypeA)
		q.Id = uint16(4000 + i)
		r := dnstest.Exchange(t, "tcp", tcp, q)
		if len(r.Answer) != 1 || r.Id != q.Id || r.Answer[0].(*dns.A).A.String() != "192.0.2.1" {
			t.Fatalf("tcp: %v", r)
		}
	}
	if res.n.Load() != before {
		t.Errorf("TCP queries were resolved again, want the answer kept from UDP")
	}
}

// FuzzKeptAnswers: whatever the packet, a server that keeps answers
// answers it byte for byte as one that resolves every query, however
// often it is asked.
func FuzzKeptAnswers(f *testing.F) {
	for _, m := range []*dns.Msg{
		query("www.example.test.", dns.TypeA),
		query("nope.example.test.", dns.TypeAAAA),
		query("WWW.example.test.", dns.TypeA),
		query("example.test.", dns.TypeSOA),
	} {
		f.Add(pack(f, m))
		m.SetEdns0(1232, true)
		m.CheckingDisabled = true
		f.Add(pack(f, m))
	}
	src := &changingSource{}
	src.set(map[string][]dns.RR{
		"www.example.test.": {rr(f, "www.example.test. 60 IN A 192.0.2.1")},
		"txt.example.test.": {rr(f, "txt.example.test. 60 IN TXT \"a\"")},
	})
	p, err := pipeline.New([]pipeline.ZoneSpec{{Names: []string{"example.test."}, Sources: []pipeline.SourceEntry{{Source: src}}}}, pipeline.Options{})
	if err != nil {
		f.Fatal(err)
	}
	set := compile(Settings{ACL: config.ACL{Default: true}})
	kept := New(Options{Resolver: p})
	kept.set.Store(set)
	plain := New(Options{Resolver: p})
	plain.answers = nil
	plain.set.Store(set)
	client := netip.MustParseAddr("127.0.0.1")
	f.Fuzz(func(t *testing.T, in []byte) {
		for i := range 3 {
			for _, proto := range []transport{protoUDP, protoTCP} {
				var a, b scratch
				got := kept.serveRaw(context.Background(), &a, proto, client, true, in)
				want := plain.serveRaw(context.Background(), &b, proto, client, true, in)
				if !bytes.Equal(got, want) {
					t.Fatalf("asking %d over %v: kept %x, resolved %x", i, proto, got, want)
				}
				kept.release(&a)
				plain.release(&b)
			}
		}
	})
}

// agingForward is a forward source and Keeper whose one cached answer
// ages as the test says: its TTLs are 300 (answer), 120 (authority) and
// 60 (additional) less the age, never below 0.
type agingForward struct {
	age atomic.Uint32
	// entry numbers the cache entry answering (the token), host the last
	// octet of its address: a new entry may hold another address.
	entry, host atomic.Uint32
}

func (f *agingForward) msg(q *pipeline.Question) *dns.Msg {
	age := f.age.Load()
	ttl := func(t uint32) uint32 { return t - min(t, age) }
	m := new(dns.Msg)
	m.SetQuestion(q.Name, q.Type)
	m.Response, m.RecursionAvailable = true, true
	m.Answer = []dns.RR{&dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: ttl(300)}, A: net.IPv4(192, 0, 2, byte(5+f.host.Load()))}}
	m.Ns = []dns.RR{&dns.NS{Hdr: dns.RR_Header{Name: "example.org.", Rrtype: dns.TypeNS, Class: dns.ClassINET, Ttl: ttl(120)}, Ns: "ns.example.org."}}
	m.Extra = []dns.RR{&dns.A{Hdr: dns.RR_Header{Name: "ns.example.org.", Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: ttl(60)}, A: net.IPv4(192, 0, 2, 53)}}
	return m
}

func (f *agingForward) Lookup(_ context.Context, q *pipeline.Question) pipeline.Result {
	return pipeline.Result{Status: pipeline.Answered, Msg: f.msg(q)}
}
func (f *agingForward) Kind() string   { return "forward" }
func (f *agingForward) Remote() bool   { return true }
func (f *agingForward) TTL() uint32    { return 0 }
func (f *agingForward) Serial() uint32 { return 0 }
func (f *agingForward) Pin(string, uint16, bool, bool, *dns.Msg) (any, uint32) {
	return f.entry.Load(), f.age.Load()
}
func (f *agingForward) Same(token any) (uint32, bool) { return f.age.Load(), token == f.entry.Load() }

// agingServers returns an agingForward for the root zone, a server that
// keeps its answers (counting resolutions) and one that resolves every query.
func agingServers(t *testing.T) (fwd *agingForward, kept, plain *Server, res *countingResolver) {
	t.Helper()
	fwd = &agingForward{}
	p, err := pipeline.New([]pipeline.ZoneSpec{{Names: []string{"."}, Sources: []pipeline.SourceEntry{{Source: fwd}}}}, pipeline.Options{})
	if err != nil {
		t.Fatal(err)
	}
	set := compile(Settings{ACL: config.ACL{Default: true}, Limits: config.Limits{UDPBuffer: 1232}})
	res = &countingResolver{Pipeline: p}
	kept = New(Options{Resolver: res, Observer: nopObserver{}})
	kept.set.Store(set)
	plain = New(Options{Resolver: p, Observer: nopObserver{}})
	plain.answers = nil
	plain.set.Store(set)
	return fwd, kept, plain, res
}

// keptEntry is the entry s keeps for k, or nil.
func keptEntry(s *Server, k answerKey) *keptAnswer {
	h := s.answers.hash(&k)
	for i := range s.answers.slots[h%answerSets] {
		if e := s.answers.slots[h%answerSets][i].Load(); e != nil && e.key == k {
			return e
		}
	}
	return nil
}

// TestKeptForwardedAnswerAges: a kept forwarded answer is reused while
// its cache entry ages, with every TTL (answer, authority, additional; not
// the OPT's flags) lowered by the age, down to 0 — byte for byte the answer
// a fresh resolution makes — without resolving again.
func TestKeptForwardedAnswerAges(t *testing.T) {
	fwd, kept, plain, res := agingServers(t)
	client := netip.MustParseAddr("127.0.0.1")
	ask := func(s *Server, in []byte) []byte {
		sc := &scratch{}
		defer s.release(sc)
		return append([]byte(nil), s.serveRaw(context.Background(), sc, protoUDP, client, true, in)...)
	}
	for _, edns := range []bool{false, true} {
		q := query("www.example.org.", dns.TypeA)
		if edns {
			q.SetEdns0(1232, true)
		}
		in := pack(t, q)
		fwd.age.Store(0)
		ask(kept, in)
		ask(kept, in) // kept now
		for _, age := range []uint32{0, 1, 2, 59, 60, 61, 200, 299, 300, 301} {
			fwd.age.Store(age)
			before := res.n.Load()
			got, want := ask(kept, in), ask(plain, in)
			if !bytes.Equal(got, want) {
				var g, w dns.Msg
				_ = g.Unpack(got)
				_ = w.Unpack(want)
				t.Fatalf("EDNS %v, aged %d: kept answer differs\n got: %v\nwant: %v", edns, age, &g, &w)
			}
			if res.n.Load() != before {
				t.Fatalf("EDNS %v, aged %d: resolved again, want the kept answer", edns, age)
			}
		}
	}
}

// TestKeptForwardedAnswerAgedOutIsExtended: a kept forwarded answer that
// reaches its maximum age is resolved again; rebuilt from the same cache
// entry (only its TTLs lower) the kept entry is extended in place, no new
// one is allocated, and it goes on answering byte for byte as a fresh
// resolution would; from a new cache entry with other data it is replaced.
func TestKeptForwardedAnswerAgedOutIsExtended(t *testing.T) {
	fwd, kept, plain, res := agingServers(t)
	client := netip.MustParseAddr("127.0.0.1")
	q := query("www.example.org.", dns.TypeA)
	q.SetEdns0(1232, false)
	in := pack(t, q)
	ask := func(s *Server) []byte {
		sc := &scratch{}
		defer s.release(sc)
		return bytes.Clone(s.serveRaw(context.Background(), sc, protoUDP, client, true, in))
	}
	entry := func() *keptAnswer {
		return keptEntry(kept, answerKey{name: "www.example.org.", qtype: dns.TypeA, flags: answerEDNS, st: kept.set.Load()})
	}
	same := func(when string) {
		t.Helper()
		if got, want := ask(kept), ask(plain); !bytes.Equal(got, want) {
			var g, w dns.Msg
			_ = g.Unpack(got)
			_ = w.Unpack(want)
			t.Fatalf("%s: kept answer differs\n got: %v\nwant: %v", when, &g, &w)
		}
	}
	ask(kept)
	ask(kept)
	e := entry()
	if e == nil {
		t.Fatal("answer not kept")
	}
	fwd.age.Store(7)
	e.until.Store(1) // aged out
	n := res.n.Load()
	same("aged out at 7 s")
	if res.n.Load() != n+1 {
		t.Fatalf("an aged-out answer was not resolved again (%d resolutions)", res.n.Load()-n)
	}
	if entry() != e || e.until.Load() <= time.Now().UnixNano() {
		t.Fatalf("the answer rebuilt from the same cache entry was not extended in place (entry %p, was %p)", entry(), e)
	}
	if left := time.Until(time.Unix(0, e.until.Load())); left < answerAgedMaxAge/2-time.Second {
		t.Fatalf("extended by %v, want at least %v once found the same", left, answerAgedMaxAge/2)
	}
	fwd.age.Store(65) // the additional record's TTL (60) has run out
	n = res.n.Load()
	same("extended, at 65 s")
	if res.n.Load() != n {
		t.Fatal("the extended answer was not reused")
	}
	e.until.Store(1)
	fwd.age.Store(70)
	same("aged out again at 70 s")
	if entry() != e {
		t.Fatal("aged out again: not extended in place")
	}
	// A new cache entry (refreshed upstream) with another address.
	fwd.entry.Store(1)
	fwd.host.Store(1)
	fwd.age.Store(0)
	same("a new cache entry")
	if e2 := entry(); e2 == e || e2 == nil {
		t.Fatal("the answer from a new cache entry did not replace the kept one")
	}
}

// TestTTLOffsets: the TTL offsets of a packed message are those of its
// records' TTLs, the OPT left out; a truncated or malformed message has
// none.
func TestTTLOffsets(t *testing.T) {
	m := new(dns.Msg)
	m.SetQuestion("www.example.org.", dns.TypeA)
	m.Answer = []dns.RR{rr(t, "www.example.org. 300 IN A 192.0.2.1"), rr(t, "www.example.org. 301 IN A 192.0.2.2")}
	m.Ns = []dns.RR{rr(t, "example.org. 302 IN NS ns.example.org.")}
	m.Extra = []dns.RR{rr(t, "ns.example.org. 303 IN A 192.0.2.53")}
	m.SetEdns0(1232, true)
	m.Compress = true
	wire, err := m.Pack()
	if err != nil {
		t.Fatal(err)
	}
	offs, ok := ttlOffsets(wire)
	if !ok || len(offs) != 4 {
		t.Fatalf("offsets %v %v, want 4", offs, ok)
	}
	for i, off := range offs {
		if got := uint32(wire[off])<<24 | uint32(wire[off+1])<<16 | uint32(wire[off+2])<<8 | uint32(wire[off+3]); got != uint32(300+i) {
			t.Errorf("offset %d holds %d, want %d", off, got, 300+i)
		}
	}
	for n := range len(wire) {
		if _, ok := ttlOffsets(wire[:n]); ok {
			t.Errorf("a message cut to %d of %d bytes parses", n, len(wire))
		}
	}
}

// A working set of 10,000 names asked in turn is kept whole: once every
// name has been asked twice, a third round reaches the resolver for next
// to none of them and allocates next to nothing (interned names, kept
// answers). With four ways a set, the names of the sets that five or more
// of them hash to (3 % of them) missed at every round. (With eight, a set
// that nine of them hash to happens for ~5 % of hash seeds: its names miss
// at every round by design; the test picks seeds without one.)
func TestWorkingSetKept(t *testing.T) {
	const names = 10000
	_, res, ins, ask := workingSet(t, names, true)
	round := func() {
		for _, in := range ins {
			ask(in)
		}
	}
	round()
	round()
	before := res.n.Load()
	// The fewest allocations of three more rounds: the process's other
	// goroutines (earlier tests' timers and connections winding down)
	// allocate too, now and then, and MemStats counts theirs.
	fewest := uint64(math.MaxUint64)
	for range 3 {
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		round()
		runtime.ReadMemStats(&m1)
		fewest = min(fewest, m1.Mallocs-m0.Mallocs)
	}
	if n := res.n.Load() - before; n > names/1000 {
		t.Errorf("later rounds: %d of %d names resolved again, want none", n, names)
	}
	if !raceEnabled && fewest > names/1000 {
		t.Errorf("later rounds: at least %d allocations for %d names, want none", fewest, names)
	}
}

// An interned name points at the answers kept for it, so that a question
// asked again finds its answer without the answer cache's own table; the
// pointer never outlives the answer's place in the cache. 100,000 names,
// each asked twice in a row (kept at its second miss), overflow the
// cache's sets, so answers are kept and replaced all the time: afterwards
// every interned name's pointer is to an answer the cache holds, and the
// names asked last are found through it.
func TestInternedNamesHoldOnlyKeptAnswers(t *testing.T) {
	const names = 100000
	s, res, ins, ask := workingSet(t, names, false)
	for _, in := range ins {
		ask(in)
		ask(in)
	}
	kept := make(map[*keptAnswer]bool)
	for i := range s.answers.slots {
		for j := range s.answers.slots[i] {
			if e := s.answers.slots[i][j].Load(); e != nil {
				kept[e] = true
			}
		}
	}
	// Kept at its second miss in a row, an answer may take any way of its
	// set: the cache fills (a set gets ~12 of the names on average).
	if full := answerSets * answerWays; len(kept) < full*9/10 {
		t.Errorf("%d answers kept in %d ways", len(kept), full)
	}
	hooked := 0
	for i := range s.names.sets {
		for j := range s.names.sets[i].names {
			n := s.names.sets[i].names[j].Load()
			if n == nil {
				continue
			}
			for k := range n.kept {
				e := n.kept[k].Load()
				if e == nil {
					continue
				}
				hooked++
				if !kept[e] {
					t.Fatalf("%s points at an answer the cache no longer holds", n.name)
				}
				if e.key.name != n.lower || e.name != n {
					t.Fatalf("%s points at the answer to %s", n.name, e.key.name)
				}
			}
		}
	}
	if hooked < len(kept)/2 {
		t.Errorf("%d interned names point at their answers, %d answers kept", hooked, len(kept))
	}
	// The last 1,000 names asked: answered from their kept answers.
	before := res.n.Load()
	for _, in := range ins[names-1000:] {
		ask(in)
	}
	if n := res.n.Load() - before; n > 100 {
		t.Errorf("%d of the last 1,000 names asked were resolved again", n)
	}
}

// BenchmarkServeUDPWorkingSet answers 10,000 (or 50,000) names asked in a shuffled
// turn, every answer kept: the cost of finding a name and its kept answer
// when they are not in the processor's nearest caches, as under a real
// server's load (BenchmarkServeUDPKept asks one name again and again).
func BenchmarkServeUDPWorkingSet(b *testing.B) {
	for _, names := range []int{10000, 50000} {
		b.Run(fmt.Sprint(names), func(b *testing.B) { benchWorkingSet(b, names) })
	}
}

func benchWorkingSet(b *testing.B, names int) {
	_, _, ins, ask := workingSet(b, names, false)
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(ins), func(i, j int) { ins[i], ins[j] = ins[j], ins[i] })
	for range 2 {
		for _, in := range ins {
			ask(in)
		}
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		ask(ins[i])
		if i++; i == len(ins) {
			i = 0
		}
	}
}

// workingSet serves names host<N>.example.test (A, 30 s) from a server that
// keeps its answers, and returns its counting resolver, one query with
// EDNS0 for each name, and ask, which answers one of them and fails the
// test unless it is answered NOERROR. spread: with hash seeds that put no
// more of the names in a set than it has ways (spreadSeeds; only possible
// for a working set well below the tables' size).
func workingSet(tb testing.TB, names int, spread bool) (s *Server, res *countingResolver, ins [][]byte, ask func(in []byte)) {
	tb.Helper()
	src := &changingSource{}
	rrs := make(map[string][]dns.RR, names)
	for i := range names {
		name := fmt.Sprintf("host%d.example.test.", i)
		rrs[name] = []dns.RR{rr(tb, fmt.Sprintf("%s 30 IN A 10.%d.%d.%d", name, 1+i>>16, i>>8&0xff, i&0xff))}
		q := query(name, dns.TypeA)
		q.SetEdns0(1232, false)
		ins = append(ins, pack(tb, q))
	}
	src.set(rrs)
	s, _, res = answerTestServers(tb, src)
	// Every round is asked well within the answers' age limit, however
	// slow the machine (the race detector on a busy one took 2.6 s for
	// five rounds, past the 2.5 s some answers may live).
	s.answers.maxAge = time.Hour
	if spread {
		spreadSeeds(tb, s, names)
	}
	client := netip.MustParseAddr("127.0.0.1")
	sc := &scratch{}
	ctx := context.Background()
	ask = func(in []byte) {
		if out := s.serveRaw(ctx, sc, protoUDP, client, true, in); len(out) < 12 || out[3]&0xf != dns.RcodeSuccess {
			tb.Fatalf("no answer to % x", in)
		}
		s.release(sc)
	}
	return s, res, ins, ask
}

// spreadSeeds gives s's answer cache and name table hash seeds under which
// no set is asked for more names of workingSet's than it has ways: the
// names of such a set (one for ~5 % of random seeds) miss at every round
// by design, and the working-set bounds are about the cache, not the seed.
func spreadSeeds(tb testing.TB, s *Server, names int) {
	tb.Helper()
	st := s.set.Load()
	all := make([]string, names)
	for i := range all {
		all[i] = fmt.Sprintf("host%d.example.test.", i)
	}
	fits := func(set func(name string) uint64, sets, ways int) bool {
		n := make([]int, sets)
		for _, name := range all {
			i := set(name)
			if n[i]++; n[i] > ways {
				return false
			}
		}
		return true
	}
	for try := 0; ; try++ {
		if try == 100 {
			tb.Fatal("no hash seeds that spread the working set")
		}
		s.answers.seed = maphash.MakeSeed()
		if fits(func(name string) uint64 {
			return s.answers.hash(&answerKey{name: name, qtype: dns.TypeA, flags: answerEDNS, st: st}) % answerSets
		}, answerSets, answerWays) {
			break
		}
	}
	wire := make([]byte, 256)
	for try := 0; ; try++ {
		if try == 100 {
			tb.Fatal("no hash seeds that spread the working set")
		}
		s.names.seed = maphash.MakeSeed()
		if fits(func(name string) uint64 {
			n, err := dns.PackDomainName(name, wire, 0, nil, false)
			if err != nil {
				tb.Fatal(err)
			}
			return maphash.Bytes(s.names.seed, wire[:n]) % nameSets
		}, nameSets, nameWays) {
			break
		}
	}
}
