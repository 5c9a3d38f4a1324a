package dynamic

import (
	"fmt"
	"net/netip"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// BenchmarkCommit commits one update (an A record replaced at one name)
// at a time to a store of 10,000 records, each fsync'd, and reports the
// latency per update at the 50th and 99th percentile.
func BenchmarkCommit(b *testing.B) {
	be := openStore(b, filepath.Join(b.TempDir(), "s.db"), Options{})
	defer be.Close()
	s := newSource(be, DefaultMaxRecords)
	const records = 10_000
	sets := make(map[string][]dns.RR, records)
	for i := range records {
		name := fmt.Sprintf("h%d.corp.internal.", i)
		sets[name] = []dns.RR{&dns.A{Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 300},
			A: netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)}).AsSlice()}}
	}
	if err := commit(b, s, "corp.internal.", sets); err != nil {
		b.Fatal(err)
	}
	if s.Records() != records {
		b.Fatalf("store holds %d records", s.Records())
	}
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		name := fmt.Sprintf("h%d.corp.internal.", i%records)
		rr := &dns.A{Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 300},
			A: netip.AddrFrom4([4]byte{10, 1, byte(i >> 8), byte(i)}).AsSlice()}
		start := time.Now()
		if err := commit(b, s, "corp.internal.", map[string][]dns.RR{name: {rr}}); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(lat)
	if len(lat) > 0 {
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
	}
}
