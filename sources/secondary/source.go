package secondary

import (
	"context"
	"errors"
	"fmt"
	"net/netip"

	"github.com/miekg/dns"

	"github.com/dnsd/dnsd/pipeline"
)

// Source answers the zone from a Backend's copy, as a zone file holding
// it would (the file source's index). It implements pipeline.Source.
type Source struct {
	b *Backend
}

var (
	_ pipeline.Source     = (*Source)(nil)
	_ pipeline.Syncer     = (*Source)(nil)
	_ pipeline.Troubled   = (*Source)(nil)
	_ pipeline.Lister     = (*Source)(nil)
	_ pipeline.SOAer      = (*Source)(nil)
	_ pipeline.Wildcarder = (*Source)(nil)
	_ pipeline.Presigned  = (*Source)(nil)
)

// NewSource returns the source over b.
func NewSource(b *Backend) *Source { return &Source{b: b} }

var (
	errNotLoaded = errors.New("no copy of the zone yet")
	// errExpired: the response carries EDE 22, No Reachable Authority.
	errExpired = fmt.Errorf("%w: the zone expired", pipeline.ErrUnreachable)
)

// Lookup implements pipeline.Source: the copy's records; Failed before
// the first copy (EDE 14) and once it expired (EDE 22).
func (s *Source) Lookup(ctx context.Context, q *pipeline.Question) pipeline.Result {
	h := s.b.cur.Load()
	switch {
	case h == nil:
		return pipeline.Result{Status: pipeline.Failed, Err: errNotLoaded}
	case s.b.expired.Load():
		return pipeline.Result{Status: pipeline.Failed, Err: errExpired}
	}
	return h.src.Lookup(ctx, q)
}

// Kind implements pipeline.Source.
func (s *Source) Kind() string { return "secondary" }

// TTL implements pipeline.Source: the SOA minimum of the copy (an hour
// before there is one).
func (s *Source) TTL() uint32 {
	if h := s.b.cur.Load(); h != nil {
		return h.src.TTL()
	}
	return 3600
}

// Serial implements pipeline.Source: rises with every new copy.
func (s *Source) Serial() uint32 {
	if h := s.b.cur.Load(); h != nil {
		return h.serial
	}
	return 0
}

// SOA implements pipeline.SOAer: the primary's SOA, serial included.
func (s *Source) SOA(zone string) (*dns.SOA, bool) {
	if h := s.b.cur.Load(); h != nil {
		return h.src.SOA(zone)
	}
	return nil, false
}

// List implements pipeline.Lister: the copy's records (dnsd re-serves
// the zone to its own secondaries); it fails while there is no copy or
// the copy expired.
func (s *Source) List(zone string, yield func(dns.RR) bool) error {
	h := s.b.cur.Load()
	switch {
	case h == nil:
		return errNotLoaded
	case s.b.expired.Load():
		return errExpired
	}
	return h.src.List(zone, yield)
}

// Wildcards implements pipeline.Wildcarder.
func (s *Source) Wildcards() bool {
	h := s.b.cur.Load()
	return h != nil && h.src.Wildcards()
}

// Presigned implements pipeline.Presigned.
func (s *Source) Presigned(zone string) bool {
	h := s.b.cur.Load()
	return h != nil && h.src.Presigned(zone)
}

// NSEC implements pipeline.Presigned.
func (s *Source) NSEC(zone, name string) []dns.RR {
	if h := s.b.cur.Load(); h != nil {
		return h.src.NSEC(zone, name)
	}
	return nil
}

// NSEC3 implements pipeline.Presigned.
func (s *Source) NSEC3(zone, hash string) []dns.RR {
	if h := s.b.cur.Load(); h != nil {
		return h.src.NSEC3(zone, hash)
	}
	return nil
}

// Synced implements pipeline.Syncer.
func (s *Source) Synced() bool { return s.b.Synced() }

// WaitSynced implements pipeline.Syncer.
func (s *Source) WaitSynced(ctx context.Context) error { return s.b.WaitSynced(ctx) }

// Endpoint implements pipeline.Troubled.
func (s *Source) Endpoint() string { return s.b.Endpoint() }

// Problem implements pipeline.Troubled.
func (s *Source) Problem() string { return s.b.Problem() }

var _ pipeline.NotifyTaker = (*Source)(nil)

// NotifyFrom implements pipeline.NotifyTaker: a NOTIFY for the zone is
// taken from a listed primary's address (any port), signed with the
// source's key when it has one.
func (s *Source) NotifyFrom(zone string, addr netip.Addr) (*pipeline.TSIGKey, bool) {
	c := s.b.cfg
	if zone != c.Zone {
		return nil, false
	}
	addr = addr.Unmap()
	for _, p := range c.Primaries {
		if p.Addr() == addr {
			if c.Key == nil {
				return nil, true
			}
			return &pipeline.TSIGKey{Name: c.Key.Name, Algorithm: c.Key.Algorithm, Secret: c.Key.Secret}, true
		}
	}
	return nil, false
}

// Notify implements pipeline.NotifyTaker: the copy is refreshed now.
func (s *Source) Notify(zone string) {
	if zone == s.b.cfg.Zone {
		s.b.Notify()
	}
}
