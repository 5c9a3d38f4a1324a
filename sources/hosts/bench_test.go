package hosts

import (
	"bufio"
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dnsd/dnsd/pipeline"
	"github.com/miekg/dns"
)

func FuzzParseLine(f *testing.F) {
	for _, s := range []string{
		"", "# c", "10.0.0.1 a b.c. D.E # x", "::1 localhost", "fe80::1%eth0 l",
		"10.0.0.1", "1.2.3.4 a..b", "2001:db8::1\tv6\r", "::ffff:1.2.3.4 m", "1.2.3.4 " + strings.Repeat("a.", 130),
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		addr, names, err := ParseLine(line)
		if err != nil {
			if addr.IsValid() || names != nil {
				t.Fatalf("error %v with results %v %q", err, addr, names)
			}
			return
		}
		if len(names) == 0 {
			if addr.IsValid() {
				t.Fatalf("address %v without names", addr)
			}
			return
		}
		if !addr.IsValid() || addr.Zone() != "" {
			t.Fatalf("invalid address %v", addr)
		}
		// The address is the first field, as netip reads it (zone dropped).
		field := strings.Fields(strings.SplitN(string(line), "#", 2)[0])[0]
		field, _, _ = strings.Cut(field, "%")
		if want, err := netip.ParseAddr(field); err != nil || want.Unmap() != addr {
			t.Fatalf("address %v, netip reads %q as %v, %v", addr, field, want, err)
		}
		for _, n := range names {
			if _, ok := dns.IsDomainName(n); !ok || !dns.IsFqdn(n) || n != strings.ToLower(n) || len(n) > 254 {
				t.Fatalf("bad name %q from %q", n, line)
			}
			if _, err := dns.NewRR(n + " 60 IN A 10.0.0.1"); err != nil {
				t.Fatalf("name %q from %q not usable: %v", n, line, err)
			}
		}
	})
}

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
	bk, err := OpenBackend([]string{path}, time.Hour, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { bk.Close() })
	return NewSource(bk, nil, time.Hour, true, nil)
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
		bk, err := OpenBackend([]string{path}, time.Hour, nil, nil)
		if err != nil {
			b.Fatal(err)
		}
		if bk.Records() != 2_000_000 {
			b.Fatalf("records = %d", bk.Records())
		}
		bk.Close()
	}
}
