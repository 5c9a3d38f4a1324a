package authority

import (
	"context"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/miekg/dns"

	"github.com/dnsd/dnsd/internal/dnstest"
	"github.com/dnsd/dnsd/pipeline"
)

// An IXFR from a version dnsd sent earlier gets the difference (RFC 1995
// §4): new SOA, old SOA, removed records, new SOA, added records, new
// SOA. From a serial it never sent, the whole zone; without a journal,
// always the whole zone.
func TestIXFRDifference(t *testing.T) {
	src := listFake{newFake(t, "file", 60, 100,
		"a.example. 60 IN A 10.0.0.1",
		"b.example. 60 IN A 10.0.0.2",
		"b.example. 60 IN TXT \"keep\"",
	)}
	spec := []TransferSpec{{Zones: []string{"example."}, Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}}
	journal := NewJournal()
	build := func(j *Journal) *gen {
		p, err := newGen([]pipeline.ZoneSpec{{Names: []string{"example."}, Sources: []pipeline.SourceEntry{{Source: src}}}}, genOptions{Transfers: spec, Journal: j})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	p := build(journal)
	first := p.Transfer(context.Background(), xfrRequest("example.", dns.TypeAXFR, 0))
	if first.Rcode != dns.RcodeSuccess || len(first.RRs) != 6 { // + the synthesized apex NS
		t.Fatalf("AXFR: %d %v", first.Rcode, first.RRs)
	}
	old := first.RRs[0].(*dns.SOA).Serial

	// The data changes: a.example. moves, c.example. is new, b's TXT stays.
	src.rrs["a.example."] = []dns.RR{dnstest.MustRR(t, "a.example. 60 IN A 10.0.0.9")}
	src.rrs["c.example."] = []dns.RR{dnstest.MustRR(t, "c.example. 60 IN AAAA fd00::3")}
	src.rrs["b.example."] = src.rrs["b.example."][1:]
	src.serial.Store(200)
	p = build(journal) // a reload in between: the journal is the process's

	res := p.Transfer(context.Background(), xfrRequest("example.", dns.TypeIXFR, old))
	if res.Rcode != dns.RcodeSuccess || !res.Incremental {
		t.Fatalf("IXFR from %d: rcode %d incremental %v", old, res.Rcode, res.Incremental)
	}
	cur := res.RRs[0].(*dns.SOA).Serial
	got := xfrStrings(res.RRs)
	soa := func(serial uint32) string {
		s := *first.RRs[0].(*dns.SOA)
		s.Serial = serial
		return strings.Join(strings.Fields(s.String()), " ")
	}
	want := []string{
		soa(cur), soa(old),
		"a.example. 60 IN A 10.0.0.1", "b.example. 60 IN A 10.0.0.2",
		soa(cur),
		"a.example. 60 IN A 10.0.0.9", "c.example. 60 IN AAAA fd00::3",
		soa(cur),
	}
	if !slices.Equal(got, want) {
		t.Errorf("IXFR difference:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// A serial dnsd never sent: the whole zone.
	if r := p.Transfer(context.Background(), xfrRequest("example.", dns.TypeIXFR, old-1)); r.Incremental || len(r.RRs) != 6 {
		t.Errorf("IXFR from an unknown serial: incremental %v, %d records; want the whole zone", r.Incremental, len(r.RRs))
	}
	// Without a journal: the whole zone.
	if r := build(nil).Transfer(context.Background(), xfrRequest("example.", dns.TypeIXFR, old)); r.Incremental || len(r.RRs) != 6 {
		t.Errorf("IXFR without a journal: incremental %v, %d records", r.Incremental, len(r.RRs))
	}
}

// The journal keeps at most JournalVersions versions of a zone, the
// newest.
func TestJournalBounds(t *testing.T) {
	j := NewJournal()
	for s := uint32(1); s <= JournalVersions+2; s++ {
		soa := &dns.SOA{Hdr: dns.RR_Header{Name: "example.", Rrtype: dns.TypeSOA, Class: dns.ClassINET}, Serial: s}
		j.record("example.", []dns.RR{soa, dnstest.MustRR(t, "a.example. 60 IN A 10.0.0.1"), soa})
	}
	if j.find("example.", 1) != nil || j.find("example.", 2) != nil || j.find("example.", JournalVersions+2) == nil {
		t.Errorf("the journal kept the wrong versions")
	}
	if j.total != JournalVersions {
		t.Errorf("%d records held, want %d", j.total, JournalVersions)
	}
	var nilJournal *Journal
	nilJournal.record("example.", nil)
	if nilJournal.find("example.", 1) != nil {
		t.Error("a nil journal found a version")
	}
}
