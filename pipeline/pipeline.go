package pipeline

import (
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"net/netip"
	"reflect"
	"strings"
	"sync/atomic"

	"github.com/miekg/dns"
)

// Synthesized SOA timers, in the ranges RFC 1912 §2.2 recommends (and
// zone checkers expect) for secondaries that copy the zone by transfer.
const (
	soaRefresh = 14400   // 4h
	soaRetry   = 3600    // 1h
	soaExpire  = 1209600 // 2 weeks
)

// MaxCNAMELinks is the number of CNAME records the pipeline follows for one
// query. A longer chain, or a loop, ends the chase: the client gets the
// chain collected so far with NOERROR (what common recursive resolvers do),
// never SERVFAIL.
const MaxCNAMELinks = 8

// SourceEntry is one source of a zone, in order.
type SourceEntry struct {
	Source Source // required, never nil
	// Fallthrough: when the source does not know a name, ask the next one.
	// Default false: the zone answers NXDOMAIN.
	Fallthrough bool
}

// ZoneSpec declares zones sharing one ordered source list. Each name is
// its own zone (own apex, own SOA).
type ZoneSpec struct {
	Names   []string      // FQDNs, "." = root; normalised to lower case; required (none is an error)
	Sources []SourceEntry // in order; required (none is an error)
}

// Options are the pipeline's dependencies.
type Options struct {
	// NSAddrs are the addresses of the synthesized ns.dns.<zone> (the
	// non-wildcard listen addresses); used when no source knows that name.
	// None: ns.dns.<zone> has no address records.
	NSAddrs []netip.Addr
	// Logger receives source failures at debug level. Nil discards.
	Logger *slog.Logger
	// Views are the split-horizon views, checked in order (see ViewSpec).
	// None: every client gets the top-level zones.
	Views []ViewSpec
	// Serial is the generation's serial (from the process's SerialClock,
	// taken when the pipeline is built): every zone's synthesized SOA
	// serial is at least this, so a reload that changes a zone without
	// changing any source's data (a source removed or reordered, a ttl)
	// still raises its serial. 0: none.
	Serial uint32
	// Prev is the pipeline this one replaces (a reload), nil at the
	// start. A zone whose SOA dnsd makes never gets a serial below the
	// one it had there (see carrySerials).
	Prev *Pipeline
	// Floors are the last serials the zones were served with, as far as
	// dnsd remembers (an earlier process's, kept in state_dir; see
	// Serials): a zone's serial is never below its floor in RFC 1982
	// terms. It is the floor itself when it comes out the same, else at
	// least one above (see raiseSerials). nil: none.
	Floors map[ZoneKey]uint32
}

// ZoneKey names one zone of a pipeline: a top-level zone (View "") or
// one of a view's own zones. Zone is a lower-case FQDN.
type ZoneKey struct {
	View string // the view's name; "" for a top-level zone
	Zone string // never empty
}

// Pipeline is a compiled, immutable zone table (and one per view). It is
// safe for concurrent use. The *Question handed to a source is only valid
// during Lookup.
type Pipeline struct {
	table          // the default view: the top-level zones
	views   *views // nil without views
	sources []Source
	nsAddrs []netip.Addr
	log     *slog.Logger
	serial  uint32 // Options.Serial
	// seeds hash zone contents (contentDigest): made at the first
	// generation, passed from each generation to the next.
	seeds *[2]maphash.Seed
}

// table is one view's zones.
type table struct {
	zones map[string]*zone
	root  *zone // the "." zone, nil if not configured
}

type zone struct {
	name    string // lower case FQDN
	nsName  string // ns.dns.<zone>
	nsUp    string // dns.<zone>: exists as an empty non-terminal above nsName
	mbox    string // hostmaster.<zone>
	entries []entry
	built   uint32 // the generation's serial: the least serial of the zone
	// offset is added to the sources' serial in the SOA dnsd makes, so
	// that it never goes below what the zone served before (a zone whose
	// zone file's date serial was above the clock gets a source more).
	offset uint32
	gen    *Pipeline
	// neg is the last SOA made for a negative answer's authority section,
	// reused while it is still the one authSOA would make.
	neg atomic.Pointer[negSOA]
	// demoted: the zone's only local source holds its own SOA, but its
	// serial is below one the zone served before (a reload or an earlier
	// process): dnsd serves that SOA with its own serial, above the one
	// served, for this generation (see raiseSerials).
	demoted bool
	// pinned: a reload found the zone's data as it was, so it keeps the
	// serial it had (pinSerial) for as long as its sources' serial stays
	// pinAt (see keepSerial).
	pinned           bool
	pinAt, pinSerial uint32
	// digest is the zone's content when its generation was built (nil:
	// not computed), for the next reload's comparison.
	digest *heldDigest
	// signer is the zone's only local source when it is Presigned (it
	// may hold the zone signed, dnssec.go); nil otherwise.
	signer *entry
}

// negSOA is a SOA record made by authSOA and what it was made from.
type negSOA struct {
	held *dns.SOA // the source's SOA it copies (heldSOA); nil: synthesized
	own  bool     // held's serial as written; else dnsd's serial
	ttl  uint32   // the ttl asked for (held nil)
	soa  *dns.SOA
}

type entry struct {
	src          Source
	kind         string
	fallsThrough bool
	local        bool // not Remote: may be asked for additional records
	// wild is the source as a Wildcarder, when it is local and implements
	// it; nil otherwise.
	wild Wildcarder
	// keep is the source as a Keeper, when it is a forward source that
	// implements it; nil otherwise.
	keep Keeper
	// pre is the source as Presigned, when it is local and implements
	// it; nil otherwise.
	pre Presigned
}

// New compiles zones into a Pipeline. Zone names are case-insensitive and
// a trailing dot is optional; a name declared twice, an empty name list,
// an empty source list or a nil source is an error.
func New(zones []ZoneSpec, opts Options) (*Pipeline, error) {
	p := &Pipeline{
		nsAddrs: append([]netip.Addr(nil), opts.NSAddrs...),
		log:     opts.Logger,
		serial:  opts.Serial,
	}
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	seen := make(map[any]struct{})
	t, errs := p.compile(zones, seen)
	p.table = t
	if len(opts.Views) > 0 {
		vs, verrs := p.compileViews(opts.Views, seen)
		p.views = vs
		errs = append(errs, verrs...)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if prev := opts.Prev; prev != nil {
		p.seeds = prev.seeds
	} else {
		p.seeds = &[2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()}
	}
	if prev := opts.Prev; prev != nil {
		p.carrySerials("", &p.table, &prev.table)
		if p.views != nil && prev.views != nil {
			for _, v := range p.views.list {
				for _, pv := range prev.views.list {
					if pv.name == v.name {
						p.carrySerials(v.name, &v.table, &pv.table)
					}
				}
			}
		}
	}
	p.raiseSerials("", &p.table, opts.Floors)
	if p.views != nil {
		for _, v := range p.views.list {
			p.raiseSerials(v.name, &v.table, opts.Floors)
		}
	}
	return p, nil
}

// raiseSerials keeps the serials of t's zones (view's) above what they
// must be above, in RFC 1982 terms: a serial dnsd makes for a zone whose
// zone file has a SOA is above that SOA's serial (secondaries may hold
// the zone file's version, served while it was the zone's only source),
// and every zone's serial is at least its floor (the last one served
// before a restart), one above it unless it is the floor itself. A zone
// file's own serial below its floor is not served: the zone gets dnsd's
// serial, above the floor, for this generation (demoted).
func (p *Pipeline) raiseSerials(view string, t *table, floors map[ZoneKey]uint32) {
	for name, z := range t.zones {
		held, own := z.heldSOA()
		if held != nil && !own {
			z.above(held.Serial)
		}
		floor, ok := floors[ZoneKey{view, name}]
		if !ok {
			continue
		}
		if own {
			if SerialLess(held.Serial, floor) {
				p.log.Warn("zone serial below the one served before: its zone file's SOA has a lower serial; dnsd serves the zone with its own serial above it until a reload or restart finds the file's serial higher",
					"zone", name, "view", view, "served", floor, "file", held.Serial)
				z.demote(floor)
			}
			continue
		}
		if SerialLess(z.serial(), floor) {
			z.above(floor)
		}
	}
}

// above raises z's made serial above x (RFC 1982), when it is not: its
// offset grows, and a serial kept across a reload (pinned) not above x is
// let go.
func (z *zone) above(x uint32) {
	if z.pinned {
		if SerialLess(x, z.pinSerial) {
			return
		}
		z.pinned = false
	}
	if s := z.madeSerial(); !SerialLess(x, s) {
		z.offset += x + 1 - s
	}
}

// demote makes z, whose only local source holds its own SOA, serve that
// SOA with dnsd's serial, above was (the serial it served before).
func (z *zone) demote(was uint32) {
	z.demoted, z.pinned = true, false
	z.above(was)
}

// carrySerials keeps serials from going back across a reload (RFC 1982
// order: secondaries ignore a lower one): a zone whose SOA dnsd makes
// keeps the offset it had, and when its serial would still not be above
// the one it had, it starts one above it (its zone file's SOA had a date
// serial ahead of the clock, and another source joined it). A zone file's
// own SOA whose serial went back below the one served is logged, and the
// zone gets dnsd's serial above that one (demote).
func (p *Pipeline) carrySerials(view string, t, old *table) {
	for name, z := range t.zones {
		oz := old.zones[name]
		if oz == nil {
			continue
		}
		was := oz.serial()
		if z.ownSOA() != nil {
			if now := z.serial(); SerialLess(now, was) {
				p.log.Warn("zone serial below the one served before: its zone file's SOA has a lower serial; dnsd serves the zone with its own serial above it until a reload or restart finds the file's serial higher",
					"zone", name, "view", view, "served", was, "file", now)
				if oz.ownSOA() == nil {
					z.offset = oz.offset
				}
				z.demote(was)
			}
			continue
		}
		if oz.ownSOA() == nil {
			z.offset = oz.offset
		}
		if now := z.serial(); !SerialLess(was, now) {
			z.offset += was + 1 - now
		}
		p.keepSerial(z, oz, was)
	}
}

// compile builds one view's zone table, recording its sources in p.
func (p *Pipeline) compile(zones []ZoneSpec, seen map[any]struct{}) (table, []error) {
	t := table{zones: make(map[string]*zone)}
	var errs []error
	for i, spec := range zones {
		if len(spec.Names) == 0 {
			errs = append(errs, fmt.Errorf("pipeline: zone spec %d: no zone name", i))
			continue
		}
		if len(spec.Sources) == 0 {
			errs = append(errs, fmt.Errorf("pipeline: zone %q: empty source list", spec.Names[0]))
			continue
		}
		entries := make([]entry, 0, len(spec.Sources))
		bad := false
		for j, se := range spec.Sources {
			if se.Source == nil {
				errs = append(errs, fmt.Errorf("pipeline: zone %q: source %d is nil", spec.Names[0], j))
				bad = true
				continue
			}
			r, remote := se.Source.(Remote)
			e := entry{src: se.Source, kind: se.Source.Kind(), fallsThrough: se.Fallthrough, local: !remote || !r.Remote()}
			if w, ok := se.Source.(Wildcarder); ok && e.local {
				e.wild = w
			}
			if k, ok := se.Source.(Keeper); ok && !e.local {
				e.keep = k
			}
			if ps, ok := se.Source.(Presigned); ok && e.local {
				e.pre = ps
			}
			entries = append(entries, e)
			p.addSource(se.Source, seen)
		}
		if bad {
			continue
		}
		for _, n := range spec.Names {
			name := strings.ToLower(strings.TrimSpace(n))
			if name != "" {
				name = dns.Fqdn(name)
			}
			if _, ok := dns.IsDomainName(name); !ok || name == "" {
				errs = append(errs, fmt.Errorf("pipeline: zone %q: not a domain name", n))
				continue
			}
			if _, dup := t.zones[name]; dup {
				errs = append(errs, fmt.Errorf("pipeline: zone %q declared twice", name))
				continue
			}
			z := &zone{name: name, nsName: "ns.dns." + name, nsUp: "dns." + name, mbox: "hostmaster." + name, entries: entries, built: p.serial, gen: p,
				signer: signerOf(entries)}
			if name == "." {
				z.nsName, z.nsUp, z.mbox = "ns.dns.", "dns.", "hostmaster."
				t.root = z
			}
			t.zones[name] = z
		}
	}
	return t, errs
}

// addSource records s once in p.sources. Sources of a comparable dynamic
// type (pointers, the normal case) are deduplicated.
func (p *Pipeline) addSource(s Source, seen map[any]struct{}) {
	if reflect.TypeOf(s).Comparable() {
		if _, ok := seen[s]; ok {
			return
		}
		seen[s] = struct{}{}
	}
	p.sources = append(p.sources, s)
}

// Sources returns every distinct source of the pipeline, in configuration
// order (for readiness and sync checks). The slice is a copy.
func (p *Pipeline) Sources() []Source {
	return append([]Source(nil), p.sources...)
}

// Match returns the longest configured zone that is a suffix of name (a
// lower case FQDN). It does not allocate.
func (p *Pipeline) Match(name string) (zone string, ok bool) {
	if z := p.match(name); z != nil {
		return z.name, true
	}
	return "", false
}

// match walks name's labels from the full name down, looking each suffix
// up in the zone map (substrings of name: no allocation).
func (t *table) match(name string) *zone {
	for off := 0; off < len(name); {
		if z, ok := t.zones[name[off:]]; ok {
			return z
		}
		i := off
		for ; i < len(name); i++ {
			if name[i] == '\\' { // escaped character, e.g. "a\.b"
				i++
				continue
			}
			if name[i] == '.' {
				break
			}
		}
		off = i + 1
	}
	return t.root
}

// serial is the zone's SOA serial: the largest of its sources' serials and
// the generation's, so it never goes backwards while each source's does
// not, and it rises with every change of any source (they all draw from
// one SerialClock) and with every reload. A zone whose only local source
// holds its own SOA (SOAer) has that SOA's serial.
func (z *zone) serial() uint32 {
	if own := z.ownSOA(); own != nil {
		return own.Serial
	}
	return z.madeSerial()
}

// madeSerial is the serial of the SOA dnsd makes for z: its sources'
// serial, carried above what it served before (offset).
func (z *zone) madeSerial() uint32 {
	s := z.sourcesSerial()
	if z.pinned && s == z.pinAt {
		return z.pinSerial
	}
	return s + z.offset
}

// sourcesSerial is the serial of a zone without a source's own SOA: the
// largest of its sources' serials and the generation's.
func (z *zone) sourcesSerial() uint32 {
	s := z.built
	for i := range z.entries {
		if v := z.entries[i].src.Serial(); v > s {
			s = v
		}
	}
	return s
}

// soa is the zone's SOA owned by owner: the only local source's own SOA
// when it has one (SOAer), else a local source's SOA with dnsd's serial
// (a zone file beside other sources or inline records), else synthesized
// with ttl as TTL and minimum.
func (z *zone) soa(owner string, ttl uint32) *dns.SOA {
	if held, own := z.heldSOA(); held != nil {
		c := *held
		c.Hdr.Name = owner
		if !own {
			c.Serial = z.madeSerial()
		}
		return &c
	}
	return &dns.SOA{
		Hdr:     dns.RR_Header{Name: owner, Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: ttl},
		Ns:      z.nsName,
		Mbox:    z.mbox,
		Serial:  z.serial(),
		Refresh: soaRefresh,
		Retry:   soaRetry,
		Expire:  soaExpire,
		Minttl:  ttl,
	}
}

// authSOA is soa(z.name, ttl), the record of a negative answer's
// authority section. It is made once and shared while the zone's serial,
// ttl and the source's own SOA stay the same (records in answers are never
// written), so a negative answer allocates no record.
func (z *zone) authSOA(ttl uint32) *dns.SOA {
	c := z.neg.Load()
	held, own := z.heldSOA()
	switch {
	case c == nil || c.held != held || c.own != own:
	case own:
		return c.soa
	case (held != nil || c.ttl == ttl) && c.soa.Serial == z.madeSerial():
		return c.soa
	}
	c = &negSOA{held: held, own: own, ttl: ttl, soa: z.soa(z.name, ttl)}
	if held != nil {
		// RFC 2308 section 3: a negative answer's SOA lives no longer
		// than the SOA's minimum field says negative answers may.
		c.soa.Hdr.Ttl = min(c.soa.Hdr.Ttl, c.soa.Minttl)
	}
	z.neg.Store(c)
	return c.soa
}

func (z *zone) ns(owner string, ttl uint32) *dns.NS {
	return &dns.NS{
		Hdr: dns.RR_Header{Name: owner, Rrtype: dns.TypeNS, Class: dns.ClassINET, Ttl: ttl},
		Ns:  z.nsName,
	}
}

// nsAddrRRs synthesizes the A and AAAA records of ns.dns.<zone>.
func (p *Pipeline) nsAddrRRs(owner string, ttl uint32) []dns.RR {
	rrs := make([]dns.RR, 0, len(p.nsAddrs))
	for _, a := range p.nsAddrs {
		a = a.Unmap()
		if a.Is4() {
			ip := a.As4()
			rrs = append(rrs, &dns.A{Hdr: dns.RR_Header{Name: owner, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: ttl}, A: ip[:]})
		} else if a.Is6() {
			ip := a.As16()
			rrs = append(rrs, &dns.AAAA{Hdr: dns.RR_Header{Name: owner, Rrtype: dns.TypeAAAA, Class: dns.ClassINET, Ttl: ttl}, AAAA: ip[:]})
		}
	}
	return rrs
}
