package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/miekg/dns"
)

var (
	errNoMsg    = errors.New("source answered without a message")
	errNoReason = errors.New("source failed without a reason")
)

// inlineAnswers is the answer capacity allocated together with the message;
// a larger answer costs one more allocation.
const inlineAnswers = 4

// AnswerBuf is the memory of a typical local answer: the response
// message, the Question handed to sources (it must live on the heap as it
// crosses an interface) and room for a small answer section. A caller that
// answers many queries lends one to Resolve through Request.Buf (the
// server has one per goroutine), so that a typical answer allocates
// nothing; without one Resolve allocates its own. Response.Msg may point
// into the buffer: the caller must be done with the response before it
// lends the buffer again, and calls Reset when it keeps the buffer idle,
// so that it holds no records.
type AnswerBuf struct {
	msg dns.Msg
	q   Question
	rrs [inlineAnswers]dns.RR
	ns  [1]dns.RR // a negative answer's SOA
	// answer is an answer section that outgrew the inline room (a
	// headless service's ten addresses), kept for the next responses.
	answer []dns.RR
}

// keptAnswerSection is the largest answer section an AnswerBuf keeps.
const keptAnswerSection = 256

// Reset drops every reference the buffer holds (keeping the room of a
// grown answer section).
func (b *AnswerBuf) Reset() {
	answer := b.answer
	clear(answer[:cap(answer)])
	*b = AnswerBuf{answer: answer[:0]}
}

// resolution is the per-query state; it lives on Resolve's stack.
type resolution struct {
	p    *Pipeline
	view *view // the client's view, nil for the default zones only
	ctx  context.Context
	req  *Request
	buf  *AnswerBuf
	// looked: additional records were looked up (in any zone): the
	// answer depends on more than its own zone.
	looked bool
}

// match is the zone of name: the view's zones first, then the default
// ones (never another view's).
func (r *resolution) match(name string) *zone {
	if r.view == nil {
		return r.p.table.match(name)
	}
	if z := r.view.table.match(name); z != nil {
		return z
	}
	return r.p.table.match(name)
}

// outcome is what a zone's source list says about one name.
type outcome struct {
	status Status
	rrs    []dns.RR
	msg    *dns.Msg
	err    error
	e      *entry // the source that decided, or the last one asked
	// decided: e itself gave the answer (false when every source fell
	// through, i.e. the pipeline decides NXDOMAIN).
	decided bool
	// wild is the wildcard whose records rrs are ("*.apps.example."),
	// "" when they are the name's own.
	wild string
}

// Resolve answers one query (docs/configuration.md, zones and sources):
//
//   - No zone matches: REFUSED, Zone "".
//   - The zone's sources are asked in order. A Failed source gives
//     SERVFAIL (logged at debug) and never falls through; an Answered
//     result (forward) is returned as it is; NotMine falls through only
//     when the entry's Fallthrough is set, else NXDOMAIN; after the last
//     source, NXDOMAIN.
//   - Found: the records of the question type. Else a CNAME at the name is
//     added and its target resolved through the pipeline again (zone match
//     from the top, so targets in other zones, forward ones included, are
//     completed), up to MaxCNAMELinks CNAME records; a loop or a longer
//     chain, or a target in no zone, ends the chase with the partial chain
//     and NOERROR. The rcode and authority section are those of the last
//     link; a source failure anywhere gives SERVFAIL with no answer.
//   - Wildcards (RFC 4592, wildcard.go): when every local source asked
//     says NotMine and one holds wildcards, the wildcard below the
//     closest encloser answers as if it were the name, before a forward
//     source is asked or NXDOMAIN is given.
//   - NODATA (name or empty non-terminal without the type) and NXDOMAIN
//     carry the zone's synthesized SOA (serial = max of the sources'
//     serials; TTL and minimum = the TTL of the source that answered, or
//     the last one asked).
//   - At a zone apex, SOA and NS are synthesized unless a source has
//     records of that type there; the apex always exists. ns.dns.<zone>
//     resolves to Options.NSAddrs when no source knows it.
//   - ANY (RFC 8482): only the first RRset present in the source's records
//     (the type of the first record); at an apex without records, the SOA.
//   - SRV, MX and NS answers get their targets' A/AAAA in the additional
//     section, from local sources only (never forwarded).
//   - DO=1 queries of a zone whose only local source holds it signed
//     (Presigned, dnssec.go) get the source's RRSIGs beside every RRset
//     and its NSEC/NSEC3 proofs of denials and wildcard answers.
//   - Answer owner names are the question name as the client wrote it;
//     records whose owner differs (case, wildcards) are copied, others are
//     shared as they are.
//
// Local answers have AA=1 and RA=0. Response.Source is the kind of the
// source whose result decided the query name (Found, Answered, Failed, or
// NotMine without fallthrough); "" when no zone matched or every source
// fell through (NXDOMAIN, or an apex/ns.dns answer synthesized by the
// pipeline alone).
func (p *Pipeline) Resolve(ctx context.Context, req *Request) Response {
	b := req.Buf
	if b == nil {
		b = new(AnswerBuf)
	} else {
		b.Reset()
	}
	m := &b.msg
	m.Response = true
	if req.Msg != nil {
		m.Question = req.Msg.Question
	}
	r := resolution{p: p, ctx: ctx, req: req, buf: b}
	var viewName string
	if p.views != nil {
		if r.view = p.views.pick(req.Client, req.Listen); r.view != nil {
			viewName = r.view.name
		}
	}
	z := r.match(req.Name)
	if z == nil {
		m.Rcode = dns.RcodeRefused
		return Response{Msg: m, View: viewName}
	}
	m.Authoritative = true
	m.Answer = b.rrs[:0]
	if b.answer != nil {
		m.Answer = b.answer[:0]
	}
	resp := Response{Msg: m, Zone: z.name, View: viewName}
	var stamp Stamp
	if req.Stamp && r.view == nil && p.views == nil {
		stamp = Stamp{z: z, serial: z.sourcesSerial()} // before the sources are asked
	}

	owner := req.Name
	if req.Msg != nil && len(req.Msg.Question) > 0 {
		if w := req.Msg.Question[0].Name; w != owner && strings.EqualFold(w, owner) {
			owner = w
		}
	}

	name, qt := req.Name, req.Type
	var seen [MaxCNAMELinks + 1]string
	seen[0] = name
	nseen := 1
	for {
		o := r.ask(z, name, qt, false)
		if nseen == 1 && o.decided {
			resp.Source = o.e.kind
		}
		switch o.status {
		case Failed:
			p.log.LogAttrs(ctx, slog.LevelDebug, "source failed",
				slog.String("zone", z.name), slog.String("name", name),
				slog.String("source", o.e.kind), slog.Any("err", o.err))
			m.Rcode = dns.RcodeServerFailure
			m.Authoritative = false
			m.Answer, m.Ns, m.Extra = nil, nil, failureEDE(o.e, o.err)
			return resp
		case Answered:
			if nseen == 1 {
				resp.Msg = o.msg
				if qt == dns.TypeANY {
					resp.Msg = minimalANY(o.msg)
				} else if o.e.keep != nil && stamp.z != nil && !r.looked {
					if t, age := o.e.keep.Pin(name, qt, req.DO, req.CD, o.msg); t != nil {
						stamp.keep, stamp.token, stamp.age = o.e.keep, t, age
						resp.Stamp = stamp
					}
				}
				return resp
			}
			// End of a chain that left the local zones (or reached a
			// delegation): complete it with that answer, its negative
			// authority or referral, and its additional section — glue,
			// and the OPT whose Extended DNS Errors (stale, busy, the
			// upstream's own) the server passes on. Not its AD bit: the
			// local part of the chain is not validated.
			m.Answer = append(m.Answer, o.msg.Answer...)
			m.Rcode = o.msg.Rcode
			if len(o.msg.Answer) == 0 {
				m.Ns = append(m.Ns, o.msg.Ns...)
			}
			m.Extra = append(m.Extra, o.msg.Extra...)
			return resp
		}
		a0, n0 := len(m.Answer), len(m.Ns)
		cname := r.answer(z, name, owner, qt, &o)
		chase := cname != nil && nseen <= MaxCNAMELinks
		if chase {
			m.Answer = append(m.Answer, withOwner(cname, owner))
		}
		if s := r.presigned(z); s != nil {
			r.sign(s, z, name, owner, &o, a0, n0)
		}
		if !chase {
			break
		}
		target := cname.Target
		tname := strings.ToLower(target)
		if slices.Contains(seen[:nseen], tname) {
			break // loop: the CNAME closing it is in the answer
		}
		nz := r.match(tname)
		if nz == nil {
			break // target in no zone: the client's resolver continues
		}
		seen[nseen] = tname
		nseen++
		z, name, owner = nz, tname, target
	}
	r.additionals()
	if req.Buf != nil && cap(m.Answer) > inlineAnswers && cap(m.Answer) <= keptAnswerSection {
		req.Buf.answer = m.Answer[:0]
	}
	if nseen == 1 && !r.looked && req.Type != dns.TypeANY {
		resp.Stamp = stamp
	}
	return resp
}

// ask queries z's sources about name in order, applying fallthrough.
// localOnly stops at the first forward source (treated as not knowing).
//
// When the local sources asked all say NotMine and one of them has
// wildcards, a wildcard answer is looked for (wildcard) before the
// query goes on to a forward source or ends in NXDOMAIN.
func (r *resolution) ask(z *zone, name string, qtype uint16, localOnly bool) outcome {
	q := &r.buf.q
	q.Name, q.Type, q.Zone = name, qtype, z.name
	q.DO, q.CD = r.req.DO, r.req.CD
	var o outcome
	// ent: the first local source that holds name but no records of
	// the type asked. The name exists, so it is NODATA rather than
	// NXDOMAIN or matched by a wildcard — unless a later local source
	// holds records there (a zone file's apex records below a hosts
	// file's names): records win over another source's empty
	// non-terminal. In the root zone, though, a name a local source
	// holds only as an empty non-terminal (no records of any type: the
	// parents of /etc/hosts names) is the world's, not that source's
	// (example.com MX, com NS): a forward source after it is asked, and
	// anything but its NOERROR (NXDOMAIN, which would deny the names
	// below, a failure, REFUSED when busy) gives way to the local NODATA.
	var ent outcome
	// wild: a local source with wildcards said NotMine since the last
	// wildcard search (a search that found nothing needs repeating only
	// if a later source has wildcards: earlier sources' wildcards lie at
	// or above the closest encloser already found).
	wild := false
	for i := range z.entries {
		e := &z.entries[i]
		if !e.local {
			if ent.e != nil {
				if localOnly || z.name != "." || !r.emptyNonTerminal(ent.e, qtype) {
					return ent
				}
				res := e.src.Lookup(r.ctx, q)
				if res.Status == Answered && res.Msg != nil && res.Msg.Rcode == dns.RcodeSuccess {
					return outcome{status: Answered, msg: res.Msg, e: e, decided: true}
				}
				return ent
			}
			if wild {
				if w, ok := r.wildcard(z, name, i); ok {
					return w
				}
				wild = false
			}
			if localOnly {
				return outcome{status: NotMine, e: e}
			}
		}
		res := e.src.Lookup(r.ctx, q)
		switch res.Status {
		case NotMine:
			o = outcome{status: NotMine, e: e, decided: !e.fallsThrough}
			if e.wild != nil && !wild {
				wild = e.wild.Wildcards()
			}
			if !e.fallsThrough {
				if ent.e != nil {
					return ent
				}
				if wild {
					if w, ok := r.wildcard(z, name, i+1); ok {
						return w
					}
				}
				return o
			}
		case Found:
			if len(res.RRs) > 0 {
				return outcome{status: Found, rrs: res.RRs, e: e, decided: true}
			}
			if ent.e == nil {
				ent = outcome{status: Found, e: e, decided: true}
			}
			if !e.fallsThrough {
				return ent
			}
		case Answered:
			if res.Msg == nil {
				return outcome{status: Failed, err: errNoMsg, e: e, decided: true}
			}
			return outcome{status: Answered, msg: res.Msg, e: e, decided: true}
		case Failed:
			err := res.Err
			if err == nil {
				err = errNoReason
			}
			return outcome{status: Failed, err: err, e: e, decided: true}
		default:
			return outcome{status: Failed, err: fmt.Errorf("source returned unknown status %d", res.Status), e: e, decided: true}
		}
	}
	if ent.e != nil {
		return ent
	}
	if wild {
		if w, ok := r.wildcard(z, name, len(z.entries)); ok {
			return w
		}
	}
	return o
}

// emptyNonTerminal reports whether the local source of entry e, which
// holds the name in r.buf.q but no records of type qtype there, holds
// none of any type: the name is only an ancestor of its names.
func (r *resolution) emptyNonTerminal(e *entry, qtype uint16) bool {
	if qtype == dns.TypeANY {
		return true
	}
	q := &r.buf.q
	q.Type = dns.TypeANY
	res := e.src.Lookup(r.ctx, q)
	q.Type = qtype
	return res.Status == Found && len(res.RRs) == 0
}

// answer fills the message for a Found or NotMine outcome at name. It
// returns the CNAME to chase, if the answer is one, without adding it.
func (r *resolution) answer(z *zone, name, owner string, qt uint16, o *outcome) *dns.CNAME {
	m := &r.buf.msg
	ttl := o.e.src.TTL()
	rrs := o.rrs
	apex := name == z.name
	if o.status == NotMine {
		switch {
		case apex: // the apex always exists
		case name == z.nsName:
			rrs = r.p.nsAddrRRs(owner, z.apexTTL())
		case name == z.nsUp: // exists because nsName does: NODATA
			rrs = nil
		default:
			m.Rcode = dns.RcodeNameError
			r.negative(z, ttl)
			return nil
		}
	}
	if qt == dns.TypeANY {
		switch {
		case len(rrs) > 0:
			r.appendType(rrs, rrs[0].Header().Rrtype, owner)
		case apex:
			m.Answer = append(m.Answer, z.soa(owner, z.apexTTL()))
		default:
			r.negative(z, ttl)
		}
		return nil
	}
	if apex && qt == dns.TypeSOA {
		// The zone's SOA, whichever source holds a SOA record: one
		// serial for the zone, as negative answers and transfers carry,
		// and the TTL a transfer gives it (the first local source's).
		m.Answer = append(m.Answer, z.soa(owner, z.apexTTL()))
		return nil
	}
	if r.appendType(rrs, qt, owner) > 0 {
		return nil
	}
	if apex {
		switch qt {
		case dns.TypeSOA:
			m.Answer = append(m.Answer, z.soa(owner, z.apexTTL()))
			return nil
		case dns.TypeNS:
			m.Answer = append(m.Answer, z.ns(owner, z.apexTTL()))
			return nil
		}
	}
	if qt != dns.TypeCNAME {
		for _, rr := range rrs {
			if c, ok := rr.(*dns.CNAME); ok {
				return c
			}
		}
	}
	r.negative(z, ttl) // NODATA
	return nil
}

// negative adds the zone's SOA to the authority section of a negative
// answer, in the buffer's own slot when the section is empty.
func (r *resolution) negative(z *zone, ttl uint32) {
	m := &r.buf.msg
	if m.Ns == nil {
		m.Ns = r.buf.ns[:0]
	}
	m.Ns = append(m.Ns, z.authSOA(ttl))
}

// appendType adds the records of type t to the answer, owned by owner.
func (r *resolution) appendType(rrs []dns.RR, t uint16, owner string) int {
	m := &r.buf.msg
	n := 0
	for _, rr := range rrs {
		if rr.Header().Rrtype == t {
			m.Answer = append(m.Answer, withOwner(rr, owner))
			n++
		}
	}
	return n
}

// additionals adds the A/AAAA of SRV, MX and NS targets found in local
// sources to the additional section.
func (r *resolution) additionals() {
	m := &r.buf.msg
	for i := 0; i < len(m.Answer); i++ {
		var target string
		switch rr := m.Answer[i].(type) {
		case *dns.SRV:
			target = rr.Target
		case *dns.MX:
			target = rr.Mx
		case *dns.NS:
			target = rr.Ns
		default:
			continue
		}
		if target == "." || target == "" || hasOwner(m.Extra, target) {
			continue
		}
		r.addresses(target)
	}
}

// addresses appends target's A/AAAA records from local sources.
func (r *resolution) addresses(target string) {
	r.looked = true
	name := strings.ToLower(dns.Fqdn(target))
	z := r.match(name)
	if z == nil {
		return
	}
	o := r.ask(z, name, dns.TypeA, true)
	rrs := o.rrs
	switch o.status {
	case Found:
	case NotMine:
		if name != z.nsName {
			return
		}
		rrs = r.p.nsAddrRRs(target, z.apexTTL()) // as when asked for directly
	default:
		return
	}
	m := &r.buf.msg
	for _, rr := range rrs {
		if t := rr.Header().Rrtype; t == dns.TypeA || t == dns.TypeAAAA {
			m.Extra = append(m.Extra, withOwner(rr, target))
		}
	}
}

// withOwner returns rr if its owner is owner, else a copy renamed to owner
// (source records are shared and never mutated).
func withOwner(rr dns.RR, owner string) dns.RR {
	if rr.Header().Name == owner {
		return rr
	}
	c := dns.Copy(rr)
	c.Header().Name = owner
	return c
}

func hasOwner(rrs []dns.RR, name string) bool {
	for _, rr := range rrs {
		if strings.EqualFold(rr.Header().Name, name) {
			return true
		}
	}
	return false
}

// minimalANY keeps an upstream's ANY answer minimal (RFC 8482):
// only the first RRset of the answer section. m is shared (it may be a
// cache entry) and is never modified: a trimmed copy is returned when
// there is anything to trim.
func minimalANY(m *dns.Msg) *dns.Msg {
	if len(m.Answer) < 2 {
		return m
	}
	h := m.Answer[0].Header()
	keep := make([]dns.RR, 0, len(m.Answer))
	for _, rr := range m.Answer {
		if rh := rr.Header(); rh.Rrtype == h.Rrtype && strings.EqualFold(rh.Name, h.Name) {
			keep = append(keep, rr)
		}
	}
	if len(keep) == len(m.Answer) {
		return m
	}
	c := *m
	c.Answer = keep
	return &c
}

// failureEDE says why a source failed, as an Extended DNS Error (RFC 8914)
// in an OPT for the server to pass on: 22 No Reachable Authority when no
// upstream answered (or a secondary zone expired: no primary did); else
// 14 Not Ready for a source that has not (or no longer) synced, whatever
// the cause. The text names the source kind,
// never an address or a secret. Other failures carry none.
func failureEDE(e *entry, err error) []dns.RR {
	if errors.Is(err, ErrUnreachable) {
		opt := EDE(dns.ExtendedErrorCodeNoReachableAuthority, e.kind+": no upstream answered")
		var theirs UpstreamEDEs
		if errors.As(err, &theirs) {
			for _, x := range theirs {
				opt.Option = append(opt.Option, x)
			}
		}
		return []dns.RR{opt}
	}
	if sy, ok := e.src.(Syncer); ok && !sy.Synced() {
		return []dns.RR{EDE(dns.ExtendedErrorCodeNotReady, e.kind+": not synced yet")}
	}
	return nil
}
