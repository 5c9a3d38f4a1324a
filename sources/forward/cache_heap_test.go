package forward

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// floodReply is an upstream's NXDOMAIN for a random name under
// example.com as the pool hands it to the cache: unpacked from the wire,
// its OPT stripped.
func floodReply(b testing.TB, name string) *dns.Msg { return upstreamReply(b, name, false) }

// upstreamReply is floodReply, or with positive one A record instead.
func upstreamReply(b testing.TB, name string, positive bool) *dns.Msg {
	q := new(dns.Msg)
	q.SetQuestion(name, dns.TypeA)
	q.SetEdns0(1232, false)
	r := new(dns.Msg)
	r.SetRcode(q, dns.RcodeNameError)
	if positive {
		r.SetRcode(q, dns.RcodeSuccess)
		r.Answer = []dns.RR{&dns.A{Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 300}, A: []byte{192, 0, 2, 1}}}
	} else {
		r.Ns = []dns.RR{&dns.SOA{Hdr: dns.RR_Header{Name: "example.com.", Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: 900},
			Ns: "ns1.example.com.", Mbox: "hostmaster.example.com.", Serial: 2026120401, Refresh: 7200, Retry: 3600, Expire: 1209600, Minttl: 300}}
	}
	r.SetEdns0(1232, false)
	wire, err := r.Pack()
	if err != nil {
		b.Fatal(err)
	}
	m := new(dns.Msg)
	if err := m.Unpack(wire); err != nil {
		b.Fatal(err)
	}
	stripOPT(m)
	return m
}

// BenchmarkCacheHeapPerEntry: the heap one cache entry holds under a
// random-subdomain flood (an NXDOMAIN with its SOA per name), and for an
// answer of one A record, reported as B/entry.
func BenchmarkCacheHeapPerEntry(b *testing.B) {
	b.Run("nxdomain", func(b *testing.B) { benchHeapPerEntry(b, false) })
	b.Run("a", func(b *testing.B) { benchHeapPerEntry(b, true) })
}

func benchHeapPerEntry(b *testing.B, positive bool) {
	const n = 100_000
	for b.Loop() {
		b.StopTimer()
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		replies := make([]*dns.Msg, n)
		keys := make([]Key, n)
		for i := range n {
			name := fmt.Sprintf("x%08x.example.com.", i*2654435761)
			replies[i] = upstreamReply(b, name, positive)
			keys[i] = Key{Name: name, Type: dns.TypeA, Upstreams: 1}
		}
		b.StartTimer()
		c := NewCache(CacheConfig{Size: 2 * n, MinTTL: 0, MaxTTL: time.Hour, NegativeTTL: time.Hour})
		for i := range n {
			c.Insert(keys[i], replies[i])
		}
		b.StopTimer()
		// What the cache holds alone: the replies and keys are only its.
		replies, keys = nil, nil
		runtime.GC()
		runtime.ReadMemStats(&after)
		if c.Len() != n {
			b.Fatalf("%d entries, want %d", c.Len(), n)
		}
		perEntry := float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / n
		runtime.KeepAlive(c)
		c.Close()
		b.ReportMetric(perEntry, "B/entry")
		b.StartTimer()
	}
}

// Negative answers of one zone hold one copy of its SOA, and an empty
// section holds nothing: a random-subdomain flood costs the cache a few
// hundred bytes a name (BenchmarkCacheHeapPerEntry).
func TestCacheNegativeEntriesShareTheSOA(t *testing.T) {
	c := NewCache(CacheConfig{Size: 100, MaxTTL: time.Hour, NegativeTTL: time.Hour})
	defer c.Close()
	names := []string{"a.example.com.", "b.example.com.", "c.example.com."}
	for _, n := range names {
		c.Insert(Key{Name: n, Type: dns.TypeA}, floodReply(t, n))
	}
	other := floodReply(t, "d.example.com.")
	other.Ns[0].Header().Name = "EXAMPLE.com." // as another upstream may write it
	c.Insert(Key{Name: "d.example.com.", Type: dns.TypeA}, other)
	var soas []*dns.SOA
	for _, n := range append(names, "d.example.com.") {
		m, ok := c.Get(Key{Name: n, Type: dns.TypeA})
		if !ok || m.Rcode != dns.RcodeNameError || len(m.Ns) != 1 {
			t.Fatalf("%s: %v %v", n, ok, m)
		}
		if m.Extra != nil {
			t.Errorf("%s: Extra %v holds the stripped OPT's array, want nil", n, m.Extra)
		}
		soa := m.Ns[0].(*dns.SOA)
		if soa.Ns != "ns1.example.com." || soa.Minttl != 300 || soa.Hdr.Ttl != 300 {
			t.Errorf("%s: SOA %v", n, soa)
		}
		soas = append(soas, soa)
	}
	if soas[0] != soas[1] || soas[1] != soas[2] {
		t.Errorf("three NXDOMAIN answers of example.com hold %p %p %p, want one SOA", soas[0], soas[1], soas[2])
	}
	if soas[3] == soas[0] || soas[3].Hdr.Name != "EXAMPLE.com." {
		t.Errorf("an SOA written in another case was shared: %v", soas[3])
	}
}
