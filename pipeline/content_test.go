package pipeline

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/miekg/dns"
)

// listFake is a fakeSource that lists its records (a Lister).
type listFake struct{ *fakeSource }

func (l listFake) List(zone string, yield func(dns.RR) bool) error {
	if l.fail != nil {
		return l.fail
	}
	names := make([]string, 0, len(l.rrs))
	for n := range l.rrs {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		if !InZone(n, zone) {
			continue
		}
		for _, rr := range l.rrs[n] {
			if !yield(rr) {
				return nil
			}
		}
	}
	return nil
}

// soaFake is a listFake holding the zone's own SOA (a zone file).
type soaFake struct {
	listFake
	soa    *dns.SOA
	notOwn bool // its serial does not follow its data (a zone file with inline records)
}

func (s soaFake) SOA(zone string) (*dns.SOA, bool) {
	if s.soa != nil && s.soa.Hdr.Name == zone {
		return s.soa, !s.notOwn
	}
	return nil, false
}

// TestGenerationSerial: a new generation raises the zone's serial even
// when no source changed (a source removed by a reload).
func TestGenerationSerial(t *testing.T) {
	a := newFake(t, "hosts", 60, 100)
	b := newFake(t, "etcd", 60, 200)
	var clock SerialClock
	build := func(srcs ...Source) *Pipeline {
		var entries []SourceEntry
		for _, s := range srcs {
			entries = append(entries, SourceEntry{Source: s, Fallthrough: true})
		}
		p, err := New([]ZoneSpec{{Names: []string{"example."}, Sources: entries}}, Options{Serial: clock.Next()})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	a.serial.Store(clock.Next())
	b.serial.Store(clock.Next()) // every source's serial comes from the process's clock
	before := build(a, b).ZoneSOA("example.").Serial
	after := build(a).ZoneSOA("example.").Serial
	if !SerialLess(before, after) {
		t.Errorf("serial went from %d to %d when a reload removed a source, want it risen", before, after)
	}
}

// A reload never takes a zone's serial back: a zone file whose date serial
// is ahead of the clock, joined by another source, gets dnsd's own SOA one
// above it, and that zone's serial rises from there with its sources; a
// zone file's own serial that went back is the operator's, and logged.
func TestSerialNeverGoesBackAcrossReloads(t *testing.T) {
	own := &dns.SOA{Hdr: dns.RR_Header{Name: "example.", Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: 3600},
		Ns: "ns1.example.", Mbox: "admin.example.", Serial: 2024010105, Refresh: 7200, Retry: 600, Expire: 86400, Minttl: 300}
	file := soaFake{listFake{newFake(t, "file", 300, 1700000000, "www.example. 300 IN A 10.0.0.1")}, own, false}
	hosts := newFake(t, "hosts", 60, 1700000001, "db.example. 60 IN A 10.0.0.2")
	build := func(prev *Pipeline, serial uint32, srcs ...Source) *Pipeline {
		t.Helper()
		var entries []SourceEntry
		for _, s := range srcs {
			entries = append(entries, SourceEntry{Source: s, Fallthrough: true})
		}
		p, err := New([]ZoneSpec{{Names: []string{"example."}, Sources: entries}}, Options{Serial: serial, Prev: prev})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	p1 := build(nil, 1700000000, file)
	if s := p1.ZoneSOA("example.").Serial; s != 2024010105 {
		t.Fatalf("zone file alone: serial %d, want its own", s)
	}
	p2 := build(p1, 1700000002, file, hosts) // a hosts source joins: dnsd's SOA
	s2 := p2.ZoneSOA("example.").Serial
	if s2 != 2024010106 {
		t.Errorf("after a source joined the zone file: serial %d, want 2024010106 (one above the file's)", s2)
	}
	hosts.serial.Store(1700000050) // the hosts data changed
	if s := p2.ZoneSOA("example.").Serial; !SerialLess(s2, s) {
		t.Errorf("a change after that: serial %d, want above %d", s, s2)
	}
	p3 := build(p2, 1700000060, file, hosts) // another reload keeps the offset
	if s := p3.ZoneSOA("example."); !SerialLess(s2, s.Serial) {
		t.Errorf("the next reload: serial %d, want above %d", s.Serial, s2)
	}
}

// A zone that is not transferred keeps its serial across a reload that
// changes nothing in it too (its SOA answers say so), in any order its
// source lists the records; a changed record raises it.
func TestReloadKeepsSerialOfUntransferredZone(t *testing.T) {
	var clock SerialClock
	src := listFake{newFake(t, "hosts", 60, clock.Next(), "www.example. 60 IN A 10.0.0.1", "db.example. 60 IN A 10.0.0.2", "db.example. 60 IN AAAA fd00::2")}
	build := func(prev *Pipeline, s Source) *Pipeline {
		t.Helper()
		p, err := New([]ZoneSpec{{Names: []string{"example."}, Sources: []SourceEntry{{Source: s}}}}, Options{Serial: clock.Next(), Prev: prev})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	p1 := build(nil, src)
	s1 := p1.ZoneSOA("example.").Serial
	p2 := build(p1, src)
	if s := p2.ZoneSOA("example.").Serial; s != s1 {
		t.Errorf("a reload that changed nothing: serial %d, want %d", s, s1)
	}
	changed := listFake{newFake(t, "hosts", 60, clock.Next(), "www.example. 60 IN A 10.0.0.1", "db.example. 60 IN A 10.0.0.3", "db.example. 60 IN AAAA fd00::2")}
	if s := build(p2, changed).ZoneSOA("example.").Serial; !SerialLess(s1, s) {
		t.Errorf("a reload that changed a record: serial %d, want above %d", s, s1)
	}
}

// The reload's digest reads the sources' records while queries pack the
// same records into answers: it must not write to them (dns.PackRR sets
// a record's Rdlength; go test -race catches it).
func TestReloadDigestLeavesRecordsAlone(t *testing.T) {
	var clock SerialClock
	src := listFake{newFake(t, "hosts", 60, clock.Next(), "www.example. 60 IN A 10.0.0.1", "db.example. 60 IN TXT \"x\"")}
	build := func(prev *Pipeline) *Pipeline {
		t.Helper()
		p, err := New([]ZoneSpec{{Names: []string{"example."}, Sources: []SourceEntry{{Source: src}}}}, Options{Serial: clock.Next(), Prev: prev})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	first := build(nil)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			r := first.Resolve(context.Background(), &Request{Name: "www.example.", Type: dns.TypeA})
			if _, err := r.Msg.Pack(); err != nil {
				t.Error(err)
				return
			}
		}
	})
	p := first
	for range 50 {
		p = build(p)
	}
	close(stop)
	wg.Wait()
}

// A record too large for a transfer message is left out of listings, not
// out of what a reload compares: a reload that changes only it raises
// the serial (queries answer it).
func TestReloadSerialCountsOversizedRecords(t *testing.T) {
	var clock SerialClock
	big := func(c string) string {
		return "big.example. 60 IN TXT" + strings.Repeat(` "`+strings.Repeat(c, 250)+`"`, 300)
	}
	build := func(prev *Pipeline, s Source) *Pipeline {
		t.Helper()
		p, err := New([]ZoneSpec{{Names: []string{"example."}, Sources: []SourceEntry{{Source: s}}}}, Options{Serial: clock.Next(), Prev: prev})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	p1 := build(nil, listFake{newFake(t, "file", 60, clock.Next(), "www.example. 60 IN A 10.0.0.1", big("a"))})
	s1 := p1.ZoneSOA("example.").Serial
	p2 := build(p1, listFake{newFake(t, "file", 60, clock.Next(), "www.example. 60 IN A 10.0.0.1", big("b"))})
	if s := p2.ZoneSOA("example.").Serial; !SerialLess(s1, s) {
		t.Errorf("a reload that changed an oversized record: serial %d, want above %d", s, s1)
	}
}
