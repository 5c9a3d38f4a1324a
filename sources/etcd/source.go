package etcd

import (
	"context"
	"strings"
	"time"

	"github.com/miekg/dns"

	"github.com/dnsd/dnsd/pipeline"
)

// Source is one zone's view of a shared Backend. It implements
// pipeline.Source and pipeline.Syncer.
type Source struct {
	b     *Backend // nil: a placeholder that is never asked (dnsd check)
	v     *view    // the index of the source's default TTL
	ttl   uint32
	apex  map[string]apexNames
	fixed uint32 // serial of a placeholder
}

// apexNames are the SkyDNS names that hold a zone apex's records.
type apexNames struct {
	apex string // apex.dns.<zone>: records of the apex itself
	ns   string // ns.dns.<zone>: name servers
}

var (
	_ pipeline.Source = (*Source)(nil)
	_ pipeline.Syncer = (*Source)(nil)
)

// NewSource returns zone names' view of b with the records of b's own
// default TTL; ttl is the TTL of negative answers (the source's
// configured ttl). The Source does not own b. b nil gives a placeholder.
func NewSource(b *Backend, zones []string, ttl time.Duration) *Source {
	s := newSource(zones, ttl)
	if b != nil {
		s.b, s.v = b, b.defaultView()
	}
	return s
}

// NewViewSource returns zone names' view of v (its records carry v's
// default TTL); ttl is the TTL of negative answers. The Source does not
// own v.
func NewViewSource(v *View, zones []string, ttl time.Duration) *Source {
	s := newSource(zones, ttl)
	s.b, s.v = v.b, v.vw
	return s
}

func newSource(zones []string, ttl time.Duration) *Source {
	s := &Source{ttl: pipeline.TTLSeconds(ttl), apex: make(map[string]apexNames, len(zones)), fixed: uint32(time.Now().Unix())}
	for _, z := range zones {
		z = strings.ToLower(dns.Fqdn(z))
		if z == "." {
			s.apex[z] = apexNames{apex: "apex.dns.", ns: "ns.dns."}
			continue
		}
		s.apex[z] = apexNames{apex: "apex.dns." + z, ns: "ns.dns." + z}
	}
	return s
}

// Kind is "etcd".
func (s *Source) Kind() string { return "etcd" }

// TTL is the source's TTL in seconds.
func (s *Source) TTL() uint32 { return s.ttl }

// Serial is the backend's serial.
func (s *Source) Serial() uint32 {
	if s.b == nil {
		return s.fixed
	}
	return s.b.Serial()
}

// Synced reports whether the source holds what etcd holds: the backend
// has finished its first sync and is not reading the prefix again (after
// etcd came back as another, or a compacted watch). While it reads again,
// the source answers from the data it had, and /ready says why.
func (s *Source) Synced() bool { return s.b != nil && s.b.Synced() && s.b.Rereading() == "" }

// Endpoint names the etcd cluster behind the source (never credentials).
func (s *Source) Endpoint() string {
	if s.b == nil {
		return ""
	}
	return s.b.Endpoint()
}

// Problem is why the backend cannot use etcd right now, "" when it can.
func (s *Source) Problem() string {
	if s.b == nil {
		return ""
	}
	return s.b.Problem()
}

// WaitSynced blocks until the backend has synced or ctx ends.
func (s *Source) WaitSynced(ctx context.Context) error {
	if s.b == nil {
		<-ctx.Done()
		return ctx.Err()
	}
	return s.b.WaitSynced(ctx)
}

// Lookup answers from the backend's index: Failed until the first sync;
// then Found with every record at q.Name (Found with none for an empty
// non-terminal), or NotMine. A hit on a name without children records
// does not allocate.
func (s *Source) Lookup(_ context.Context, q *pipeline.Question) pipeline.Result {
	if s.b == nil || !s.b.Synced() {
		return pipeline.Result{Status: pipeline.Failed, Err: errNotSynced}
	}
	if q.Name == q.Zone {
		return s.apexLookup(q.Name)
	}
	rrs, ok := lookupIn(s.v.ix.Load(), q.Name, q.Zone)
	if !ok {
		return pipeline.Result{Status: pipeline.NotMine}
	}
	return pipeline.Result{Status: pipeline.Found, RRs: rrs}
}

// apexLookup answers a zone apex: the records of keys naming the apex
// itself, those at apex.dns.<zone> (CoreDNS's convention for several apex
// records), and NS records for the names below ns.dns.<zone> that have an
// address. Children of the apex do not count (they are the zone's names,
// not records of the apex).
func (s *Source) apexLookup(zone string) pipeline.Result {
	ix := s.v.ix.Load()
	n := ix.lookup(zone)
	if n == nil {
		return pipeline.Result{Status: pipeline.NotMine}
	}
	own := n.ownRecords()
	extra := s.apexExtra(ix, zone)
	if len(extra) == 0 {
		return pipeline.Result{Status: pipeline.Found, RRs: own}
	}
	rrs := make([]dns.RR, 0, len(own)+len(extra))
	rrs = append(append(rrs, own...), extra...)
	return pipeline.Result{Status: pipeline.Found, RRs: rrs}
}

// apexExtra are the records of zone's apex that keys naming it do not
// give: those of apex.dns.<zone> and the NS records of ns.dns.<zone>.
func (s *Source) apexExtra(ix *index, zone string) []dns.RR {
	an, known := s.apex[zone]
	if !known {
		an = apexNames{apex: "apex.dns." + zone, ns: "ns.dns." + zone}
	}
	var extra []dns.RR
	if a := ix.lookup(an.apex); a != nil {
		extra = append(extra, a.records()...)
	}
	if ns := ix.lookup(an.ns); ns != nil {
		extra = append(extra, nameServers(zone, ns)...)
	}
	return extra
}

var _ pipeline.Lister = (*Source)(nil)

// List yields, for zone transfers, the answer of every name of the index
// in zone — what Lookup gives for it: a name's own records and its
// children's (SkyDNS), the apex's from apex.dns and ns.dns — owned by that
// name. It fails until the first sync.
func (s *Source) List(zone string, yield func(dns.RR) bool) error {
	if s.b == nil || !s.b.Synced() {
		return errNotSynced
	}
	emit := func(name string, rrs []dns.RR) bool {
		for _, rr := range rrs {
			if rr.Header().Name != name {
				rr = dns.Copy(rr)
				rr.Header().Name = name
			}
			if !yield(rr) {
				return false
			}
		}
		return true
	}
	if res := s.apexLookup(zone); res.Status == pipeline.Found && !emit(zone, res.RRs) {
		return nil
	}
	s.v.ix.Load().names.each(func(name string, n *node) bool {
		if name == zone || !pipeline.InZone(name, zone) {
			return true
		}
		return emit(name, n.records())
	})
	return nil
}
