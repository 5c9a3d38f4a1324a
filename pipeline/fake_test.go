package pipeline

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/miekg/dns"

	"github.com/dnsd/dnsd/internal/dnstest"
)

// fakeSource is an in-memory local source: records by lower-case owner,
// explicit empty non-terminals, an optional permanent failure. Wildcard
// records are stored under their "*.<parent>" owner like any other; the
// source reports holding them (Wildcarder) and leaves matching them to the
// pipeline. It records the questions it was asked.
type fakeSource struct {
	kind   string
	ttl    uint32
	serial atomic.Uint32
	rrs    map[string][]dns.RR
	ents   map[string]bool
	fail   error
	failAt map[string]error // failures for single names

	mu    sync.Mutex
	asked []string // "name type" of every Lookup
}

func newFake(t testing.TB, kind string, ttl, serial uint32, records ...string) *fakeSource {
	t.Helper()
	f := &fakeSource{kind: kind, ttl: ttl, rrs: make(map[string][]dns.RR), ents: make(map[string]bool)}
	f.serial.Store(serial)
	for _, s := range records {
		rr := dnstest.MustRR(t, s)
		name := rr.Header().Name
		f.rrs[name] = append(f.rrs[name], rr)
	}
	return f
}

func (f *fakeSource) Lookup(_ context.Context, q *Question) Result {
	f.mu.Lock()
	f.asked = append(f.asked, q.Name+" "+dns.TypeToString[q.Type])
	f.mu.Unlock()
	if f.fail != nil {
		return Result{Status: Failed, Err: f.fail}
	}
	if err := f.failAt[q.Name]; err != nil {
		return Result{Status: Failed, Err: err}
	}
	if rrs, ok := f.rrs[q.Name]; ok {
		return Result{Status: Found, RRs: rrs}
	}
	if f.ents[q.Name] {
		return Result{Status: Found}
	}
	return Result{Status: NotMine}
}

// entsBelow records every ancestor of the source's owners strictly
// between the owner and apex as an empty non-terminal, as a real source
// derives them.
func (f *fakeSource) entsBelow(apex string) *fakeSource {
	for name := range f.rrs {
		for up := Parent(name); up != "" && up != apex && InZone(up, apex); up = Parent(up) {
			if _, ok := f.rrs[up]; !ok {
				f.ents[up] = true
			}
		}
	}
	return f
}

// Wildcards reports whether an owner's first label is "*".
func (f *fakeSource) Wildcards() bool {
	for name := range f.rrs {
		if strings.HasPrefix(name, "*.") || name == "*." {
			return true
		}
	}
	for name := range f.ents {
		if strings.HasPrefix(name, "*.") {
			return true
		}
	}
	return false
}

func (f *fakeSource) Kind() string   { return f.kind }
func (f *fakeSource) TTL() uint32    { return f.ttl }
func (f *fakeSource) Serial() uint32 { return f.serial.Load() }

func (f *fakeSource) questions() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.asked...)
}

// snapshot renders every record the source holds, to prove the pipeline
// never mutates them.
func (f *fakeSource) snapshot() map[string][]string {
	out := make(map[string][]string)
	for name, rrs := range f.rrs {
		for _, rr := range rrs {
			out[name] = append(out[name], rr.String())
		}
	}
	return out
}

// benchSource is a lock-free local source for benchmarks. It reports
// wild from Wildcards, as a hosts source does (false for most data).
type benchSource struct {
	rrs  map[string][]dns.RR // a nil value is an empty non-terminal
	wild bool
}

func (b *benchSource) Lookup(_ context.Context, q *Question) Result {
	if rrs, ok := b.rrs[q.Name]; ok {
		return Result{Status: Found, RRs: rrs}
	}
	return Result{Status: NotMine}
}
func (b *benchSource) Wildcards() bool { return b.wild }
func (b *benchSource) Kind() string    { return "hosts" }
func (b *benchSource) TTL() uint32     { return 60 }
func (b *benchSource) Serial() uint32  { return 1 }

// fakeForward behaves like the forward source: every query gets a
// complete response (Answered), NXDOMAIN with the upstream's SOA for names
// it does not know.
type fakeForward struct {
	rrs  map[string][]dns.RR
	kind string // "": kindForward

	mu    sync.Mutex
	asked []string
	last  *dns.Msg
}

func newForward(t testing.TB, records ...string) *fakeForward {
	t.Helper()
	f := &fakeForward{rrs: make(map[string][]dns.RR)}
	for _, s := range records {
		rr := dnstest.MustRR(t, s)
		f.rrs[rr.Header().Name] = append(f.rrs[rr.Header().Name], rr)
	}
	return f
}

func (f *fakeForward) Lookup(_ context.Context, q *Question) Result {
	m := new(dns.Msg)
	m.SetQuestion(q.Name, q.Type)
	m.Response, m.RecursionAvailable = true, true
	if rrs, ok := f.rrs[q.Name]; ok {
		for _, rr := range rrs {
			if q.Type == dns.TypeANY || rr.Header().Rrtype == q.Type || rr.Header().Rrtype == dns.TypeCNAME {
				m.Answer = append(m.Answer, dns.Copy(rr))
			}
		}
	} else {
		m.Rcode = dns.RcodeNameError
		m.Ns = []dns.RR{&dns.SOA{
			Hdr: dns.RR_Header{Name: ".", Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: 900},
			Ns:  "a.root-servers.net.", Mbox: "nstld.verisign-grs.com.",
			Serial: 2024010100, Refresh: 1800, Retry: 900, Expire: 604800, Minttl: 86400,
		}}
	}
	f.mu.Lock()
	f.asked = append(f.asked, q.Name+" "+dns.TypeToString[q.Type])
	f.last = m
	f.mu.Unlock()
	return Result{Status: Answered, Msg: m}
}

func (f *fakeForward) Kind() string {
	if f.kind != "" {
		return f.kind
	}
	return kindForward
}
func (f *fakeForward) Remote() bool   { return true }
func (f *fakeForward) TTL() uint32    { return 0 }
func (f *fakeForward) Serial() uint32 { return 0 }

func (f *fakeForward) questions() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.asked...)
}

// kindForward is the Kind of the fake forward source.
const kindForward = "forward"
