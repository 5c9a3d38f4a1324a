package authority

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"strings"

	"github.com/miekg/dns"

	"github.com/dnsd/dnsd/internal/namepat"
	"github.com/dnsd/dnsd/pipeline"
)

// Dynamic updates (RFC 2136). An UPDATE names a zone; the generation's
// update items (Options.Updates) say who may change what in it: the TSIG
// key, the client networks, the owner names and the types. Prerequisites
// are checked against the zone as queries see it (every source, in
// order); the changes are made to the zone's one writable source
// (pipeline.Writer), all or nothing, and answered NOERROR once that
// source has them durably and serves them.

// UpdateSpec is one update item: who may change which records of some
// zones.
type UpdateSpec struct {
	Zones []string       // top-level zone names (lower-case FQDNs); none: the item grants nothing
	Key   *TSIGKey       // nil: unsigned updates
	Allow []netip.Prefix // nil: any client
	// Names are owner patterns (lower-case FQDNs) in which a label "*"
	// stands for one or more whole labels; nil: every name of the zones.
	Names []string
	// Types are the record types the item may change; nil: any type but
	// SOA, the DNSSEC types and NS at the apex.
	Types []uint16
	// Index is the item's place in the configuration, from 0: refusals
	// name it as update[Index].
	Index int
}

// Update results: the result label of dnsd_updates_total.
const (
	UpdateOK      = "ok"
	UpdateRefused = "refused"
	UpdateNotAuth = "notauth"
	UpdatePrereq  = "prereq"
	UpdateError   = "error"
)

// Defaults of Options' update bounds.
const (
	DefaultMaxUpdateSize = 65535
	DefaultMaxUpdateRRs  = 1000
)

// UpdateAnswer is the answer to an UPDATE.
type UpdateAnswer struct {
	Rcode int // the answer's rcode; 0: NOERROR, the update is applied
	// Reason, for a REFUSED answer, says which rule refused it: the text
	// of the answer's Extended DNS Error 18 (Prohibited). "" otherwise.
	Reason string
	// Zone is the zone updated when dnsd serves it, else "".
	Zone string
	// Result is one of the Update* results, for metrics; always set.
	Result string
	// Check is the TSIG verdict of a signed update: the answer is signed
	// with Check.Key (BADTIME included) or carries Check.Error unsigned
	// (see WithError). Zero: the update was not signed.
	Check Check
	// Changed: the update changed the zone (its serial rose); false
	// when it was refused or changed nothing.
	Changed bool
}

// Updater answers UPDATEs: *Zones implements it.
type Updater interface {
	// Updates reports whether any zone is open to updates; without, an
	// UPDATE is not implemented (NOTIMP).
	Updates() bool
	Update(ctx context.Context, q *dns.Msg, wire []byte, client netip.Addr) UpdateAnswer
}

var _ Updater = (*Zones)(nil)

// updateZone is one zone open to updates.
type updateZone struct {
	items  []*UpdateSpec // in configuration order
	writer pipeline.Writer
	w      int // the writer's place in the zone's source list
}

// compileUpdates checks opts' update items against p: each zone a
// top-level zone with exactly one writable source.
func (a *Zones) compileUpdates(opts Options) error {
	a.maxUpdateSize, a.maxUpdateRRs = opts.MaxUpdateSize, opts.MaxUpdateRRs
	if a.maxUpdateSize <= 0 {
		a.maxUpdateSize = DefaultMaxUpdateSize
	}
	if a.maxUpdateRRs <= 0 {
		a.maxUpdateRRs = DefaultMaxUpdateRRs
	}
	if len(opts.Updates) == 0 {
		return nil
	}
	a.updates = map[string]*updateZone{}
	var errs []error
	for i := range opts.Updates {
		spec := &opts.Updates[i]
		for _, name := range spec.Zones {
			name = strings.ToLower(dns.Fqdn(name))
			uz := a.updates[name]
			if uz == nil {
				entries := a.p.ZoneEntries(name)
				if entries == nil {
					errs = append(errs, fmt.Errorf("authority: update of %q: not a top-level zone", name))
					continue
				}
				uz = &updateZone{w: -1}
				for j, e := range entries {
					w, ok := e.Source.(pipeline.Writer)
					if !ok {
						continue
					}
					if uz.writer != nil {
						errs = append(errs, fmt.Errorf("authority: zone %q has two writable sources (%s and %s)", name, uz.writer.Kind(), w.Kind()))
						break
					}
					uz.writer, uz.w = w, j
				}
				if uz.writer == nil {
					errs = append(errs, fmt.Errorf("authority: zone %q is open to updates but has no writable source", name))
					continue
				}
				a.updates[name] = uz
			}
			uz.items = append(uz.items, spec)
		}
	}
	return errors.Join(errs...)
}

// Updates implements Updater.
func (a *Zones) Updates() bool { return a.updates != nil }

// Update decides and applies q, an UPDATE received as wire from client
// (RFC 2136 §3): the zone section (FORMERR, NOTAUTH for a zone dnsd does
// not serve, REFUSED for one in no update item), the TSIG signature
// (NOTAUTH with BADKEY, BADSIG or BADTIME), the size bounds, the
// sections' form (FORMERR, NOTZONE), the policy (REFUSED with a reason),
// the prerequisites (YXDOMAIN, NXDOMAIN, YXRRSET, NXRRSET), then the
// changes, committed to the zone's writable source (REFUSED with a
// reason when they would hide or delete a read-only source's data).
func (a *Zones) Update(ctx context.Context, q *dns.Msg, wire []byte, client netip.Addr) UpdateAnswer {
	ans := a.update(ctx, q, wire, client)
	key := ""
	if ans.Check.Key != nil {
		key = ans.Check.Key.Name
	}
	a.logUpdate(ans, client, key)
	return ans
}

func (a *Zones) update(ctx context.Context, q *dns.Msg, wire []byte, client netip.Addr) UpdateAnswer {
	if len(wire) > a.maxUpdateSize || len(q.Question) != 1 || q.Question[0].Qtype != dns.TypeSOA {
		return UpdateAnswer{Rcode: dns.RcodeFormatError, Result: UpdateError}
	}
	zone := strings.ToLower(dns.Fqdn(q.Question[0].Name))
	if z, ok := a.p.Match(zone); !ok || z != zone || q.Question[0].Qclass != dns.ClassINET {
		if q.Question[0].Qclass == dns.ClassINET && a.p.ZoneSource(zone, func(pipeline.Source) bool { return true }) != nil {
			// A zone only views serve: served, but never open to updates.
			return UpdateAnswer{}.refused(fmt.Sprintf("zone %s is not open to updates (a view's zone)", zone))
		}
		return UpdateAnswer{Rcode: dns.RcodeNotAuth, Result: UpdateNotAuth}
	}
	ans := UpdateAnswer{Zone: zone}
	uz := a.updates[zone]
	if uz == nil {
		return ans.refused(fmt.Sprintf("zone %s is not open to updates", zone))
	}
	var cands []*UpdateSpec
	if ts := q.IsTsig(); ts != nil {
		name := strings.ToLower(dns.Fqdn(ts.Hdr.Name))
		var key *TSIGKey
		for _, it := range uz.items {
			if it.Key != nil && it.Key.Name == name {
				if key == nil {
					key = it.Key
				}
				cands = append(cands, it)
			}
		}
		ans.Check = Verify(key, ts, wire)
		if ans.Check.Rcode != dns.RcodeSuccess {
			ans.Rcode, ans.Result = ans.Check.Rcode, UpdateNotAuth
			return ans
		}
	} else {
		for _, it := range uz.items {
			if it.Key == nil {
				cands = append(cands, it)
			}
		}
		if len(cands) == 0 {
			it := uz.items[0]
			return ans.refused(fmt.Sprintf("update[%d]: updates must be signed with TSIG key %s", it.Index, it.Key.Name))
		}
	}
	if n := len(q.Answer) + len(q.Ns); n > a.maxUpdateRRs {
		return ans.refused(fmt.Sprintf("the update has %d records, more than limits.max_update_rrs (%d)", n, a.maxUpdateRRs))
	}
	if rcode := a.prescan(zone, q); rcode != dns.RcodeSuccess {
		ans.Rcode, ans.Result = rcode, UpdateError
		return ans
	}
	cands, reason := policy(cands, zone, client, q.Ns)
	if reason != "" {
		return ans.refused(reason)
	}
	for try := 0; ; try++ {
		txn, err := uz.writer.BeginUpdate(ctx, zone)
		if err != nil {
			a.log.Warn("update not applied", "zone", zone, "err", err)
			ans.Rcode, ans.Result = dns.RcodeServerFailure, UpdateError
			return ans
		}
		u := &update{a: a, ctx: ctx, zone: zone, entries: a.p.ZoneEntries(zone), w: uz.w, txn: txn, names: map[string]*nameState{}}
		out := u.run(q, cands)
		if out.Rcode == dns.RcodeSuccess && len(u.sets) > 0 {
			err = txn.Commit(ctx, u.sets)
			switch {
			case errors.Is(err, pipeline.ErrUpdateConflict) && try < 8:
				continue // checked again against what the other writer made
			case errors.Is(err, pipeline.ErrTooManyRecords), errors.Is(err, pipeline.ErrNotRepresentable):
				out = ans.refused(err.Error())
			case err != nil:
				a.log.Warn("update not applied", "zone", zone, "err", err)
				out = UpdateAnswer{Rcode: dns.RcodeServerFailure, Result: UpdateError}
			default:
				out.Changed = true
			}
		} else {
			txn.Abort()
		}
		out.Zone, out.Check = zone, ans.Check
		if out.Result == "" {
			out.Result = resultOf(out.Rcode)
		}
		return out
	}
}

func (ans UpdateAnswer) refused(reason string) UpdateAnswer {
	ans.Rcode, ans.Reason, ans.Result = dns.RcodeRefused, reason, UpdateRefused
	return ans
}

func resultOf(rcode int) string {
	switch rcode {
	case dns.RcodeSuccess:
		return UpdateOK
	case dns.RcodeRefused:
		return UpdateRefused
	case dns.RcodeYXDomain, dns.RcodeNameError, dns.RcodeYXRrset, dns.RcodeNXRrset:
		return UpdatePrereq
	case dns.RcodeNotAuth, dns.RcodeNotZone:
		return UpdateNotAuth
	}
	return UpdateError
}

// prescan checks the form of the prerequisite (RFC 2136 §3.2) and update
// (§3.4.1) sections: FORMERR for a record of a class or shape those
// sections do not allow, NOTZONE for a name outside the zone (or in a
// zone below it that dnsd serves).
func (a *Zones) prescan(zone string, q *dns.Msg) int {
	outside := func(name string) bool {
		name = strings.ToLower(name)
		z, ok := a.p.Match(name)
		return !ok || z != zone
	}
	for _, rr := range q.Answer {
		h := rr.Header()
		if h.Ttl != 0 {
			return dns.RcodeFormatError
		}
		if outside(h.Name) {
			return dns.RcodeNotZone
		}
		switch h.Class {
		case dns.ClassANY, dns.ClassNONE:
			if h.Rdlength != 0 || metaQtype(h.Rrtype) {
				return dns.RcodeFormatError
			}
		case dns.ClassINET:
			if h.Rrtype == dns.TypeANY || metaQtype(h.Rrtype) {
				return dns.RcodeFormatError
			}
		default:
			return dns.RcodeFormatError
		}
	}
	for _, rr := range q.Ns {
		h := rr.Header()
		if outside(h.Name) {
			return dns.RcodeNotZone
		}
		switch h.Class {
		case dns.ClassINET:
			if h.Rrtype == dns.TypeANY || metaQtype(h.Rrtype) {
				return dns.RcodeFormatError
			}
		case dns.ClassANY:
			if h.Ttl != 0 || h.Rdlength != 0 || metaQtype(h.Rrtype) {
				return dns.RcodeFormatError
			}
		case dns.ClassNONE:
			if h.Ttl != 0 || h.Rrtype == dns.TypeANY || metaQtype(h.Rrtype) {
				return dns.RcodeFormatError
			}
		default:
			return dns.RcodeFormatError
		}
	}
	return dns.RcodeSuccess
}

// metaQtype reports the types no record of an update may have (ANY is
// allowed where RFC 2136 gives it a meaning).
func metaQtype(t uint16) bool {
	switch t {
	case dns.TypeNone, dns.TypeAXFR, dns.TypeIXFR, dns.TypeMAILA, dns.TypeMAILB, dns.TypeOPT, dns.TypeTSIG, dns.TypeTKEY:
		return true
	}
	return false
}

// policy returns the candidates that allow client and every update
// record (their names and, but for deletions of whole names, their
// types), or the reason the first candidate refuses.
func policy(cands []*UpdateSpec, zone string, client netip.Addr, rrs []dns.RR) ([]*UpdateSpec, string) {
	var pass []*UpdateSpec
	first := ""
	for _, c := range cands {
		reason := c.refuses(zone, client, rrs)
		if reason == "" {
			pass = append(pass, c)
		} else if first == "" {
			first = reason
		}
	}
	if len(pass) == 0 {
		return nil, first
	}
	return pass, ""
}

func (c *UpdateSpec) refuses(zone string, client netip.Addr, rrs []dns.RR) string {
	if c.Allow != nil && !slices.ContainsFunc(c.Allow, func(p netip.Prefix) bool { return p.Contains(client) }) {
		return fmt.Sprintf("update[%d]: client %s not allowed", c.Index, client)
	}
	for _, rr := range rrs {
		h := rr.Header()
		if h.Rrtype == dns.TypeSOA {
			continue // ignored, not refused
		}
		name := strings.ToLower(h.Name)
		if !c.allowsName(name) {
			return fmt.Sprintf("update[%d]: name %s not allowed", c.Index, name)
		}
		if h.Rrtype != dns.TypeANY && !c.allowsType(zone, name, h.Rrtype) {
			return fmt.Sprintf("update[%d]: type %s not allowed", c.Index, dns.Type(h.Rrtype))
		}
	}
	return ""
}

func (c *UpdateSpec) allowsName(name string) bool {
	return c.Names == nil || slices.ContainsFunc(c.Names, func(p string) bool { return namepat.Match(p, name) })
}

func (c *UpdateSpec) allowsType(zone, name string, t uint16) bool {
	if t == dns.TypeNS && name == zone {
		return false // the apex NS are dnsd's, as the SOA
	}
	if c.Types != nil {
		return slices.Contains(c.Types, t)
	}
	switch t {
	case dns.TypeSOA, dns.TypeRRSIG, dns.TypeNSEC, dns.TypeNSEC3, dns.TypeNSEC3PARAM, dns.TypeDNSKEY, dns.TypeCDS, dns.TypeCDNSKEY:
		return false
	}
	return true
}

// update is one UPDATE being applied, the writable source's update
// held.
type update struct {
	a       *Zones
	ctx     context.Context
	zone    string
	entries []pipeline.SourceEntry
	w       int // the writable source's place in entries
	txn     pipeline.UpdateTxn
	names   map[string]*nameState
	// work are the writable source's new records at the names the
	// changes touch; sets, those that differ from what it held.
	work map[string][]dns.RR
	sets map[string][]dns.RR
	err  error // a source failed while the zone was read
}

// nameState is what the zone holds at one name before the update.
type nameState struct {
	visible []dns.RR // what queries see there (of the first source that holds records)
	writer  []dns.RR // what the writable source holds
	// blocker is the kind of a source before the writable one that keeps
	// queries from reaching it at the name ("" when none does).
	blocker string
	// readOnly are the other sources that hold records at the name (and
	// that queries may reach).
	readOnly []held
}

type held struct {
	kind string
	rrs  []dns.RR
}

// state reads the zone at name (once per update).
func (u *update) state(name string) *nameState {
	if s := u.names[name]; s != nil {
		return s
	}
	s := &nameState{}
	u.names[name] = s
	q := &pipeline.Question{Name: name, Type: dns.TypeANY, Zone: u.zone}
	for i, e := range u.entries {
		if r, ok := e.Source.(pipeline.Remote); ok && r.Remote() {
			break
		}
		var rrs []dns.RR
		if i == u.w {
			rrs = u.txn.Records(name)
			s.writer = rrs
		} else {
			res := e.Source.Lookup(u.ctx, q)
			switch res.Status {
			case pipeline.Found:
				rrs = res.RRs
			case pipeline.Failed:
				if u.err == nil {
					u.err = fmt.Errorf("%s source: %v", e.Source.Kind(), res.Err)
				}
			}
			if len(rrs) > 0 {
				s.readOnly = append(s.readOnly, held{kind: e.Source.Kind(), rrs: rrs})
			}
		}
		if len(rrs) > 0 && s.visible == nil {
			s.visible = rrs
		}
		if i < u.w && s.blocker == "" && (len(rrs) > 0 || !e.Fallthrough) {
			s.blocker = e.Source.Kind()
		}
		if !e.Fallthrough {
			break
		}
	}
	return s
}

// run checks the prerequisites and works out the changes (u.sets). The
// answer is NOERROR when the changes may be committed.
func (u *update) run(q *dns.Msg, cands []*UpdateSpec) UpdateAnswer {
	if rcode := u.prerequisites(q.Answer); rcode != dns.RcodeSuccess {
		return u.failed(rcode)
	}
	u.work = map[string][]dns.RR{}
	for _, rr := range q.Ns {
		if reason := u.apply(rr, cands); reason != "" {
			return UpdateAnswer{}.refused(reason)
		}
	}
	if u.err != nil {
		return u.failed(dns.RcodeServerFailure)
	}
	u.sets = map[string][]dns.RR{}
	for name, rrs := range u.work {
		s := u.state(name)
		if pipeline.SameRecords(rrs, s.writer) {
			continue
		}
		if added(rrs, s.writer) {
			if s.blocker != "" {
				return UpdateAnswer{}.refused(fmt.Sprintf("name %s is held by the %s source, before the writable one: queries would not see the change", name, s.blocker))
			}
			if len(s.readOnly) > 0 {
				return UpdateAnswer{}.refused(fmt.Sprintf("name %s is held by the %s source (read-only)", name, s.readOnly[0].kind))
			}
		}
		u.sets[name] = rrs
	}
	return UpdateAnswer{}
}

func (u *update) failed(rcode int) UpdateAnswer {
	if u.err != nil {
		u.a.log.Warn("update not applied: the zone cannot be read", "zone", u.zone, "err", u.err)
		rcode = dns.RcodeServerFailure
	}
	return UpdateAnswer{Rcode: rcode}
}

// prerequisites checks RFC 2136 §2.4's prerequisites against the zone as
// queries see it.
func (u *update) prerequisites(rrs []dns.RR) int {
	type key struct {
		name string
		t    uint16
	}
	var values map[key][]dns.RR // value-dependent RRset checks
	var order []key
	for _, rr := range rrs {
		h := rr.Header()
		name := strings.ToLower(h.Name)
		s := u.state(name)
		if u.err != nil {
			return dns.RcodeServerFailure
		}
		inUse := name == u.zone || len(s.visible) > 0
		switch h.Class {
		case dns.ClassANY:
			if h.Rrtype == dns.TypeANY {
				if !inUse {
					return dns.RcodeNameError
				}
			} else if !u.hasType(name, s.visible, h.Rrtype) {
				return dns.RcodeNXRrset
			}
		case dns.ClassNONE:
			if h.Rrtype == dns.TypeANY {
				if inUse {
					return dns.RcodeYXDomain
				}
			} else if u.hasType(name, s.visible, h.Rrtype) {
				return dns.RcodeYXRrset
			}
		default: // the zone's class: an RRset with exactly these values
			if values == nil {
				values = map[key][]dns.RR{}
			}
			k := key{name, h.Rrtype}
			if values[k] == nil {
				order = append(order, k)
			}
			values[k] = append(values[k], rr)
		}
	}
	for _, k := range order {
		var have []dns.RR
		for _, rr := range u.state(k.name).visible {
			if rr.Header().Rrtype == k.t {
				have = append(have, rr)
			}
		}
		if !sameValues(values[k], have) {
			return dns.RcodeNXRrset
		}
	}
	return dns.RcodeSuccess
}

// hasType reports an RRset of type t at name: in rrs, or the apex SOA
// and NS dnsd serves whatever the sources hold.
func (u *update) hasType(name string, rrs []dns.RR, t uint16) bool {
	if name == u.zone && (t == dns.TypeSOA || t == dns.TypeNS) {
		return true
	}
	return slices.ContainsFunc(rrs, func(rr dns.RR) bool { return rr.Header().Rrtype == t })
}

// apply makes one update record's change to u.work (RFC 2136 §3.4.2),
// or says why it is refused: it would delete a read-only source's data,
// or delete a whole name holding types no candidate may change.
func (u *update) apply(rr dns.RR, cands []*UpdateSpec) string {
	h := rr.Header()
	name := strings.ToLower(h.Name)
	if h.Rrtype == dns.TypeSOA {
		return "" // dnsd owns the serial: SOA updates are ignored
	}
	s := u.state(name)
	cur, ok := u.work[name]
	if !ok {
		cur = slices.Clone(s.writer)
	}
	apex := name == u.zone
	switch h.Class {
	case dns.ClassINET: // add
		cur = addRR(cur, rr, name)
	case dns.ClassANY:
		if h.Rrtype == dns.TypeANY { // delete the name
			for _, ro := range s.readOnly {
				if len(ro.rrs) > 0 && !(apex && onlyApexOwn(ro.rrs)) {
					return fmt.Sprintf("name %s is held by the %s source (read-only)", name, ro.kind)
				}
			}
			for _, have := range cur {
				t := have.Header().Rrtype
				if apex && (t == dns.TypeSOA || t == dns.TypeNS) {
					continue
				}
				if !slices.ContainsFunc(cands, func(c *UpdateSpec) bool { return c.allowsType(u.zone, name, t) }) {
					return fmt.Sprintf("update[%d]: type %s not allowed", cands[0].Index, dns.Type(t))
				}
			}
			cur = slices.DeleteFunc(cur, func(have dns.RR) bool {
				t := have.Header().Rrtype
				return !apex || t != dns.TypeSOA && t != dns.TypeNS
			})
			break
		}
		if apex && h.Rrtype == dns.TypeNS {
			break // the apex NS stays
		}
		for _, ro := range s.readOnly {
			if slices.ContainsFunc(ro.rrs, func(x dns.RR) bool { return x.Header().Rrtype == h.Rrtype }) {
				return fmt.Sprintf("%s %s is held by the %s source (read-only)", name, dns.Type(h.Rrtype), ro.kind)
			}
		}
		cur = slices.DeleteFunc(cur, func(have dns.RR) bool { return have.Header().Rrtype == h.Rrtype })
	case dns.ClassNONE: // delete one record
		want := dns.Copy(rr)
		want.Header().Class = dns.ClassINET
		for _, ro := range s.readOnly {
			if slices.ContainsFunc(ro.rrs, func(x dns.RR) bool { return dns.IsDuplicate(x, want) }) {
				return fmt.Sprintf("a %s record at %s is held by the %s source (read-only)", dns.Type(h.Rrtype), name, ro.kind)
			}
		}
		if apex && h.Rrtype == dns.TypeNS && countType(cur, dns.TypeNS) <= 1 {
			break // the last apex NS stays
		}
		cur = slices.DeleteFunc(cur, func(have dns.RR) bool { return dns.IsDuplicate(have, want) })
	}
	u.work[name] = cur
	return ""
}

// onlyApexOwn reports records that are all the apex's SOA and NS, which
// deleting a name never touches.
func onlyApexOwn(rrs []dns.RR) bool {
	for _, rr := range rrs {
		if t := rr.Header().Rrtype; t != dns.TypeSOA && t != dns.TypeNS {
			return false
		}
	}
	return true
}

// addRR adds rr to cur, the records at name (RFC 2136 §3.4.2.2): a CNAME
// only where nothing else is (replacing a CNAME), nothing else where a
// CNAME is; a duplicate replaces the record it repeats. The RRset takes
// the added record's TTL (RFC 2181 §5.2: one TTL per RRset).
func addRR(cur []dns.RR, rr dns.RR, name string) []dns.RR {
	t := rr.Header().Rrtype
	hasCNAME := countType(cur, dns.TypeCNAME) > 0
	if t == dns.TypeCNAME {
		for _, have := range cur {
			if ht := have.Header().Rrtype; ht != dns.TypeCNAME && !dnssecType(ht) {
				return cur // other data: the CNAME is ignored
			}
		}
		cur = slices.DeleteFunc(cur, func(have dns.RR) bool { return have.Header().Rrtype == dns.TypeCNAME })
	} else if hasCNAME && !dnssecType(t) {
		return cur // a CNAME is there: ignored
	}
	add := dns.Copy(rr)
	ah := add.Header()
	ah.Name, ah.Class, ah.Rdlength = name, dns.ClassINET, 0
	out := make([]dns.RR, 0, len(cur)+1)
	dup := false
	for _, have := range cur {
		if have.Header().Rrtype != t {
			out = append(out, have)
			continue
		}
		if dns.IsDuplicate(have, add) {
			dup = true
			out = append(out, add)
			continue
		}
		if have.Header().Ttl != ah.Ttl {
			c := dns.Copy(have)
			c.Header().Ttl = ah.Ttl
			have = c
		}
		out = append(out, have)
	}
	if !dup {
		out = append(out, add)
	}
	return out
}

func dnssecType(t uint16) bool {
	switch t {
	case dns.TypeRRSIG, dns.TypeNSEC, dns.TypeNSEC3:
		return true
	}
	return false
}

func countType(rrs []dns.RR, t uint16) int {
	n := 0
	for _, rr := range rrs {
		if rr.Header().Rrtype == t {
			n++
		}
	}
	return n
}

// added reports a record of now that was not in was (TTLs aside).
func added(now, was []dns.RR) bool {
	for _, x := range now {
		if !slices.ContainsFunc(was, func(y dns.RR) bool { return dns.IsDuplicate(x, y) }) {
			return true
		}
	}
	return false
}

// sameValues reports want (a prerequisite's records, class IN) and have
// holding the same values, TTLs aside (RFC 2136 §3.2.3).
func sameValues(want, have []dns.RR) bool {
	for _, w := range want {
		c := dns.Copy(w)
		c.Header().Class = dns.ClassINET
		if !slices.ContainsFunc(have, func(y dns.RR) bool { return dns.IsDuplicate(c, y) }) {
			return false
		}
	}
	for _, y := range have {
		if !slices.ContainsFunc(want, func(w dns.RR) bool {
			c := dns.Copy(w)
			c.Header().Class = dns.ClassINET
			return dns.IsDuplicate(c, y)
		}) {
			return false
		}
	}
	return true
}

// logUpdate logs an update's outcome: an applied update and a policy
// refusal at info (who changed what; why a client was refused), the
// rest at debug.
func (a *Zones) logUpdate(ans UpdateAnswer, client netip.Addr, key string) {
	level := slog.LevelDebug
	if ans.Changed || ans.Reason != "" {
		level = slog.LevelInfo
	}
	a.log.Log(context.Background(), level, "update", "zone", ans.Zone, "client", client, "key", key, "rcode", dns.RcodeToString[ans.Rcode], "result", ans.Result, "reason", ans.Reason)
}
