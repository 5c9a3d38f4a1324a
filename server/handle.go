package server

import (
	"context"
	"errors"
	"hash/maphash"
	"net/netip"
	"slices"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"

	"github.com/dnsd/dnsd/authority"
	"github.com/dnsd/dnsd/pipeline"
)

// transport is the protocol a query arrived on.
type transport uint8

const (
	protoUDP transport = iota
	protoTCP
	protoTLS
	protoHTTPS
)

func (t transport) String() string {
	switch t {
	case protoTCP:
		return "tcp"
	case protoTLS:
		return "tls"
	case protoHTTPS:
		return "https"
	}
	return "udp"
}

// packBufSize holds the largest DNS message plus the TCP length prefix.
// miekg/dns needs one spare byte beyond the uncompressed length, so
// responses whose uncompressed form exceeds this make it allocate.
const packBufSize = 2 + dns.MaxMsgSize + 1

// scratch is per-query working memory, reused through pools: the response
// being assembled (a shallow copy of the pipeline's, so its sections are
// never written), its additional section and our OPT record.
type scratch struct {
	q      parsedQuery
	req    pipeline.Request
	ans    pipeline.AnswerBuf // lent to the resolver: a typical answer allocates nothing
	kept   *keptAnswer        // the kept answer reused for this query, if it was
	aged   uint32             // seconds its TTLs were lowered by
	out    dns.Msg
	listen string      // the listen entry of the query's socket ("udp 127.0.0.1:53"), set by the caller
	answer []dns.RR    // rotated answer section (rotate: true)
	ede    []dns.EDNS0 // Extended DNS Errors for our OPT
	extra  []dns.RR
	opt    dns.OPT
	pack   *[]byte // from Server.packs while a packed response is held
	names  compressor
	// sign: the query was TSIG-signed with this key (verified); finish
	// signs the response, covering signMAC, the query's MAC.
	sign    *authority.TSIGKey
	signMAC string
	signErr uint16 // a TSIG error the signed response carries (BADTIME)
}

// release returns the pack buffer and drops references to records.
func (s *Server) release(sc *scratch) {
	if sc.pack != nil {
		s.packs.Put(sc.pack)
		sc.pack = nil
	}
	clear(sc.extra)
	sc.extra = sc.extra[:0]
	clear(sc.answer)
	sc.answer = sc.answer[:0]
	clear(sc.ede)
	sc.ede = sc.ede[:0]
	sc.opt = dns.OPT{}
	sc.sign, sc.signMAC, sc.signErr = nil, "", 0
	sc.out = dns.Msg{}
	sc.req = pipeline.Request{}
	sc.ans.Reset()
	sc.kept = nil
	sc.q.msg = dns.Msg{}
	sc.q.extra[0] = nil
}

// serveRaw turns one query's bytes into response bytes; nil means send
// nothing. The returned slice lives in sc's pack buffer, preceded by two
// spare bytes (for the TCP length prefix), until s.release(sc). It never
// panics: a panic while answering is recovered and answered SERVFAIL (see
// recovered). An Observation is sent for every call.
func (s *Server) serveRaw(ctx context.Context, sc *scratch, proto transport, client netip.Addr, loopbackListener bool, in []byte) (resp []byte) {
	start := time.Now()
	obs := Observation{Proto: proto.String(), Client: client, Rcode: -1}
	// What a SERVFAIL after a panic needs; set as soon as it is known.
	var (
		q       *dns.Msg
		qopt    *dns.OPT
		st      *settings
		maxSize int
	)
	defer func() {
		if r := recover(); r != nil {
			resp = s.recovered(sc, &obs, r, q, qopt, st, maxSize)
		}
		if s.observer != nil {
			if resp == nil {
				obs.Dropped, obs.Rcode, obs.Truncated = true, -1, false
			}
			obs.Duration = time.Since(start)
			s.observer.Observe(obs)
		}
	}()

	sc.q.names = s.names
	parsed, lower, ok := sc.parseQuery(in)
	if !ok || parsed.Response {
		obs.DropReason = DropMalformed
		return nil
	}
	q = parsed
	if len(q.Question) == 1 {
		obs.Name = lower
		obs.Qtype = q.Question[0].Qtype
	}
	// The generation answers the whole query: settings and resolver.
	g := s.set.gen()
	st = g.set

	// EDNS0: the client's OPT and the UDP size we may use for the answer.
	nopt := 0
	for _, rr := range q.Extra {
		if o, ok := rr.(*dns.OPT); ok {
			qopt = o
			nopt++
		}
	}
	maxSize = dns.MaxMsgSize
	if proto == protoUDP {
		maxSize = dns.MinMsgSize
		if qopt != nil {
			// At most what a datagram can carry (65,507 bytes over IPv4),
			// so that only a stream's answers have the full 64 KiB.
			maxSize = max(dns.MinMsgSize, min(int(qopt.UDPSize()), st.udpBuffer, maxDatagram))
		}
	}

	// Every UDP answer counts against the client's rate, REFUSED ones
	// included: a refused answer must not be a free reflector.
	allowed := st.acl.allowed(client, loopbackListener)
	if !allowed && proto == protoUDP && st.acl.drop {
		obs.DropReason = DropACL
		return nil
	}
	if proto == protoUDP && st.rate > 0 && !s.limiter.allow(client, st.rate, start) {
		if st.rateDrop {
			obs.DropReason = DropRate
			return nil
		}
		out := s.reply(sc, q, dns.RcodeSuccess)
		out.Truncated = true
		return s.finish(sc, &obs, out, qopt, st, maxSize)
	}
	if !allowed {
		out := s.reply(sc, q, dns.RcodeRefused)
		out.Extra = prohibited
		return s.finish(sc, &obs, out, qopt, st, maxSize)
	}
	if q.Opcode == dns.OpcodeNotify {
		return s.finish(sc, &obs, s.notifyIn(sc, &obs, q, in), qopt, st, maxSize)
	}
	if q.Opcode == dns.OpcodeUpdate {
		return s.finish(sc, &obs, s.update(ctx, sc, &obs, q, in, start), qopt, st, maxSize)
	}

	if ts := q.IsTsig(); ts != nil {
		// A signed query (a secondary's SOA check): verify it with the
		// transfer key of that name; the answer is signed in finish.
		if rcode, tsigErr := s.verifyQuery(sc, ts, in); rcode != dns.RcodeSuccess {
			out := s.reply(sc, q, rcode)
			if sc.sign == nil { // BADTIME is signed in finish, the rest not
				out = authority.WithError(out, q, ts, tsigErr)
			}
			return s.finish(sc, &obs, out, qopt, st, maxSize)
		}
	}

	var rcode int
	switch {
	case len(q.Question) != 1 || nopt > 1 || (qopt != nil && qopt.Hdr.Name != "."):
		rcode = dns.RcodeFormatError
	case q.Opcode != dns.OpcodeQuery:
		rcode = dns.RcodeNotImplemented
	case metaType(q.Question[0].Qtype):
		rcode = dns.RcodeFormatError
	case q.Question[0].Qtype == dns.TypeMAILA || q.Question[0].Qtype == dns.TypeMAILB:
		rcode = dns.RcodeNotImplemented
	case q.Question[0].Qclass != dns.ClassINET:
		rcode = dns.RcodeRefused
	case qopt != nil && qopt.Version() != 0:
		rcode = dns.RcodeBadVers
	case q.Question[0].Qtype == dns.TypeAXFR || q.Question[0].Qtype == dns.TypeIXFR:
		// Not over TCP (those never come here): refused, and counted as
		// the refused transfer it is, under its zone when it is listed.
		rcode = dns.RcodeRefused
		if g.auth != nil {
			obs.Zone = g.auth.TransferZone(obs.Name)
		}
		if s.observer != nil {
			s.observer.Transfer(obs.Zone, TransferRefused)
		}
	default:
		return s.resolve(ctx, sc, &obs, q, qopt, g, maxSize, start)
	}
	return s.finish(sc, &obs, s.reply(sc, q, rcode), qopt, st, maxSize)
}

// errTooLarge: an answer that does not fit in a DNS message (64 KiB).
var errTooLarge = errors.New("the answer does not fit in 64 KiB")

// maxDatagram is the largest UDP payload over IPv4 (65,535 less the IP
// and UDP headers).
const maxDatagram = 65507

// prohibited says why an ACL-refused client gets REFUSED: Extended DNS
// Error 18 (Prohibited). Shared, never written.
var prohibited = []dns.RR{pipeline.EDE(dns.ExtendedErrorCodeProhibited, "")}

// metaType reports the types that may not appear in a question: type 0,
// OPT (RFC 6891), TKEY and TSIG (they travel in other sections).
func metaType(t uint16) bool {
	return t == dns.TypeNone || t == dns.TypeOPT || t == dns.TypeTKEY || t == dns.TypeTSIG
}

// reply makes sc.out an empty response to q with rcode.
func (s *Server) reply(sc *scratch, q *dns.Msg, rcode int) *dns.Msg {
	out := &sc.out
	*out = dns.Msg{}
	out.Id = q.Id
	out.Response = true
	out.Opcode = q.Opcode
	out.RecursionDesired = q.RecursionDesired
	out.CheckingDisabled = q.CheckingDisabled
	out.Rcode = rcode
	if len(q.Question) == 1 {
		out.Question = q.Question
	}
	return out
}

func (s *Server) resolve(ctx context.Context, sc *scratch, obs *Observation, q *dns.Msg, qopt *dns.OPT, g *Generation, maxSize int, now time.Time) []byte {
	s.faults.beforeResolve(obs.Name)
	st := g.set
	key, keep := s.answerKey(sc, q, qopt, g)
	if keep {
		if b := s.reuse(sc, &key, q, obs, g.fresh, now); b != nil {
			return b
		}
	}
	sc.req = pipeline.Request{
		Msg:    q,
		Name:   obs.Name,
		Type:   q.Question[0].Qtype,
		DO:     qopt != nil && qopt.Do(),
		CD:     q.CheckingDisabled,
		Client: obs.Client,
		Listen: sc.listen,
		Buf:    &sc.ans,
		Stamp:  keep,
	}
	r := g.res.Resolve(ctx, &sc.req)
	obs.Zone, obs.Source, obs.View = r.Zone, r.Source, r.View
	if r.Msg == nil {
		return s.finish(sc, obs, s.reply(sc, q, dns.RcodeServerFailure), qopt, st, maxSize)
	}
	out := &sc.out
	*out = *r.Msg // shallow: sections are resliced, never written
	out.Id = q.Id
	out.Response = true
	out.Opcode = dns.OpcodeQuery
	out.Question = q.Question
	out.RecursionDesired = q.RecursionDesired
	out.CheckingDisabled = q.CheckingDisabled
	if st.rotate && len(out.Answer) > 1 {
		out.Answer = rotateAnswer(&sc.answer, out.Answer, s.rotors.step(obs.Name, q.Question[0].Qtype))
	}
	b := s.finish(sc, obs, out, qopt, st, maxSize)
	if keep && b != nil {
		s.keep(sc, &key, &r, b, obs, now)
	}
	return b
}

// rotorSlots is how many rotation counters a server keeps (16 KiB).
const rotorSlots = 4096

// rotors are the counters of answer rotation (rotate: true), round robin
// per name: each response for a question advances the counter of its
// name and type, so a name's addresses take turns first whatever other
// names — or the other address type of the same name, as a dual-stack
// client asks A and AAAA together — are asked in between. Names are
// spread over the slots by a hash; two names sharing a slot advance each
// other's turn, which only matters if just those two are asked in turn.
type rotors struct {
	seed  maphash.Seed
	slots [rotorSlots]atomic.Uint32
}

// step is the next rotation step for name (lower case) and qtype.
func (r *rotors) step(name string, qtype uint16) uint32 {
	return r.slots[r.slot(name, qtype)].Add(1)
}

// slot is the counter name (lower case) and qtype turn.
func (r *rotors) slot(name string, qtype uint16) uint64 {
	return (maphash.String(r.seed, name) ^ uint64(qtype)*0x9E3779B97F4A7C15) % rotorSlots
}

// rotateAnswer copies answer into *buf (reused between queries: no
// allocation once it has grown) and rotates each run of A or AAAA records
// of one owner by step positions, so successive responses put each address
// first in turn. Other records keep their places.
func rotateAnswer(buf *[]dns.RR, answer []dns.RR, step uint32) []dns.RR {
	out := append((*buf)[:0], answer...)
	*buf = out
	for i := 0; i < len(out); {
		h := out[i].Header()
		j := i + 1
		if h.Rrtype == dns.TypeA || h.Rrtype == dns.TypeAAAA {
			for j < len(out) && out[j].Header().Rrtype == h.Rrtype && out[j].Header().Name == h.Name {
				j++
			}
			if n := j - i; n > 1 {
				rotateLeft(out[i:j], int(step%uint32(n)))
			}
		}
		i = j
	}
	return out
}

// rotateLeft rotates s left by k in place (three reversals).
func rotateLeft(s []dns.RR, k int) {
	if k == 0 {
		return
	}
	slices.Reverse(s[:k])
	slices.Reverse(s[k:])
	slices.Reverse(s)
}

// finish sets out's EDNS0 (our OPT when the query had one, any other OPT
// removed) and packs it into a pooled buffer, its names compressed,
// truncated to maxSize when even so it does not fit.
// The Extended DNS Errors of an OPT in out (the pipeline's or an
// upstream's reason for the answer) go into our OPT; a client without
// EDNS0 gets neither.
func (s *Server) finish(sc *scratch, obs *Observation, out *dns.Msg, qopt *dns.OPT, st *settings, maxSize int) []byte {
	sc.extra = sc.extra[:0]
	sc.ede = sc.ede[:0]
	for _, rr := range out.Extra {
		opt, ok := rr.(*dns.OPT)
		if !ok {
			sc.extra = append(sc.extra, rr)
			continue
		}
		for _, o := range opt.Option {
			if o.Option() == dns.EDNS0EDE {
				sc.ede = append(sc.ede, o)
			}
		}
	}
	if qopt != nil {
		sc.opt = dns.OPT{Hdr: dns.RR_Header{Name: ".", Rrtype: dns.TypeOPT, Class: uint16(st.udpBuffer)}, Option: sc.ede}
		if qopt.Do() {
			sc.opt.SetDo()
		}
		sc.extra = append(sc.extra, &sc.opt)
	}
	out.Extra = sc.extra
	if qopt == nil && out.Rcode > 0xF {
		out.Rcode = dns.RcodeServerFailure // an extended rcode needs an OPT
	}
	if sc.pack == nil {
		sc.pack = s.packs.Get().(*[]byte)
	}
	var (
		b   []byte
		err error
	)
	if sc.sign != nil {
		// The signature covers the bytes as packed: the library
		// compresses them before signing.
		if maxSize < dns.MaxMsgSize {
			out.Truncate(maxSize)
		}
		if out.Compress = true; out.Len() > dns.MaxMsgSize {
			err = errTooLarge
		} else {
			b, err = s.signed(sc, out)
		}
	} else {
		b, err = sc.packCompressed(out, maxSize, (*sc.pack)[2:])
	}
	if err != nil {
		s.log.Debug("cannot pack response, answering SERVFAIL", "name", obs.Name, "qtype", obs.Qtype, "err", err)
		q := &dns.Msg{MsgHdr: out.MsgHdr, Question: out.Question}
		out = s.reply(sc, q, dns.RcodeServerFailure)
		if qopt != nil {
			out.Extra = append(sc.extra[:0], &sc.opt)
		}
		if b, err = out.PackBuffer((*sc.pack)[2:]); err != nil {
			return nil
		}
	}
	obs.Rcode = out.Rcode
	obs.Truncated = out.Truncated
	return b
}
