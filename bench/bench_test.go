package bench

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/dnsd/dnsd/pipeline"
	"github.com/dnsd/dnsd/sources/hosts"
)

// hostsPipeline builds a pipeline with ten zones, the last one served by a
// real hosts backend over a file of n names.
func hostsPipeline(b *testing.B, n int) *pipeline.Pipeline {
	b.Helper()
	path := filepath.Join(b.TempDir(), "bench.hosts")
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; i < n; i++ {
		fmt.Fprintf(f, "10.%d.%d.%d host%d.example.internal\n", i>>16&255, i>>8&255, i&255, i)
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
	be, err := hosts.OpenBackend([]string{path}, time.Hour, hosts.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = be.Close() })
	src := hosts.NewSource(be, nil, time.Hour, true, nil)
	be.WaitBuilt()
	var zones []pipeline.ZoneSpec
	for i := 0; i < 9; i++ {
		zones = append(zones, pipeline.ZoneSpec{Names: []string{fmt.Sprintf("zone%d.internal.", i)}, Sources: []pipeline.SourceEntry{{Source: src, Fallthrough: true}}})
	}
	zones = append(zones, pipeline.ZoneSpec{Names: []string{"example.internal.", "in-addr.arpa."}, Sources: []pipeline.SourceEntry{{Source: src, Fallthrough: true}}})
	p, err := pipeline.New(zones, pipeline.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	return p
}

func request(name string, t uint16) *pipeline.Request {
	m := new(dns.Msg)
	m.SetQuestion(name, t)
	// A lent buffer, as the server lends one per goroutine.
	return &pipeline.Request{Msg: m, Name: name, Type: t, Buf: new(pipeline.AnswerBuf)}
}

// benchResolve measures one query against the 100,000-name fixture;
// check rejects a wrong answer so the benchmark cannot measure a failure.
func benchResolve(b *testing.B, name string, qtype uint16, check func(*dns.Msg) bool) {
	p := hostsPipeline(b, 100_000)
	req := request(name, qtype)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if r := p.Resolve(ctx, req); !check(r.Msg) {
			b.Fatalf("wrong answer: %v", r.Msg)
		}
	}
}

func oneAnswer(m *dns.Msg) bool { return m.Rcode == dns.RcodeSuccess && len(m.Answer) == 1 }

// BenchmarkResolveHostsA: zone match + hosts lookup + response for an A
// hit, against 100,000 names.
func BenchmarkResolveHostsA(b *testing.B) {
	benchResolve(b, "host4242.example.internal.", dns.TypeA, oneAnswer)
}

// BenchmarkResolveHostsNXDOMAIN: the negative path (SOA synthesis).
func BenchmarkResolveHostsNXDOMAIN(b *testing.B) {
	benchResolve(b, "nohost.example.internal.", dns.TypeA, func(m *dns.Msg) bool {
		return m.Rcode == dns.RcodeNameError && len(m.Ns) == 1
	})
}

// BenchmarkResolveHostsPTR: a reverse lookup.
func BenchmarkResolveHostsPTR(b *testing.B) {
	benchResolve(b, "42.16.0.10.in-addr.arpa.", dns.TypePTR, oneAnswer)
}
