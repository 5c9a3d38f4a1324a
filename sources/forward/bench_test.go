package forward

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/dnsd/dnsd/pipeline"
)

// benchPipeline is a root zone forwarding to a real loopback upstream,
// behind nine other zones, as a resolver config would look.
func benchPipeline(b *testing.B, cc CacheConfig) (*pipeline.Pipeline, *upstreamServer, *Source) {
	b.Helper()
	u := startUpstream(b)
	o := poolOpts(u.Addr)
	o.Timeout = 2 * time.Second
	o.MaxConcurrent = 10000
	p, err := NewPool(o, nil, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = p.Close() })
	src := NewSource(p, NewCache(cc), nil, nil, ".", time.Minute)
	var zones []pipeline.ZoneSpec
	local := staticSource{}
	for i := 0; i < 9; i++ {
		zones = append(zones, pipeline.ZoneSpec{Names: []string{fmt.Sprintf("zone%d.internal.", i)}, Sources: []pipeline.SourceEntry{{Source: local, Fallthrough: true}}})
	}
	zones = append(zones, pipeline.ZoneSpec{Names: []string{"."}, Sources: []pipeline.SourceEntry{{Source: src, Fallthrough: true}}})
	pl, err := pipeline.New(zones, pipeline.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	return pl, u, src
}

func request(name string) *pipeline.Request {
	m := new(dns.Msg)
	m.SetQuestion(name, dns.TypeA)
	return &pipeline.Request{Msg: m, Name: name, Type: dns.TypeA}
}

// BenchmarkCacheHit: zone match + forward source + fresh cache entry, the
// whole pipeline, as a warm-cache query costs inside dnsd.
func BenchmarkCacheHit(b *testing.B) {
	pl, _, _ := benchPipeline(b, defaultCacheConfig())
	req := request("www.example.com.")
	ctx := context.Background()
	if r := pl.Resolve(ctx, req); len(r.Msg.Answer) != 1 {
		b.Fatalf("warm-up: %v", r.Msg)
	}
	b.ReportAllocs()
	for b.Loop() {
		if r := pl.Resolve(ctx, req); len(r.Msg.Answer) != 1 {
			b.Fatal(r.Msg)
		}
	}
}

// BenchmarkCacheHitParallel: the same from every core, one name.
func BenchmarkCacheHitParallel(b *testing.B) {
	pl, _, _ := benchPipeline(b, defaultCacheConfig())
	ctx := context.Background()
	pl.Resolve(ctx, request("www.example.com."))
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		req := request("www.example.com.")
		for pb.Next() {
			if r := pl.Resolve(ctx, req); len(r.Msg.Answer) != 1 {
				b.Error(r.Msg)
				return
			}
		}
	})
}

// BenchmarkCacheLookup: the source's Lookup alone on a hit.
func BenchmarkCacheLookup(b *testing.B) {
	_, _, src := benchPipeline(b, defaultCacheConfig())
	q := &pipeline.Question{Name: "www.example.com.", Type: dns.TypeA, Zone: "."}
	ctx := context.Background()
	src.Lookup(ctx, q)
	b.ReportAllocs()
	for b.Loop() {
		if r := src.Lookup(ctx, q); r.Status != pipeline.Answered {
			b.Fatal(r)
		}
	}
}

// BenchmarkColdMiss: a name never seen, through the pipeline, the source,
// one UDP exchange with the loopback upstream and the cache insert.
// Compare with BenchmarkDirectExchange: the difference is dnsd's overhead.
func BenchmarkColdMiss(b *testing.B) {
	pl, _, _ := benchPipeline(b, defaultCacheConfig())
	ctx := context.Background()
	reqs := make([]*pipeline.Request, 0, 1<<16)
	for i := 0; i < cap(reqs); i++ {
		reqs = append(reqs, request(fmt.Sprintf("n%d.example.com.", i)))
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if r := pl.Resolve(ctx, reqs[i%len(reqs)]); len(r.Msg.Answer) != 1 {
			b.Fatal(r.Msg)
		}
		i++
		if i%len(reqs) == 0 {
			b.StopTimer()
			pl, _, _ = benchPipeline(b, defaultCacheConfig())
			b.StartTimer()
		}
	}
}

// BenchmarkDirectExchange: a miekg/dns client exchange with the same
// upstream, a new socket per query as dnsd does.
func BenchmarkDirectExchange(b *testing.B) {
	u := startUpstream(b)
	c := &dns.Client{Timeout: 2 * time.Second}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		m := new(dns.Msg)
		m.SetQuestion(fmt.Sprintf("n%d.example.com.", i), dns.TypeA)
		m.SetEdns0(1232, false)
		r, _, err := c.Exchange(m, u.Addr)
		if err != nil || len(r.Answer) != 1 {
			b.Fatal(r, err)
		}
		i++
	}
}
