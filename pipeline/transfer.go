package pipeline

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"sync"

	"github.com/miekg/dns"
)

// Zone transfers (AXFR, IXFR). A transferred zone's content is what
// resolution would answer, listed: the zone's SOA, then every record of
// its local sources in resolution order — a name belongs to the first
// source that knows it (later sources' records at that name are left
// out, as resolution never reaches them), forward sources are never
// listed, names of a more specific configured zone belong to that zone —
// the apex NS and ns.dns.<zone> addresses the pipeline synthesizes when
// no source has them, and the SOA again. Who may transfer which zone is
// part of the generation (Options.Transfers), swapped with it on reload.

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

// TSIGKey is a transfer item's TSIG key (RFC 8945), in miekg/dns's terms.
type TSIGKey struct {
	Name      string // lower-case FQDN
	Algorithm string // "hmac-sha256." ...
	Secret    string // base64; never logged
}

// String names the key without its secret.
func (k *TSIGKey) String() string { return k.Name + " (" + k.Algorithm + ")" }

// TransferSpec says who may transfer some zones and whom to notify.
type TransferSpec struct {
	Zones  []string       // top-level zone names (FQDNs)
	Allow  []netip.Prefix // clients that may transfer
	Key    *TSIGKey       // nil: unsigned transfers
	Notify []string       // ip:port of secondaries to NOTIFY
	// NotifyFrom are the addresses NOTIFYs may leave from: a target gets
	// the first of its family (none: the system's choice).
	NotifyFrom []netip.Addr
}

func (p *Pipeline) compileTransfers(specs []TransferSpec) []error {
	var errs []error
	p.xfr = make(map[string]*TransferSpec)
	for i := range specs {
		spec := specs[i]
		spec.Zones = nil
		p.xfrSpecs = append(p.xfrSpecs, &spec)
		for _, n := range specs[i].Zones {
			name := strings.ToLower(dns.Fqdn(n))
			if p.table.zones[name] == nil {
				errs = append(errs, fmt.Errorf("pipeline: transfer of %q: not a top-level zone", n))
				continue
			}
			if p.xfr[name] != nil {
				errs = append(errs, fmt.Errorf("pipeline: zone %q transferred twice", name))
				continue
			}
			spec.Zones = append(spec.Zones, name)
			p.xfr[name] = &spec
		}
	}
	return errs
}

// Transfers returns the transfer specs (zone names normalised), in order.
func (p *Pipeline) Transfers() []TransferSpec {
	out := make([]TransferSpec, 0, len(p.xfrSpecs))
	for _, s := range p.xfrSpecs {
		out = append(out, *s)
	}
	return out
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

// TransferRequest is an AXFR or IXFR query as the server received it.
type TransferRequest struct {
	Msg    *dns.Msg // parsed: one question, AXFR or IXFR (IXFR: the client's SOA in Ns)
	Wire   []byte   // the message as received (its TSIG covers these bytes)
	Client netip.Addr
}

// TransferResult is the pipeline's decision on a TransferRequest.
type TransferResult struct {
	// Zone is the transferred zone when the question names a top-level
	// zone that is listed for transfers (metrics label), else "".
	Zone string
	// Rcode: RcodeSuccess (RRs hold the answer), RcodeRefused (zone not
	// listed, client not allowed, unsigned when a key is required),
	// RcodeNotAuth (TSIGError says why; the error response is unsigned),
	// RcodeServerFailure (Err says why: a source cannot list).
	Rcode     int
	TSIGError uint16
	// Key signs every response message when set; RequestMAC is the
	// request's MAC the first response's signature covers.
	Key        *TSIGKey
	RequestMAC string
	// RRs is the whole answer: SOA, records, SOA (AXFR, or IXFR of an
	// older serial dnsd holds no version of); an IXFR difference sequence
	// (Incremental); the SOA alone (IXFR of a serial not older than ours).
	RRs         []dns.RR
	Incremental bool
	Err         error
}

// ErrNotListable: a local source of the zone cannot list its records.
var ErrNotListable = errors.New("a local source of the zone cannot list its records")

// Transfer decides an AXFR or IXFR request and, when it is allowed,
// returns the zone's content. Checks, in order: the question names a
// listed zone, the client is in the item's allow, the TSIG signature
// (when the item has a key: unsigned is REFUSED; another key name is
// NOTAUTH/BADKEY; a bad MAC NOTAUTH/BADSIG; a time outside the fudge
// NOTAUTH/BADTIME). A request to an item without a key signed with
// another item's key is answered, signed; with an unknown key it is
// NOTAUTH/BADKEY.
func (p *Pipeline) Transfer(ctx context.Context, req *TransferRequest) TransferResult {
	q := req.Msg.Question[0]
	name := strings.ToLower(dns.Fqdn(q.Name))
	spec := p.xfr[name]
	if spec == nil {
		return TransferResult{Rcode: dns.RcodeRefused}
	}
	res := TransferResult{Zone: name, Rcode: dns.RcodeRefused}
	if !allowed(spec.Allow, req.Client) {
		return res
	}
	key, r, ok := p.checkTSIG(spec.Key, req)
	if !ok {
		r.Zone = name
		return r
	}
	if key != nil {
		res.Key, res.RequestMAC = key, req.Msg.IsTsig().MAC
	}
	z := p.table.zones[name]
	soa := z.soa(z.name, z.apexTTL())
	var from *version
	if q.Qtype == dns.TypeIXFR {
		theirs, ok := ixfrSerial(req.Msg)
		if ok && !SerialLess(theirs, soa.Serial) {
			res.Rcode, res.RRs = dns.RcodeSuccess, []dns.RR{soa}
			return res
		}
		if ok {
			from = p.journal.find(name, theirs)
		}
	}
	l, err := p.listing(ctx, z, soa)
	if err != nil {
		res.Rcode, res.Err = dns.RcodeServerFailure, err
		return res
	}
	res.Rcode, res.RRs = dns.RcodeSuccess, l.rrs
	if from != nil && from.soa.Serial != l.serial {
		res.RRs, res.Incremental = l.diff(from), true
	}
	p.journal.record(name, l.rrs)
	return res
}

// TransferMsgSize bounds the records of one transfer message
// (uncompressed, as dns.Len counts them), leaving room in a 64 KiB
// message for the header, the question, an OPT and a TSIG record. A
// record longer than this alone is left out of transfers.
const TransferMsgSize = dns.MaxMsgSize - 1024

// xfrCache holds a zone's transfer listing at its latest serial: every
// transfer of that version shares it, and the first one builds it while
// the others wait.
type xfrCache struct {
	mu  sync.Mutex
	cur *listing
}

// listing is a zone's transfer content at one serial.
type listing struct {
	serial uint32
	done   chan struct{} // closed once rrs or err is set
	rrs    []dns.RR      // SOA, records, SOA; shared and read-only
	err    error

	mu    sync.Mutex
	diffs map[uint32][]dns.RR // IXFR answers from the journal's versions, by their serial
}

// listing returns z's transfer content at soa's serial, built once per
// serial and shared. A transfer waiting for another one's build stops
// waiting when ctx ends; when that build ended because its own
// transfer's ctx did, the waiter builds it again.
func (p *Pipeline) listing(ctx context.Context, z *zone, soa *dns.SOA) (*listing, error) {
	for {
		z.xfr.mu.Lock()
		l := z.xfr.cur
		build := l == nil || l.serial != soa.Serial
		if build {
			l = &listing{serial: soa.Serial, done: make(chan struct{})}
			z.xfr.cur = l
		}
		z.xfr.mu.Unlock()
		if build {
			l.rrs, l.err = p.zoneContent(ctx, z, soa)
			if l.err != nil {
				z.xfr.mu.Lock()
				if z.xfr.cur == l {
					z.xfr.cur = nil // the next transfer tries again
				}
				z.xfr.mu.Unlock()
			}
			close(l.done)
			return l, l.err
		}
		select {
		case <-l.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if l.err == nil {
			return l, nil
		}
		if !errors.Is(l.err, context.Canceled) && !errors.Is(l.err, context.DeadlineExceeded) {
			return nil, l.err
		}
	}
}

// diff is the IXFR answer from the journal's version from to l, made once
// per version and shared.
func (l *listing) diff(from *version) []dns.RR {
	l.mu.Lock()
	defer l.mu.Unlock()
	if d, ok := l.diffs[from.soa.Serial]; ok {
		return d
	}
	d := ixfrDiff(from, l.rrs)
	if l.diffs == nil {
		l.diffs = make(map[uint32][]dns.RR, JournalVersions)
	}
	l.diffs[from.soa.Serial] = d
	return d
}

func allowed(allow []netip.Prefix, a netip.Addr) bool {
	a = a.Unmap()
	for _, p := range allow {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// checkTSIG verifies the request's signature against key, the zone's
// transfer key, and returns the key the answer is signed with (nil:
// unsigned); ok false gives the result to send. A request signed with a
// key of another transfer item, for a zone whose item has no key, is
// answered as an unsigned one would be, signed with that key: BIND signs
// every request to a primary it has a key for.
func (p *Pipeline) checkTSIG(key *TSIGKey, req *TransferRequest) (*TSIGKey, TransferResult, bool) {
	ts := req.Msg.IsTsig()
	if key == nil && ts != nil {
		key = p.TSIGKey(ts.Hdr.Name)
	}
	switch {
	case key == nil && ts == nil:
		return nil, TransferResult{}, true
	case ts == nil:
		return nil, TransferResult{Rcode: dns.RcodeRefused}, false
	case key == nil || !strings.EqualFold(dns.Fqdn(ts.Hdr.Name), key.Name) || !strings.EqualFold(ts.Algorithm, key.Algorithm):
		return nil, TransferResult{Rcode: dns.RcodeNotAuth, TSIGError: dns.RcodeBadKey}, false
	}
	err := dns.TsigVerify(req.Wire, key.Secret, "", false)
	switch {
	case err == nil:
		return key, TransferResult{}, true
	case errors.Is(err, dns.ErrTime):
		// The signature is good, the clock is not: the error is signed
		// (RFC 8945 section 5.2.3), so the key goes with it.
		return nil, TransferResult{Rcode: dns.RcodeNotAuth, TSIGError: dns.RcodeBadTime, Key: key, RequestMAC: ts.MAC}, false
	case errors.Is(err, dns.ErrKeyAlg):
		return nil, TransferResult{Rcode: dns.RcodeNotAuth, TSIGError: dns.RcodeBadKey}, false
	default:
		return nil, TransferResult{Rcode: dns.RcodeNotAuth, TSIGError: dns.RcodeBadSig}, false
	}
}

// ixfrSerial is the client's serial of an IXFR request (its SOA in the
// authority section).
func ixfrSerial(m *dns.Msg) (uint32, bool) {
	for _, rr := range m.Ns {
		if soa, ok := rr.(*dns.SOA); ok {
			return soa.Serial, true
		}
	}
	return 0, false
}

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
// follows its data). When it is not, the zone's SOA is this one with
// dnsd's serial.
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
	return soa, soa != nil && own && locals == 1
}

// zoneContent lists z for a transfer: soa, records, soa. Records too
// large for a transfer message are left out, and logged.
func (p *Pipeline) zoneContent(ctx context.Context, z *zone, soa *dns.SOA) ([]dns.RR, error) {
	return p.listZone(ctx, z, soa, true)
}

// listZone is zoneContent, logging what it leaves out when logged.
func (p *Pipeline) listZone(ctx context.Context, z *zone, soa *dns.SOA, logged bool) ([]dns.RR, error) {
	out := []dns.RR{soa}
	var big oversized
	err := p.walkZone(ctx, z, func(rr dns.RR) {
		if n := dns.Len(rr); n > TransferMsgSize {
			big.add(rr, n)
			return
		}
		out = append(out, rr)
	})
	if err != nil {
		return nil, err
	}
	out, dropped, example := withoutCNAMEConflicts(out)
	if !logged {
		return append(out, soa), nil
	}
	if dropped > 0 {
		if _, logged := p.cnameWarned.LoadOrStore(z.name, true); !logged {
			p.log.Warn("zone transfer leaves out CNAME records beside other data at their name (a secondary would refuse the zone); fix the sources' data",
				"zone", z.name, "records", dropped, "example", example)
		}
	}
	big.log(p.log, z.name, soa.Serial)
	return append(out, soa), nil
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

// oversized collects the records a listing leaves out because one alone
// does not fit in a transfer message.
type oversized struct {
	n    int
	some []dns.RR // the first maxOversizedLogged
	lens []int
}

// maxOversizedLogged bounds the records of one zone version logged one
// by one; the rest are counted.
const maxOversizedLogged = 5

func (o *oversized) add(rr dns.RR, n int) {
	o.n++
	if len(o.some) < maxOversizedLogged {
		o.some = append(o.some, rr)
		o.lens = append(o.lens, n)
	}
}

// log warns about the records left out of zone's version serial (called
// once per version: the listing is built once).
func (o *oversized) log(log *slog.Logger, zone string, serial uint32) {
	for i, rr := range o.some {
		log.Warn("zone transfer leaves out a record too large for one transfer message (64 KiB); the other records are transferred",
			"zone", zone, "serial", serial, "owner", rr.Header().Name, "type", dns.TypeToString[rr.Header().Rrtype], "bytes", o.lens[i])
	}
	if more := o.n - len(o.some); more > 0 {
		log.Warn("zone transfer leaves out more records too large for one transfer message", "zone", zone, "serial", serial, "records", more)
	}
}

// withoutCNAMEConflicts drops from a zone's records (SOA first) the CNAME
// records of names that hold other data too - the apex, with its SOA and
// NS, included - and every CNAME of a name but the first: secondaries
// refuse such a zone (RFC 1034 §3.6.2, RFC 2181 §10.1), and would then
// take none of its later changes. Sources such as etcd can hold them
// (one key's value a name, another's an address). A CNAME's own RRSIG
// and NSEC records (a signed zone file's) are not other data (RFC 4035
// §2.5; BIND and Knot load them). It returns the records kept (rrs,
// filtered in place), how many were dropped and one name.
func withoutCNAMEConflicts(rrs []dns.RR) ([]dns.RR, int, string) {
	if !slices.ContainsFunc(rrs, func(rr dns.RR) bool { return rr.Header().Rrtype == dns.TypeCNAME }) {
		return rrs, 0, ""
	}
	other := make(map[string]bool, len(rrs))
	for _, rr := range rrs {
		if h := rr.Header(); h.Rrtype != dns.TypeCNAME && h.Rrtype != dns.TypeRRSIG && h.Rrtype != dns.TypeNSEC {
			other[strings.ToLower(h.Name)] = true
		}
	}
	first := map[string]bool{}
	kept, dropped, example := rrs[:0], 0, ""
	for _, rr := range rrs {
		if h := rr.Header(); h.Rrtype == dns.TypeCNAME {
			name := strings.ToLower(h.Name)
			if other[name] || first[name] {
				if dropped == 0 {
					example = h.Name
				}
				dropped++
				continue
			}
			first[name] = true
		}
		kept = append(kept, rr)
	}
	return kept, dropped, example
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

// Transferer answers zone transfer requests: *Pipeline implements it,
// and so does the reload switch (the current generation's pipeline, held
// only while the zone is listed, never while the server sends it).
type Transferer interface {
	Transfer(ctx context.Context, req *TransferRequest) TransferResult
	// TransferZone returns name (lower case, fully qualified) when it is
	// a zone listed for transfer, else "": the zone to count a refused
	// transfer request (one over UDP) under.
	TransferZone(name string) string
	// TSIGKey returns the transfer key named name (a FQDN, any case), nil
	// when no transfer item has it. Secondaries sign their SOA queries
	// with it too; the server verifies and signs those answers.
	TSIGKey(name string) *TSIGKey
}

// TransferZone implements Transferer.
func (p *Pipeline) TransferZone(name string) string {
	name = strings.ToLower(dns.Fqdn(name))
	if p.xfr[name] == nil {
		return ""
	}
	return name
}

// TSIGKey implements Transferer.
func (p *Pipeline) TSIGKey(name string) *TSIGKey {
	for _, s := range p.xfrSpecs {
		if s.Key != nil && strings.EqualFold(s.Key.Name, dns.Fqdn(name)) {
			return s.Key
		}
	}
	return nil
}

var _ Transferer = (*Pipeline)(nil)

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
// (carrySerials' offset). A transferred zone's listing carries over.
func (p *Pipeline) keepSerial(z, oz *zone, was uint32) {
	if !zoneSynced(z) || !zoneSynced(oz) {
		return
	}
	at := z.sourcesSerial()
	ctx := context.Background()
	oz.xfr.mu.Lock()
	held := oz.xfr.cur // the listing of a transferred zone, if made
	if held == nil || held.serial != was || !isDone(held.done) || held.err != nil {
		held = nil
	}
	oz.xfr.mu.Unlock()
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
	if held != nil {
		// The same version: its listing (and what it logged) carries over.
		z.xfr.cur = held
	}
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

func isDone(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
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
