package daemon

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/dnsd/dnsd/pipeline"
)

// gateSource answers A 10.0.0.<n>, optionally waiting on a gate first.
type gateSource struct {
	rrs     []dns.RR // the one record, in a slice made once (no allocation per lookup)
	entered chan struct{}
	gate    chan struct{}
}

func newGateSource(t *testing.T, ip string, gated bool) *gateSource {
	rr, err := dns.NewRR("a.test. 60 IN A " + ip)
	if err != nil {
		t.Fatal(err)
	}
	s := &gateSource{rrs: []dns.RR{rr}}
	if gated {
		s.entered, s.gate = make(chan struct{}, 16), make(chan struct{})
	}
	return s
}

func (s *gateSource) Lookup(ctx context.Context, q *pipeline.Question) pipeline.Result {
	if s.gate != nil {
		s.entered <- struct{}{}
		<-s.gate
	}
	if q.Name != "a.test." {
		return pipeline.Result{}
	}
	return pipeline.Result{Status: pipeline.Found, RRs: s.rrs}
}
func (s *gateSource) Kind() string   { return "gate" }
func (s *gateSource) TTL() uint32    { return 60 }
func (s *gateSource) Serial() uint32 { return 1 }

func generationOf(t *testing.T, src pipeline.Source) *generation {
	p, err := pipeline.New([]pipeline.ZoneSpec{{Names: []string{"test."}, Sources: []pipeline.SourceEntry{{Source: src}}}}, pipeline.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return &generation{p: p}
}

func ask(g *generation) string {
	m := new(dns.Msg)
	m.SetQuestion("a.test.", dns.TypeA)
	r := g.Resolve(context.Background(), &pipeline.Request{Msg: m, Name: "a.test.", Type: dns.TypeA})
	if len(r.Msg.Answer) != 1 {
		return dns.RcodeToString[r.Msg.Rcode]
	}
	return r.Msg.Answer[0].(*dns.A).A.String()
}

// A query in flight on the old generation finishes on it; drain waits for
// it; a query that reaches the old generation after it was replaced is
// answered by the new one.
func TestGenerationDrainsInFlight(t *testing.T) {
	oldSrc := newGateSource(t, "10.0.0.1", true)
	old := generationOf(t, oldSrc)

	got := make(chan string, 1)
	go func() { got <- ask(old) }()
	<-oldSrc.entered

	next := generationOf(t, newGateSource(t, "10.0.0.2", false))
	old.replacedBy(next)
	if a := ask(old); a != "10.0.0.2" {
		t.Fatalf("a query reaching the replaced generation got %s, want the new generation's 10.0.0.2", a)
	}
	if _, ok := old.Fresh(pipeline.Stamp{}); ok {
		t.Fatal("a replaced generation calls a stamp fresh")
	}

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := old.drain(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("drain returned %v while a query was still in flight on the old generation", err)
	}
	close(oldSrc.gate)
	if a := <-got; a != "10.0.0.1" {
		t.Fatalf("the in-flight query got %s, want the old generation's 10.0.0.1", a)
	}
	ctx2, cancel2 := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel2()
	if err := old.drain(ctx2); err != nil {
		t.Fatalf("drain after the query finished: %v", err)
	}
	if n := next.inflight.Load(); n != 0 {
		t.Fatalf("the new generation counts %d queries in flight, want 0", n)
	}
}

// BenchmarkGenerationResolve: a generation's cost around a pipeline
// answer, from every core at once (its in-flight count is touched twice
// per query).
func BenchmarkGenerationResolve(b *testing.B) {
	rr, _ := dns.NewRR("a.test. 60 IN A 10.0.0.1")
	src := &gateSource{rrs: []dns.RR{rr}}
	p, err := pipeline.New([]pipeline.ZoneSpec{{Names: []string{"test."}, Sources: []pipeline.SourceEntry{{Source: src}}}}, pipeline.Options{})
	if err != nil {
		b.Fatal(err)
	}
	g := &generation{p: p}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		m := new(dns.Msg)
		m.SetQuestion("a.test.", dns.TypeA)
		// The answer is built in a lent buffer, as the server lends one.
		req := &pipeline.Request{Msg: m, Name: "a.test.", Type: dns.TypeA, Buf: new(pipeline.AnswerBuf)}
		for pb.Next() {
			if r := g.Resolve(context.Background(), req); len(r.Msg.Answer) != 1 {
				b.Error("no answer")
				return
			}
		}
	})
}
