package hosts

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dnsd/dnsd/pipeline"
	"github.com/miekg/dns"
)

func benchSource(b *testing.B) *Source {
	b.Helper()
	path := filepath.Join(b.TempDir(), "hosts")
	var sb strings.Builder
	for i := range 10000 {
		fmt.Fprintf(&sb, "10.%d.%d.%d host%d.example.internal\n", i>>16&255, i>>8&255, i&255, i)
	}
	if err := os.WriteFile(path, []byte(sb.String()), 0o644); err != nil {
		b.Fatal(err)
	}
	bk, err := OpenBackend([]string{path}, time.Hour, Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { bk.Close() })
	s := NewSource(bk, nil, time.Hour, true, nil)
	bk.WaitBuilt()
	return s
}

func BenchmarkLookupHit(b *testing.B) {
	s := benchSource(b)
	q := &pipeline.Question{Name: "host4242.example.internal.", Type: dns.TypeA, Zone: "example.internal."}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if r := s.Lookup(ctx, q); len(r.RRs) != 1 {
			b.Fatal("miss")
		}
	}
}

// BenchmarkLookupHitLarge is BenchmarkLookupHit with the records made at
// lookup time, as for a file of more than prebuiltMax pairs.
func BenchmarkLookupHitLarge(b *testing.B) {
	defer func(n int) { prebuiltMax = n }(prebuiltMax)
	prebuiltMax = 0
	s := benchSource(b)
	q := &pipeline.Question{Name: "host4242.example.internal.", Type: dns.TypeA, Zone: "example.internal."}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if r := s.Lookup(ctx, q); len(r.RRs) != 1 {
			b.Fatal("miss")
		}
	}
}

// BenchmarkLookupPTRLarge: a PTR hit, records made at lookup time.
func BenchmarkLookupPTRLarge(b *testing.B) {
	defer func(n int) { prebuiltMax = n }(prebuiltMax)
	prebuiltMax = 0
	s := benchSource(b)
	q := &pipeline.Question{Name: "98.16.0.10.in-addr.arpa.", Type: dns.TypePTR, Zone: "in-addr.arpa."}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if r := s.Lookup(ctx, q); len(r.RRs) != 1 {
			b.Fatal("miss")
		}
	}
}

func BenchmarkLookupMiss(b *testing.B) {
	s := benchSource(b)
	q := &pipeline.Question{Name: "nohost.example.internal.", Type: dns.TypeA, Zone: "example.internal."}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if r := s.Lookup(ctx, q); r.Status != pipeline.NotMine {
			b.Fatal("hit")
		}
	}
}

func BenchmarkLoad1M(b *testing.B) {
	path := filepath.Join(b.TempDir(), "hosts")
	fh, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	w := bufio.NewWriter(fh)
	for i := range 1_000_000 {
		if i%10 == 9 {
			fmt.Fprintf(w, "2001:db8::%x:%x host%d.example.internal\n", i>>16, i&0xffff, i)
		} else {
			fmt.Fprintf(w, "10.%d.%d.%d host%d.example.internal\n", i>>16&255, i>>8&255, i&255, i)
		}
	}
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	fh.Close()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		bk, err := OpenBackend([]string{path}, time.Hour, Options{})
		if err != nil {
			b.Fatal(err)
		}
		if bk.Records() != 2_000_000 {
			b.Fatalf("records = %d", bk.Records())
		}
		bk.Close()
	}
}
