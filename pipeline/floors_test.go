package pipeline

import (
	"testing"

	"github.com/miekg/dns"
)

// dateSOA is a zone file's SOA with a date serial ahead of the clock.
func dateSOA(serial uint32) *dns.SOA {
	return &dns.SOA{Hdr: dns.RR_Header{Name: "example.", Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: 3600},
		Ns: "ns1.example.", Mbox: "admin.example.", Serial: serial, Refresh: 7200, Retry: 600, Expire: 86400, Minttl: 300}
}

func buildZone(t *testing.T, opts Options, srcs ...Source) *Pipeline {
	t.Helper()
	var entries []SourceEntry
	for _, s := range srcs {
		entries = append(entries, SourceEntry{Source: s, Fallthrough: true})
	}
	p, err := New([]ZoneSpec{{Names: []string{"example."}, Sources: entries}}, opts)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// A zone file whose own serial 2026120301 was served alone, joined by a
// hosts source whose serial is the clock's (1796323627, below it in RFC
// 1982 terms): dnsd's serial is above the file's, at a reload and at a
// start that builds the two at once (no earlier pipeline to carry from).
func TestMadeSerialAboveZoneFileSerial(t *testing.T) {
	const fileSerial, clock = 2026120301, 1796323627
	if !SerialLess(clock, fileSerial) {
		t.Fatal("the test needs the clock below the file's serial")
	}
	file := soaFake{listFake{newFake(t, "file", 300, clock, "www.example. 300 IN A 10.0.0.1")}, dateSOA(fileSerial), false}
	hosts := newFake(t, "hosts", 60, clock+1, "db.example. 60 IN A 10.0.0.2")
	alone := buildZone(t, Options{Serial: clock}, file)
	if s := alone.ZoneSOA("example.").Serial; s != fileSerial {
		t.Fatalf("zone file alone: %d, want its own %d", s, fileSerial)
	}
	for _, tc := range []struct {
		name string
		prev *Pipeline
	}{{"reload", alone}, {"start", nil}} {
		p := buildZone(t, Options{Serial: clock + 2, Prev: tc.prev}, file, hosts)
		soa := p.ZoneSOA("example.")
		if !SerialLess(fileSerial, soa.Serial) {
			t.Errorf("%s: zone file + hosts: serial %d, want above %d", tc.name, soa.Serial, fileSerial)
		}
		if soa.Ns != "ns1.example." {
			t.Errorf("%s: SOA %v, want the zone file's with dnsd's serial", tc.name, soa)
		}
		hosts.serial.Store(clock + 10) // the hosts data changes: it rises from there
		if s := p.ZoneSOA("example.").Serial; !SerialLess(soa.Serial, s) {
			t.Errorf("%s: after a change %d, want above %d", tc.name, s, soa.Serial)
		}
		hosts.serial.Store(clock + 1)
	}
}

// Floors: a made serial below its floor starts one above it, one equal to
// it stays, one above it is left alone; a zone file's own serial below its
// floor is not served (dnsd's serial above the floor is, in the file's
// SOA) until a reload finds it above what was served.
func TestSerialFloors(t *testing.T) {
	const clock = 1796323627
	key := ZoneKey{Zone: "example."}
	hosts := newFake(t, "hosts", 60, clock, "db.example. 60 IN A 10.0.0.2")
	for _, tc := range []struct {
		floor, want uint32
	}{
		{2026120310, 2026120311},               // above the clock in RFC 1982 terms
		{clock, clock},                         // the same: kept
		{clock - 5, clock},                     // below: nothing to do
		{clock + 1<<31 - 5, clock + 1<<31 - 4}, // far above, near the wrap
	} {
		p := buildZone(t, Options{Serial: clock, Floors: map[ZoneKey]uint32{key: tc.floor}}, hosts)
		if s := p.ZoneSOA("example.").Serial; s != tc.want {
			t.Errorf("floor %d: serial %d, want %d", tc.floor, s, tc.want)
		}
		if got := p.Serials()[key]; got != tc.want {
			t.Errorf("floor %d: Serials() says %d", tc.floor, got)
		}
	}

	file := soaFake{listFake{newFake(t, "file", 300, clock, "www.example. 300 IN A 10.0.0.1")}, dateSOA(2026120301), false}
	p := buildZone(t, Options{Serial: clock, Floors: map[ZoneKey]uint32{key: 2026120305}}, file)
	soa := p.ZoneSOA("example.")
	if soa.Serial != 2026120306 || soa.Ns != "ns1.example." || soa.Refresh != 7200 {
		t.Errorf("zone file below its floor: %v, want its SOA with serial 2026120306", soa)
	}
	r := p.Resolve(t.Context(), &Request{Name: "nx.example.", Type: dns.TypeA})
	if ns := r.Msg.Ns; len(ns) != 1 || ns[0].(*dns.SOA).Serial != 2026120306 {
		t.Errorf("negative answer's SOA: %v", ns)
	}
	// A reload: still below what was served, still dnsd's serial.
	p2 := buildZone(t, Options{Serial: clock + 1, Prev: p}, file)
	if s := p2.ZoneSOA("example.").Serial; SerialLess(s, 2026120306) {
		t.Errorf("reload, the file's serial still below: %d", s)
	}
	// The operator raises the file's serial above: it is served as written.
	raised := soaFake{file.listFake, dateSOA(2026120400), false}
	if s := buildZone(t, Options{Serial: clock + 2, Prev: p2}, raised).ZoneSOA("example.").Serial; s != 2026120400 {
		t.Errorf("the file's serial raised above: %d, want 2026120400", s)
	}
	// A zone file alone at its floor serves its own serial.
	if s := buildZone(t, Options{Serial: clock, Floors: map[ZoneKey]uint32{key: 2026120301}}, file).ZoneSOA("example.").Serial; s != 2026120301 {
		t.Errorf("zone file at its floor: %d", s)
	}
}

// Serials lists the views' own zones too, under their view.
func TestSerialsListsViews(t *testing.T) {
	top := newFake(t, "hosts", 60, 100, "a.example. 60 IN A 10.0.0.1")
	inner := newFake(t, "hosts", 60, 200, "a.inner. 60 IN A 10.0.0.1")
	p, err := New([]ZoneSpec{{Names: []string{"example."}, Sources: []SourceEntry{{Source: top}}}}, Options{
		Views:  []ViewSpec{{Name: "lan", Zones: []ZoneSpec{{Names: []string{"inner."}, Sources: []SourceEntry{{Source: inner}}}}}},
		Floors: map[ZoneKey]uint32{{View: "lan", Zone: "inner."}: 500},
	})
	if err != nil {
		t.Fatal(err)
	}
	got := p.Serials()
	if got[ZoneKey{Zone: "example."}] != 100 || got[ZoneKey{View: "lan", Zone: "inner."}] != 501 || len(got) != 2 {
		t.Errorf("Serials() = %v", got)
	}
}
