package pipeline

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"strings"

	"github.com/miekg/dns"
)

// Zone content: what a transfer of a top-level zone lists between its
// SOAs is what resolution would answer there, listed: every record of
// the zone's local sources in resolution order — a name belongs to the
// first source that knows it (later sources' records at that name are
// left out, as resolution never reaches them), forward sources are never
// listed, names of a more specific configured zone belong to that zone —
// then the apex NS and ns.dns.<zone> addresses the pipeline synthesizes
// when no source has them (ListZone). A reload that leaves a zone's
// content as it was keeps its serial (keepSerial).

// Lister is implemented by local sources that can list their records for
// zone transfers (hosts, etcd, kubernetes, file).
type Lister interface {
	// List calls yield with every record the source holds at names in
	// zone (a lower-case FQDN; the source knows its own zones), wildcard
	// records as they are ("*.x"), until yield returns false. Records are
	// shared and read-only; owners are lower case. List fails when the
	// source cannot answer for its data (not synced yet): a secondary must
	// never receive an empty zone for an unsynced source.
	List(zone string, yield func(dns.RR) bool) error
}

// SOAer is implemented by sources that hold a zone's own SOA record (a
// zone file). The first local source of a zone that returns a SOA for it
// gives the zone's SOA: its name server, mailbox, timers and TTL. Its
// serial as written is the zone's only when that source is the zone's
// only local source and says its serial follows every change of its data
// (a zone file alone: the operator's serial); otherwise the zone's serial
// is dnsd's own, which rises with every change of any of its sources.
type SOAer interface {
	// SOA returns the zone's SOA (zone a lower-case FQDN), or nil when the
	// source has none, and whether the SOA's serial follows every change
	// of the source's data. The record is read-only.
	SOA(zone string) (soa *dns.SOA, ownSerial bool)
}

// ZoneSOA returns the SOA of a top-level zone as transfers and NOTIFY
// carry it, or nil when zone is not one.
func (p *Pipeline) ZoneSOA(zone string) *dns.SOA {
	z := p.table.zones[strings.ToLower(dns.Fqdn(zone))]
	if z == nil {
		return nil
	}
	return z.soa(z.name, z.apexTTL())
}

// ZoneSynced reports whether every source of a top-level zone that syncs
// in the background has synced (false when zone is not one): until then a
// transfer fails, so NOTIFY waits.
func (p *Pipeline) ZoneSynced(zone string) bool {
	z := p.table.zones[strings.ToLower(dns.Fqdn(zone))]
	return z != nil && zoneSynced(z)
}

// ErrNotListable: a local source of the zone cannot list its records.
var ErrNotListable = errors.New("a local source of the zone cannot list its records")

// SerialLess reports a < b in RFC 1982 serial number arithmetic (a and
// b exactly 2^31 apart are not ordered: false).
func SerialLess(a, b uint32) bool {
	return a != b && (a < b && b-a < 1<<31 || a > b && a-b > 1<<31)
}

// apexTTL is the TTL of the zone's SOA and synthesized apex records: the
// first local source's (the one resolution asks first).
func (z *zone) apexTTL() uint32 {
	for i := range z.entries {
		if z.entries[i].local {
			return z.entries[i].src.TTL()
		}
	}
	return z.entries[0].src.TTL()
}

// ownSOA is the SOA of the zone's only local source, when it has one
// whose serial follows its data (SOAer), else nil: the zone's SOA as
// written, serial included.
func (z *zone) ownSOA() *dns.SOA {
	if soa, own := z.heldSOA(); own {
		return soa
	}
	return nil
}

// heldSOA is the SOA held by the first of the zone's local sources that
// has one (SOAer), else nil, and whether it is the zone's SOA as written
// (own: that source is the zone's only local source and says its serial
// follows its data, and the zone is not demoted). When it is not, the
// zone's SOA is this one with dnsd's serial.
func (z *zone) heldSOA() (soa *dns.SOA, own bool) {
	locals := 0
	for i := range z.entries {
		if !z.entries[i].local {
			continue
		}
		locals++
		if soa != nil {
			continue
		}
		if s, ok := z.entries[i].src.(SOAer); ok {
			soa, own = s.SOA(z.name)
		}
	}
	return soa, soa != nil && own && locals == 1 && !z.demoted
}

// ListZone hands emit every record of a top-level zone (a lower-case
// FQDN) that a transfer lists between its SOAs, the source records shared
// and read-only (see walkZone). It fails when a local source cannot list
// its records or answer for them (ErrNotListable, not synced), or zone is
// not a top-level zone.
func (p *Pipeline) ListZone(ctx context.Context, zone string, emit func(dns.RR)) error {
	z := p.table.zones[zone]
	if z == nil {
		return fmt.Errorf("%s: not a top-level zone", zone)
	}
	return p.walkZone(ctx, z, emit)
}

// walkZone hands emit every record of z's local sources as a transfer
// lists them (the first source with a name wins it; sources after one
// without fallthrough are never asked), then the apex NS and ns.dns
// addresses dnsd makes when no source has them.
func (p *Pipeline) walkZone(ctx context.Context, z *zone, emit func(dns.RR)) error {
	ttl := z.apexTTL()
	apexNS, nsAddr := false, false
	// Sources after one without fallthrough are never asked.
	last := len(z.entries) - 1
	for i := range z.entries {
		if !z.entries[i].fallsThrough {
			last = i
			break
		}
	}
	q := &Question{Zone: z.name, Type: dns.TypeANY}
	for i := 0; i <= last; i++ {
		e := &z.entries[i]
		if !e.local {
			continue
		}
		l, ok := e.src.(Lister)
		if !ok {
			return fmt.Errorf("%s source: %w", e.kind, ErrNotListable)
		}
		// shadowed caches, per owner, whether an earlier source answers
		// it; the first source's names are never shadowed.
		var shadowed map[string]bool
		if i > 0 {
			shadowed = map[string]bool{}
		}
		var lerr error
		err := l.List(z.name, func(rr dns.RR) bool {
			h := rr.Header()
			owner := h.Name
			if h.Rrtype == dns.TypeSOA || !InZone(owner, z.name) || p.table.match(owner) != z {
				return true
			}
			if shadowed != nil {
				sh, known := shadowed[owner]
				if !known {
					sh, lerr = z.answeredBefore(ctx, q, i, owner)
					if lerr != nil {
						return false
					}
					shadowed[owner] = sh
				}
				if sh {
					return true
				}
			}
			switch {
			case owner == z.name && h.Rrtype == dns.TypeNS:
				apexNS = true
			case owner == z.nsName:
				nsAddr = true
			}
			emit(rr)
			return true
		})
		if err == nil {
			err = lerr
		}
		if err != nil {
			return fmt.Errorf("listing the %s source: %w", e.kind, err)
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	if !apexNS {
		emit(z.ns(z.name, ttl))
		if !nsAddr {
			for _, rr := range p.nsAddrRRs(z.nsName, ttl) {
				emit(rr)
			}
		}
	}
	return nil
}

// answeredBefore reports whether resolution of name stops before entry i:
// a local source before it holds records there, or one holds name as an
// empty non-terminal and a forward source lies between (an empty
// non-terminal does not stop the local sources, only forwarding).
func (z *zone) answeredBefore(ctx context.Context, q *Question, i int, name string) (bool, error) {
	q.Name = name
	ent := false
	for j := 0; j < i; j++ {
		e := &z.entries[j]
		if !e.local {
			if ent {
				return true, nil
			}
			continue
		}
		switch res := e.src.Lookup(ctx, q); res.Status {
		case Found:
			if len(res.RRs) > 0 {
				return true, nil
			}
			ent = true
		case Answered:
			return true, nil
		case Failed:
			err := res.Err
			if err == nil {
				err = errNoReason
			}
			return false, fmt.Errorf("%s source: %w", e.kind, err)
		}
	}
	return false, nil
}

// keepSerial pins z, a zone whose SOA dnsd makes, to the serial was
// that its predecessor oz served, when a reload leaves the zone's content
// as it was: a reload that changes nothing costs no secondary a NOTIFY
// and a transfer. The content compared is what a transfer listing is
// made from (SOA fields but the serial, every record with its TTL, in
// any order),
// read from both generations now; a zone not synced on either side, one
// with a source that cannot list its records, or whose sources change
// meanwhile, is not pinned (its serial rises, as for any change). Once a
// source's data changes the zone's serial moves on, above was
// (carrySerials' offset).
func (p *Pipeline) keepSerial(z, oz *zone, was uint32) {
	if !zoneSynced(z) || !zoneSynced(oz) {
		return
	}
	at := z.sourcesSerial()
	ctx := context.Background()
	before := contentDigest{seeds: p.seeds}
	if oz.digest != nil && oz.digest.at == oz.sourcesSerial() {
		before = oz.digest.d // its data has not changed since
	} else if err := oz.gen.digest(ctx, oz, &before); err != nil {
		return
	}
	after := contentDigest{seeds: p.seeds}
	if err := p.digest(ctx, z, &after); err != nil {
		return
	}
	if z.sourcesSerial() != at {
		return
	}
	after.buf = nil
	z.digest = &heldDigest{at: at, d: after} // the next reload compares with it
	if before.n != after.n || before.sum != after.sum {
		return
	}
	z.pinned, z.pinAt, z.pinSerial = true, at, was
}

// KeptSerial reports whether a top-level zone kept its predecessor's
// serial across the reload that built p because its content was as it
// was, and that serial: the same version, so what was made of it (a
// transfer listing) may carry over.
func (p *Pipeline) KeptSerial(zone string) (serial uint32, ok bool) {
	z := p.table.zones[strings.ToLower(dns.Fqdn(zone))]
	if z == nil || !z.pinned {
		return 0, false
	}
	return z.pinSerial, true
}

// digest adds z's SOA (but its serial) and every record a transfer
// listing is made from to d, without holding them.
func (p *Pipeline) digest(ctx context.Context, z *zone, d *contentDigest) error {
	soa := *z.soa(z.name, z.apexTTL())
	soa.Serial = 0
	d.add(&soa)
	return p.walkZone(ctx, z, d.add)
}

// heldDigest is a zone's content digest while its sources' serial is at.
type heldDigest struct {
	at uint32
	d  contentDigest
}

// contentDigest identifies a set of records, in any order: the sum of
// each record's two 64-bit hashes (of its wire form, TTL included, with
// the two seeds that every generation of a process shares), lane by lane.
type contentDigest struct {
	n     int
	sum   [2]uint64
	seeds *[2]maphash.Seed
	buf   []byte    // reused for each record's wire form
	msg   dns.Msg   // packs one record: dns.PackRR would write its Rdlength,
	one   [1]dns.RR // and the records are the sources', read concurrently
}

func (d *contentDigest) add(rr dns.RR) {
	if d.buf == nil {
		d.buf = make([]byte, dns.MaxMsgSize+1) // PackBuffer's largest need
	}
	d.one[0] = rr
	d.msg.Answer = d.one[:]
	b, err := d.msg.PackBuffer(d.buf)
	d.one[0] = nil
	if err != nil {
		// Unpackable (cannot be in a listing that is sent): count its
		// text, so that it still tells versions apart.
		b = []byte(rr.String())
	}
	d.n++
	for i := range d.sum {
		d.sum[i] += maphash.Bytes(d.seeds[i], b)
	}
}

// zoneSynced reports whether every source of z has synced.
func zoneSynced(z *zone) bool {
	for i := range z.entries {
		if sy, ok := z.entries[i].src.(Syncer); ok && !sy.Synced() {
			return false
		}
	}
	return true
}

// Serials returns the serial every zone of p has now, top-level zones
// and views' own: what a restart must not go below (Options.Floors).
func (p *Pipeline) Serials() map[ZoneKey]uint32 {
	out := make(map[ZoneKey]uint32, len(p.table.zones))
	for name, z := range p.table.zones {
		out[ZoneKey{Zone: name}] = z.serial()
	}
	if p.views != nil {
		for _, v := range p.views.list {
			for name, z := range v.table.zones {
				out[ZoneKey{View: v.name, Zone: name}] = z.serial()
			}
		}
	}
	return out
}
