package authority

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/miekg/dns"

	"github.com/dnsd/dnsd/pipeline"
)

// Zone transfers (AXFR, IXFR). A transferred zone's content is its SOA,
// the records the pipeline lists for it (pipeline.ListZone: what
// resolution would answer), and the SOA again; records too large for a
// transfer message and CNAMEs a secondary would refuse are left out. Who
// may transfer which zone is part of the generation (Options.Transfers),
// swapped with it on reload.

// TransferSpec says who may transfer some zones and whom to notify.
type TransferSpec struct {
	Zones  []string       // top-level zone names (FQDNs); none: the spec covers nothing
	Allow  []netip.Prefix // clients that may transfer; none: nobody
	Key    *TSIGKey       // nil: unsigned transfers
	Notify []string       // ip:port of secondaries to NOTIFY; none: no NOTIFY
	// NotifyFrom are the addresses NOTIFYs may leave from: a target gets
	// the first of its family (none: the system's choice).
	NotifyFrom []netip.Addr
}

// Options are a generation's transfer settings.
type Options struct {
	// Transfers say which top-level zones may be transferred, by whom, and
	// whom to notify (see Transfer). A zone in two specs is an error.
	// None: every transfer is refused.
	Transfers []TransferSpec
	// Journal keeps the zone versions sent to secondaries, for IXFR
	// answers with differences; the same one across reloads. Nil: IXFR is
	// always answered with the whole zone.
	Journal *Journal
	// Logger receives what a listing leaves out. Nil discards.
	Logger *slog.Logger
	// Prev is the Zones this one replaces (a reload), nil at the start: a
	// zone whose pipeline kept its serial keeps its listing.
	Prev *Zones
	// Updates say who may change which zones by dynamic update (see
	// Update). A zone in them must be a top-level zone with exactly one
	// writable source. None: UPDATE is not implemented (NOTIMP).
	Updates []UpdateSpec
	// MaxUpdateSize bounds an UPDATE message in bytes, MaxUpdateRRs its
	// prerequisite and update records together; 0: the defaults.
	MaxUpdateSize, MaxUpdateRRs int
}

// Zones is one generation's transferred zones: immutable but for the
// listings it shares between transfers, safe for concurrent use.
type Zones struct {
	p       *pipeline.Pipeline
	journal *Journal
	log     *slog.Logger
	zones   map[string]*xfrZone // by lower-case FQDN
	specs   []*TransferSpec     // in configuration order
	// secondary: some zone of the generation is copied from primaries
	// (a source is a pipeline.NotifyTaker), so NOTIFY in is implemented.
	secondary bool
	// updates are the zones open to dynamic updates, by lower-case FQDN;
	// nil without update items.
	updates                     map[string]*updateZone
	maxUpdateSize, maxUpdateRRs int
}

// xfrZone is one transferred zone of a generation.
type xfrZone struct {
	spec *TransferSpec
	xfr  xfrCache
	// cnameWarned: the zone's CNAME conflicts have been logged by this
	// generation (once, not at every transfer).
	cnameWarned atomic.Bool
}

// New compiles the transfer settings of the generation whose pipeline is
// p. A zone that is not one of p's top-level zones, or is in two specs,
// is an error.
func New(p *pipeline.Pipeline, opts Options) (*Zones, error) {
	a := &Zones{p: p, journal: opts.Journal, log: opts.Logger, zones: make(map[string]*xfrZone)}
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}
	for _, s := range p.Sources() {
		if _, ok := s.(pipeline.NotifyTaker); ok {
			a.secondary = true
			break
		}
	}
	var errs []error
	for i := range opts.Transfers {
		spec := opts.Transfers[i]
		spec.Zones = nil
		a.specs = append(a.specs, &spec)
		for _, n := range opts.Transfers[i].Zones {
			name := strings.ToLower(dns.Fqdn(n))
			if z, ok := p.Match(name); !ok || z != name {
				errs = append(errs, fmt.Errorf("authority: transfer of %q: not a top-level zone", n))
				continue
			}
			if a.zones[name] != nil {
				errs = append(errs, fmt.Errorf("authority: zone %q transferred twice", name))
				continue
			}
			spec.Zones = append(spec.Zones, name)
			a.zones[name] = &xfrZone{spec: &spec}
		}
	}
	if err := a.compileUpdates(opts); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if opts.Prev != nil {
		a.carryListings(opts.Prev)
	}
	return a, nil
}

// carryListings takes over prev's listing of each zone whose serial the
// pipeline kept across the reload: the same version, so its listing (and
// what it logged) carries over.
func (a *Zones) carryListings(prev *Zones) {
	for name, z := range a.zones {
		pz := prev.zones[name]
		if pz == nil {
			continue
		}
		serial, kept := a.p.KeptSerial(name)
		if !kept {
			continue
		}
		pz.xfr.mu.Lock()
		held := pz.xfr.cur
		pz.xfr.mu.Unlock()
		if held != nil && held.serial == serial && isDone(held.done) && held.err == nil {
			z.xfr.cur = held
		}
	}
}

// Pipeline returns the pipeline the zones are listed from.
func (a *Zones) Pipeline() *pipeline.Pipeline { return a.p }

// Transfers returns the transfer specs (zone names normalised), in order.
func (a *Zones) Transfers() []TransferSpec {
	out := make([]TransferSpec, 0, len(a.specs))
	for _, s := range a.specs {
		out = append(out, *s)
	}
	return out
}

// Request is an AXFR or IXFR query as the server received it.
type Request struct {
	Msg    *dns.Msg   // required: parsed, one question, AXFR or IXFR (IXFR: the client's SOA in Ns)
	Wire   []byte     // the message as received (its TSIG covers these bytes); required when signed
	Client netip.Addr // the zero Addr is allowed by no prefix
}

// Result is the decision on a Request.
type Result struct {
	// Zone is the transferred zone when the question names a top-level
	// zone that is listed for transfers (metrics label), else "".
	Zone string
	// Rcode: RcodeSuccess (RRs hold the answer), RcodeRefused (zone not
	// listed, client not allowed, unsigned when a key is required),
	// RcodeNotAuth (TSIGError says why; the error response is unsigned),
	// RcodeServerFailure (Err says why: a source cannot list).
	Rcode     int
	TSIGError uint16 // zero unless Rcode is RcodeNotAuth
	// Key signs every response message when set; RequestMAC is the
	// request's MAC the first response's signature covers. Nil: unsigned.
	Key        *TSIGKey
	RequestMAC string // empty when Key is nil
	// RRs is the whole answer: SOA, records, SOA (AXFR, or IXFR of an
	// older serial dnsd holds no version of); an IXFR difference sequence
	// (Incremental); the SOA alone (IXFR of a serial not older than ours).
	// Nil unless Rcode is RcodeSuccess.
	RRs         []dns.RR
	Incremental bool  // false: RRs is a whole zone (or the SOA alone)
	Err         error // nil unless Rcode is RcodeServerFailure
}

// Transferer answers zone transfer requests: *Zones implements it, and so
// does the daemon's reload switch (the current generation's, held only
// while the zone is listed, never while the server sends it).
type Transferer interface {
	Transfer(ctx context.Context, req *Request) Result
	// TransferZone returns name (lower case, fully qualified) when it is
	// a zone listed for transfer, else "": the zone to count a refused
	// transfer request (one over UDP) under.
	TransferZone(name string) string
	// TSIGKey returns the transfer key named name (a FQDN, any case), nil
	// when no transfer item has it. Secondaries sign their SOA queries
	// with it too; the server verifies and signs those answers.
	TSIGKey(name string) *TSIGKey
}

var _ Transferer = (*Zones)(nil)

// Transfer decides an AXFR or IXFR request and, when it is allowed,
// returns the zone's content. Checks, in order: the question names a
// listed zone, the client is in the item's allow, the TSIG signature
// (when the item has a key: unsigned is REFUSED; another key name is
// NOTAUTH/BADKEY; a bad MAC NOTAUTH/BADSIG; a time outside the fudge
// NOTAUTH/BADTIME). A request to an item without a key signed with
// another item's key is answered, signed; with an unknown key it is
// NOTAUTH/BADKEY.
func (a *Zones) Transfer(ctx context.Context, req *Request) Result {
	q := req.Msg.Question[0]
	name := strings.ToLower(dns.Fqdn(q.Name))
	z := a.zones[name]
	if z == nil {
		return Result{Rcode: dns.RcodeRefused}
	}
	res := Result{Zone: name, Rcode: dns.RcodeRefused}
	if !allowed(z.spec.Allow, req.Client) {
		return res
	}
	key, r, ok := a.checkTSIG(z.spec.Key, req)
	if !ok {
		r.Zone = name
		return r
	}
	if key != nil {
		res.Key, res.RequestMAC = key, req.Msg.IsTsig().MAC
	}
	soa := a.p.ZoneSOA(name)
	var from *version
	if q.Qtype == dns.TypeIXFR {
		theirs, ok := ixfrSerial(req.Msg)
		if ok && !pipeline.SerialLess(theirs, soa.Serial) {
			res.Rcode, res.RRs = dns.RcodeSuccess, []dns.RR{soa}
			return res
		}
		if ok {
			from = a.journal.find(name, theirs)
		}
	}
	l, err := a.listing(ctx, name, z, soa)
	if err != nil {
		res.Rcode, res.Err = dns.RcodeServerFailure, err
		return res
	}
	res.Rcode, res.RRs = dns.RcodeSuccess, l.rrs
	if from != nil && from.soa.Serial != l.serial {
		res.RRs, res.Incremental = l.diff(from), true
	}
	a.journal.record(name, l.rrs)
	return res
}

// TransferZone implements Transferer.
func (a *Zones) TransferZone(name string) string {
	name = strings.ToLower(dns.Fqdn(name))
	if a.zones[name] == nil {
		return ""
	}
	return name
}

// TSIGKey implements Transferer.
func (a *Zones) TSIGKey(name string) *TSIGKey {
	for _, s := range a.specs {
		if s.Key != nil && strings.EqualFold(s.Key.Name, dns.Fqdn(name)) {
			return s.Key
		}
	}
	return nil
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
func (a *Zones) listing(ctx context.Context, name string, z *xfrZone, soa *dns.SOA) (*listing, error) {
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
			l.rrs, l.err = a.zoneContent(ctx, name, z, soa)
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

func isDone(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
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
func (a *Zones) checkTSIG(key *TSIGKey, req *Request) (*TSIGKey, Result, bool) {
	ts := req.Msg.IsTsig()
	if key == nil && ts != nil {
		key = a.TSIGKey(ts.Hdr.Name)
	}
	switch {
	case key == nil && ts == nil:
		return nil, Result{}, true
	case ts == nil:
		return nil, Result{Rcode: dns.RcodeRefused}, false
	}
	c := Verify(key, ts, req.Wire)
	if c.Rcode != dns.RcodeSuccess {
		return nil, Result{Rcode: c.Rcode, TSIGError: c.Error, Key: c.Key, RequestMAC: c.MAC}, false
	}
	return c.Key, Result{}, true
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

// zoneContent lists a zone for a transfer: soa, records, soa. Records too
// large for a transfer message are left out, and logged, and so are
// CNAMEs a secondary would refuse.
func (a *Zones) zoneContent(ctx context.Context, name string, z *xfrZone, soa *dns.SOA) ([]dns.RR, error) {
	out := []dns.RR{soa}
	var big oversized
	err := a.p.ListZone(ctx, name, func(rr dns.RR) {
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
	if dropped > 0 && !z.cnameWarned.Swap(true) {
		a.log.Warn("zone transfer leaves out CNAME records beside other data at their name (a secondary would refuse the zone); fix the sources' data",
			"zone", name, "records", dropped, "example", example)
	}
	big.log(a.log, name, soa.Serial)
	return append(out, soa), nil
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
