package pipeline

import (
	"context"
	"fmt"
	"testing"

	"github.com/miekg/dns"

	"github.com/dnsd/dnsd/internal/dnstest"
)

// benchPipeline is shaped like a typical deployment: a cluster zone with
// its reverse zone, a few internal zones and the root.
func benchPipeline(tb testing.TB) *Pipeline {
	tb.Helper()
	src := benchPipelineSource(tb)
	p, err := New([]ZoneSpec{
		{Names: []string{"cluster.local.", "10.in-addr.arpa."}, Sources: []SourceEntry{{src, false}}},
		{Names: []string{"example.internal.", "corp.internal."}, Sources: []SourceEntry{{src, true}}},
		{Names: []string{"."}, Sources: []SourceEntry{{src, true}}},
	}, Options{})
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

func BenchmarkMatch(b *testing.B) {
	p := benchPipeline(b)
	names := []string{
		"my-svc.my-namespace.svc.cluster.local.",
		"host42.example.internal.",
		"www.example.com.",
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if _, ok := p.Match(names[i%len(names)]); !ok {
			b.Fatal("no match")
		}
	}
}

func aRequest(name string) *Request {
	m := new(dns.Msg)
	m.SetQuestion(name, dns.TypeA)
	// A lent buffer, as the server lends one per goroutine.
	return &Request{Msg: m, Name: name, Type: dns.TypeA, Buf: new(AnswerBuf)}
}

func BenchmarkResolveAHit(b *testing.B) {
	p := benchPipeline(b)
	req := aRequest("host42.example.internal.")
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if resp := p.Resolve(ctx, req); len(resp.Msg.Answer) != 1 {
			b.Fatal("no answer")
		}
	}
}

// BenchmarkResolveAHitBuf is BenchmarkResolveAHit with the response
// built in the caller's AnswerBuf, as the server does.
func BenchmarkResolveAHitBuf(b *testing.B) {
	p := benchPipeline(b)
	req := aRequest("host42.example.internal.")
	req.Buf = new(AnswerBuf)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if resp := p.Resolve(ctx, req); len(resp.Msg.Answer) != 1 {
			b.Fatal("no answer")
		}
	}
}

func BenchmarkResolveNXDOMAIN(b *testing.B) {
	p := benchPipeline(b)
	req := aRequest("nope.cluster.local.")
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if resp := p.Resolve(ctx, req); resp.Msg.Rcode != dns.RcodeNameError {
			b.Fatal("not NXDOMAIN")
		}
	}
}

// TestAllocations guards the hot path's allocation budget (not timed).
func TestAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts differ under the race detector")
	}
	p := benchPipeline(t)
	if n := testing.AllocsPerRun(100, func() { p.Match("my-svc.my-namespace.svc.cluster.local.") }); n != 0 {
		t.Errorf("Match: %v allocs, want 0", n)
	}
	req, ctx := aRequest("host42.example.internal."), context.Background()
	if n := testing.AllocsPerRun(100, func() { p.Resolve(ctx, req) }); n != 0 {
		t.Errorf("Resolve A hit with a lent buffer: %v allocs, want 0", n)
	}
	req.Buf = nil
	if n := testing.AllocsPerRun(100, func() { p.Resolve(ctx, req) }); n != 1 {
		t.Errorf("Resolve A hit: %v allocs, want 1 (the response)", n)
	}
	buf := *req
	buf.Buf = new(AnswerBuf)
	if n := testing.AllocsPerRun(100, func() { p.Resolve(ctx, &buf) }); n != 0 {
		t.Errorf("Resolve A hit with an AnswerBuf: %v allocs, want 0", n)
	}
	many := aRequest("many.example.internal.")
	many.Buf = buf.Buf
	p.Resolve(ctx, many)
	if n := testing.AllocsPerRun(100, func() { p.Resolve(ctx, many) }); n != 0 {
		t.Errorf("Resolve of 10 A records with an AnswerBuf: %v allocs, want 0", n)
	}
	nx := aRequest("nope.example.internal.")
	nx.Buf = buf.Buf
	if resp := p.Resolve(ctx, nx); resp.Msg.Rcode != dns.RcodeNameError || len(resp.Msg.Answer) != 0 {
		t.Errorf("an AnswerBuf reused for NXDOMAIN: %v", resp.Msg)
	}
}

// benchPipelineSource holds 1000 names of one A record and one of ten, no
// wildcard.
func benchPipelineSource(tb testing.TB) *benchSource {
	tb.Helper()
	src := &benchSource{rrs: make(map[string][]dns.RR)}
	for i := range 1000 {
		rr := dnstest.MustRR(tb, fmt.Sprintf("host%d.example.internal. 60 IN A 10.0.%d.%d", i, i/256, i%256))
		src.rrs[rr.Header().Name] = append(src.rrs[rr.Header().Name], rr)
	}
	for i := range 10 { // a headless service's answer, beyond the inline room
		rr := dnstest.MustRR(tb, fmt.Sprintf("many.example.internal. 60 IN A 10.9.0.%d", i))
		src.rrs[rr.Header().Name] = append(src.rrs[rr.Header().Name], rr)
	}
	return src
}
