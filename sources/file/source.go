package file

import (
	"context"
	"strings"

	"github.com/miekg/dns"

	"github.com/dnsd/dnsd/pipeline"
)

// Source answers one zone key from a Backend. It implements
// pipeline.Source.
type Source struct {
	b *Backend
}

var (
	_ pipeline.Source     = (*Source)(nil)
	_ pipeline.Wildcarder = (*Source)(nil)
	_ pipeline.Presigned  = (*Source)(nil)
)

// NewSource returns the source over b.
func NewSource(b *Backend) *Source { return &Source{b: b} }

// Lookup implements pipeline.Source: every record at the name, an empty
// Found for an empty non-terminal, else NotMine.
func (s *Source) Lookup(_ context.Context, q *pipeline.Question) pipeline.Result {
	z := s.b.snapshot().z
	if z.referrals != nil {
		if m := z.referral(q.Name, q.Type); m != nil {
			return pipeline.Result{Status: pipeline.Answered, Msg: m}
		}
	}
	if rrs, ok := z.names[q.Name]; ok {
		return pipeline.Result{Status: pipeline.Found, RRs: rrs}
	}
	if z.ents[q.Name] {
		return pipeline.Result{Status: pipeline.Found}
	}
	return pipeline.Result{Status: pipeline.NotMine}
}

// Kind implements pipeline.Source.
func (s *Source) Kind() string { return "file" }

// TTL implements pipeline.Source: the SOA minimum of the file when it has
// a SOA, else its $TTL (the first), else the default TTL.
func (s *Source) TTL() uint32 {
	z := s.b.snapshot().z
	if z.soa != nil {
		return min(z.soa.Minttl, z.soa.Hdr.Ttl)
	}
	return z.ttl
}

// Serial implements pipeline.Source: rises with every change of the zone.
func (s *Source) Serial() uint32 { return s.b.snapshot().serial }

// SOA returns the file's SOA at zone's apex, or nil when the file has
// none there (pipeline.SOAer): it is the zone's SOA. Its serial follows
// the source's data only without inline records beside the file: those
// change with dnsd.yaml, where the file's serial cannot follow them, so
// such a zone takes dnsd's own serial, which rises with them.
func (s *Source) SOA(zone string) (*dns.SOA, bool) {
	soa := s.b.snapshot().z.soas[zone]
	return soa, soa != nil && (s.b.cfg.Path == "" || len(s.b.cfg.Records) == 0)
}

// List calls yield with every record at names in zone, wildcards as they
// are, until yield returns false (zone transfers, pipeline.Lister). A file
// source is never unsynced: List does not fail.
func (s *Source) List(zone string, yield func(dns.RR) bool) error {
	z := s.b.snapshot().z
	for _, name := range z.order {
		if !pipeline.InZone(name, zone) {
			continue
		}
		for _, rr := range z.names[name] {
			if !yield(rr) {
				return nil
			}
		}
	}
	return nil
}

// Wildcards implements pipeline.Wildcarder.
func (s *Source) Wildcards() bool { return s.b.snapshot().z.wildcards }

// Presigned implements pipeline.Presigned: the file holds a DNSKEY at
// zone's apex.
func (s *Source) Presigned(zone string) bool {
	d := s.b.snapshot().z.denials[zone]
	return d != nil && d.signed
}

// NSEC implements pipeline.Presigned.
func (s *Source) NSEC(zone, name string) []dns.RR {
	z := s.b.snapshot().z
	d := z.denials[zone]
	if d == nil {
		return nil
	}
	i := before(d.nsec, name, pipeline.CanonicalCompare)
	if i < 0 {
		return nil
	}
	return z.names[d.nsec[i]]
}

// NSEC3 implements pipeline.Presigned.
func (s *Source) NSEC3(zone, hash string) []dns.RR {
	z := s.b.snapshot().z
	d := z.denials[zone]
	if d == nil {
		return nil
	}
	i := before(d.nsec3, hash, strings.Compare)
	if i < 0 {
		return nil
	}
	return z.names[d.owner3[i]]
}
