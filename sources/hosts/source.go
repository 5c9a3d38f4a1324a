package hosts

import (
	"context"
	"slices"
	"sync/atomic"
	"time"

	"github.com/dnsd/dnsd/pipeline"
	"github.com/miekg/dns"
)

// Source is one zone's hosts source: a view over a shared Backend (may be
// nil) plus the zone's inline entries. It implements pipeline.Source.
type Source struct {
	backend *Backend
	data    *atomic.Pointer[snapshot] // the backend's records with this source's TTL
	inline  *ttlIndex                 // nil without entries
	ttl     uint32
	reverse bool
	serial  uint32 // taken when the Source is made: its inline entries' serial
	// zones: when set, the names the source answers for (its zone
	// key's). A PTR at an owner in one of rzones (the reverse zones among
	// them) is always given, whatever zone its name is in; elsewhere (a
	// forward zone holding reverse names, such as ".") only a PTR whose
	// name lies in zones is.
	zones, rzones []string
}

var (
	_ pipeline.Source     = (*Source)(nil)
	_ pipeline.Wildcarder = (*Source)(nil)
)

// NewSource returns a Source over b (nil when only inline entries are
// configured) and entries (names already lower-case FQDNs). ttl is the TTL
// of the inline records and of negative answers; reverse enables PTR
// answers. The Source does not own b: closing b is the caller's job, after
// the Source is no longer used.
func NewSource(b *Backend, entries []Entry, ttl time.Duration, reverse bool, serials *pipeline.SerialClock) *Source {
	s := newSource(entries, ttl, reverse, serials)
	if b != nil {
		b.mu.Lock()
		s.backend, s.data = b, &b.defaultView().cur
		b.mu.Unlock()
	}
	return s
}

// NewViewSource is NewSource over the records of a backend View (which
// carry the View's TTL). The Source does not own v.
func NewViewSource(v *View, entries []Entry, ttl time.Duration, reverse bool, serials *pipeline.SerialClock) *Source {
	s := newSource(entries, ttl, reverse, serials)
	s.backend, s.data = v.b, &v.v.cur
	return s
}

func newSource(entries []Entry, ttl time.Duration, reverse bool, serials *pipeline.SerialClock) *Source {
	s := &Source{
		ttl:     pipeline.TTLSeconds(ttl),
		reverse: reverse,
		serial:  serials.Next(),
	}
	if len(entries) > 0 {
		s.inline = newTTLIndex(buildIndex([]*fileData{entriesData(entries)}, nil), s.ttl)
	}
	return s
}

// Within tells the source its zone key's names (reverse zones
// included). It answers PTR in a reverse zone among them for every
// address of its entries in that zone, whatever zone the entry's names
// are in; in a forward zone that holds reverse names (the root) a PTR to
// a name outside zones is left out. Forward names outside zones are never
// asked. It returns s.
func (s *Source) Within(zones []string) *Source {
	s.zones, s.rzones = zones, nil
	if reverseOnly(zones) {
		s.rzones = zones
	}
	return s
}

// reverseOnly reports a zone key of reverse zones only. Its hosts source
// answers PTR for every address in them whatever zone the names are in:
// no zone of the key could hold those names. In a key with a forward zone
// the names are the forward zones': a PTR to a name outside the key is
// left out, as the name is.
func reverseOnly(zones []string) bool {
	for _, z := range zones {
		if !pipeline.Reverse(z) {
			return false
		}
	}
	return len(zones) > 0
}

// Kind is "hosts".
func (s *Source) Kind() string { return "hosts" }

// TTL is the source's TTL in seconds.
func (s *Source) TTL() uint32 { return s.ttl }

// Serial is the larger of the backend's serial and the Source's own,
// taken when it was made: a reload that changes the inline entries makes a
// new Source with a larger serial even when the files' backend is kept
// (serials only rise), and a later change of the files gets a larger one still
// (both come from the same pipeline.SerialClock).
func (s *Source) Serial() uint32 {
	if s.data != nil {
		return max(s.data.Load().serial, s.serial)
	}
	return s.serial
}

// Wildcards reports whether the inline entries or the files' current data
// hold a wildcard name ("*.apps.example.internal"). The records of a
// wildcard are found under that literal name; the pipeline matches them
// against query names.
func (s *Source) Wildcards() bool {
	if s.inline != nil && s.inline.ix.wild {
		return true
	}
	return s.data != nil && s.data.Load().ix.wild
}

// Lookup returns every record held at q.Name (a lower-case FQDN): Found
// with the records, Found with none for an empty non-terminal, NotMine for
// an unknown name. PTR names are known only when reverse is on. A hit on
// one data set does not allocate when its records are built ahead (up to
// prebuiltMax pairs); above, its records are made for the answer.
func (s *Source) Lookup(_ context.Context, q *pipeline.Question) pipeline.Result {
	var parts [4][]dns.RR
	found := false
	if s.inline != nil {
		fwd, rev, ok := s.inline.lookup(q.Name, s.reverse)
		parts[0], parts[1] = fwd, rev
		found = ok
	}
	if s.data != nil {
		fwd, rev, ok := s.data.Load().lookup(q.Name, s.reverse)
		parts[2], parts[3] = fwd, rev
		found = found || ok
	}
	if !found {
		return pipeline.Result{Status: pipeline.NotMine}
	}
	if s.zones != nil && (len(parts[1]) > 0 || len(parts[3]) > 0) && !inZones(q.Name, s.rzones) {
		parts[1], parts[3] = s.ptrsWithin(parts[1]), s.ptrsWithin(parts[3])
		if len(parts[0])+len(parts[1])+len(parts[2])+len(parts[3]) == 0 {
			// An address's name: it exists only for its PTRs.
			return pipeline.Result{Status: pipeline.NotMine}
		}
	}
	var rrs []dns.RR
	sets, total := 0, 0
	for _, p := range parts {
		if len(p) > 0 {
			rrs = p
			sets++
			total += len(p)
		}
	}
	if sets > 1 { // rare: the name is in several data sets; the slices are shared, so copy
		rrs = make([]dns.RR, 0, total)
		for _, p := range parts {
			rrs = append(rrs, p...)
		}
	}
	return pipeline.Result{Status: pipeline.Found, RRs: rrs}
}

// ptrsWithin returns the PTR records among rrs whose names lie in
// s.zones: rrs itself when all do (the slices are shared), else a copy
// of the ones that do.
func (s *Source) ptrsWithin(rrs []dns.RR) []dns.RR {
	for i, rr := range rrs {
		if p, ok := rr.(*dns.PTR); ok && !inZones(p.Ptr, s.zones) {
			kept := slices.Clone(rrs[:i])
			for _, rr := range rrs[i+1:] {
				if p, ok := rr.(*dns.PTR); !ok || inZones(p.Ptr, s.zones) {
					kept = append(kept, rr)
				}
			}
			return kept
		}
	}
	return rrs
}

var _ pipeline.Lister = (*Source)(nil)

// List yields every record of the inline entries and the files at names
// in zone (PTR records only when reverse is on), for zone transfers.
func (s *Source) List(zone string, yield func(dns.RR) bool) error {
	if s.zones != nil {
		all := yield
		yield = func(rr dns.RR) bool {
			if p, ok := rr.(*dns.PTR); ok && !inZones(p.Hdr.Name, s.rzones) && !inZones(p.Ptr, s.zones) {
				return true
			}
			return all(rr)
		}
	}
	if s.inline != nil && !s.inline.list(zone, s.reverse, yield) {
		return nil
	}
	if s.data != nil {
		s.data.Load().list(zone, s.reverse, yield)
	}
	return nil
}
