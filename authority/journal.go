package authority

import (
	"strings"
	"sync"

	"github.com/miekg/dns"
)

// Journal keeps the last versions of each transferred zone that dnsd sent
// to a secondary, so that an IXFR from one of them is answered with the
// difference (RFC 1995 §4) instead of the whole zone. A version is
// recorded when a full transfer is sent — exactly the versions secondaries
// can hold. One Journal lives as long as the process (reloads keep it:
// pass the same one in every generation's Options); a nil *Journal keeps
// nothing. Bounds: JournalVersions versions per zone and JournalRecords
// records in all; the oldest versions go first.
type Journal struct {
	mu    sync.Mutex
	zones map[string][]*version // oldest first
	total int                   // records held, all zones
}

// Journal bounds.
const (
	JournalVersions = 4
	JournalRecords  = 1_000_000
)

// version is a zone's content as one full transfer sent it.
type version struct {
	soa *dns.SOA
	rrs []dns.RR // without the SOAs; shared and read-only
}

// NewJournal returns an empty journal.
func NewJournal() *Journal { return &Journal{zones: make(map[string][]*version)} }

// record keeps content (SOA, records, SOA) as zone's version at its
// serial.
func (j *Journal) record(zone string, content []dns.RR) {
	if j == nil || len(content) < 2 {
		return
	}
	soa, ok := content[0].(*dns.SOA)
	if !ok {
		return
	}
	rrs := content[1 : len(content)-1]
	if len(rrs) > JournalRecords/2 {
		return // too large to keep two versions of
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	vs := j.zones[zone]
	for _, v := range vs {
		if v.soa.Serial == soa.Serial {
			return // this serial is held already
		}
	}
	vs = append(vs, &version{soa: soa, rrs: rrs})
	j.total += len(rrs)
	for len(vs) > JournalVersions || j.total > JournalRecords && len(vs) > 1 {
		j.total -= len(vs[0].rrs)
		vs = vs[1:]
	}
	j.zones[zone] = vs
}

// find returns zone's version at serial, or nil.
func (j *Journal) find(zone string, serial uint32) *version {
	if j == nil {
		return nil
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, v := range j.zones[zone] {
		if v.soa.Serial == serial {
			return v
		}
	}
	return nil
}

// ixfrDiff answers an IXFR from old to the current content cur (SOA,
// records, SOA) as one difference sequence: new SOA, old SOA, the records
// removed, new SOA, the records added, new SOA (RFC 1995 §4). Records
// are compared by their text, owner and all (a changed TTL is a removal
// and an addition).
func ixfrDiff(old *version, cur []dns.RR) []dns.RR {
	soa := cur[0]
	now := cur[1 : len(cur)-1]
	key := func(rr dns.RR) string { return strings.ToLower(rr.Header().Name) + "\x00" + rr.String() }
	had := make(map[string]int, len(old.rrs))
	for _, rr := range old.rrs {
		had[key(rr)]++
	}
	var added []dns.RR
	for _, rr := range now {
		k := key(rr)
		if had[k] > 0 {
			had[k]--
			continue
		}
		added = append(added, rr)
	}
	out := []dns.RR{soa, old.soa}
	for _, rr := range old.rrs {
		k := key(rr)
		if had[k] > 0 {
			had[k]--
			out = append(out, rr)
		}
	}
	out = append(out, soa)
	out = append(out, added...)
	return append(out, soa)
}
