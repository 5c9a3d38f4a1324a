package file

import (
	"github.com/miekg/dns"

	"github.com/dnsd/dnsd/internal/pacing"
)

// NewRecordsSource returns a source that answers zones (lower-case FQDNs)
// from rrs with the semantics of a zone file holding them: the same
// index, referrals, wildcards and denial chains, its apex SOA the zones'
// SOA with a serial that follows the data. The secondary kind serves its
// transferred copies so. rrs are taken over (owners are made lower case);
// serial is the source's Serial. Records outside zones are left out, and
// counted in outside.
func NewRecordsSource(rrs []dns.RR, zones []string, serial uint32) (s *Source, outside int) {
	z := &zone{names: make(map[string][]dns.RR, len(rrs)), order: make([]string, 0, len(rrs)), ents: make(map[string]bool), ttl: uint32(DefaultTTL / 1e9)}
	for _, rr := range rrs {
		z.add(rr, zones)
	}
	var pc pacing.Pacer
	z.index(zones, &pc)
	c := &Config{Zones: zones}
	if len(zones) > 0 {
		c.Origin = zones[0]
	}
	b := &Backend{cfg: c}
	b.cur.Store(&snapshot{z: z, serial: serial})
	return NewSource(b), z.outside
}

// Records reports how many records the source holds.
func (s *Source) Records() int { return s.b.snapshot().z.records }
