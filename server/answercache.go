package server

import (
	"bytes"
	"encoding/binary"
	"hash/maphash"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"

	"github.com/dnsd/dnsd/pipeline"
)

// The packed-answer cache. Most queries repeat a question answered a
// moment ago from data that has not changed since; for those the server
// copies the response it packed then, with the query's ID and RD bit,
// instead of resolving and packing again. An answer is kept only when it
// cannot differ from the one a new resolution would make:
//
//   - the resolver stamped it (pipeline.Stamp: one zone's sources, no
//     views, no CNAME followed, no additional records) and still says the
//     stamp is fresh (same generation, the zone's serial unmoved, a
//     forward source answering from the same cache entry) when it is
//     reused; a forwarded answer's TTLs count down as its cache entry
//     ages, so the reused copy has each TTL lowered by the seconds the
//     resolver says it aged;
//   - the query was of the plain shape the fast parser reads (no EDNS
//     options, no TSIG), its name all lower case (the response echoes the
//     client's spelling; mixed-case names are answered the long way);
//   - the response is at most 512 bytes (no client's buffer truncates
//     it), unsigned, NOERROR or NXDOMAIN, and answers are not rotated.
//
// The key is the name, type, EDNS presence, DO and CD bits and the
// server's settings (a reload of them starts afresh). A question hashes
// to a set of answerWays slots. Its answer is kept when it misses while
// its hash is still among the last answerWays misses of the set (so a
// flood of names asked once each churns no memory), and for at most
// answerMaxAge whatever its stamp says (between half of it and all of it,
// by the question's hash, so that answers kept at one moment do not all
// expire at the next); a forwarded answer that a rebuild found unchanged
// but for its TTLs, for at most answerAgedMaxAge. Reads are lock-free: a
// slot holds an immutable entry behind an atomic pointer.
//
// The interned question name (parse.go) points at the answer last kept
// for it (one per parity of the type), and reuse looks there first: the
// name's entry has just been read to decode the question, while the set
// is a memory line of its own that a large working set misses. An answer
// replaced in its set is unhooked from its name, so the pointers keep
// nothing the cache has let go of.
//
// Eight ways: names asked in turn (a working set cycling through its
// members) all miss, every time, in a set that more of them hash to than
// it has ways; with eight, that takes nine names in one set, which is rare
// for working sets of tens of thousands of names.
const (
	answerSets   = 1 << 13
	answerWays   = 8 // a new answer takes the set's ways in turn
	answerMaxAge = 5 * time.Second
	// answerAgedMaxAge bounds a forwarded answer once a rebuild has found
	// it the same (see keep): between half of it and all of it.
	answerAgedMaxAge = 4 * answerMaxAge
)

type answerKey struct {
	name  string // lower case
	qtype uint16
	flags uint8 // answerEDNS, answerDO, answerCD
	st    *settings
}

const (
	answerEDNS = 1 << iota
	answerDO
	answerCD
)

type keptAnswer struct {
	hash uint64
	key  answerKey
	// name is the interned name whose kept pointer may point here; a
	// replaced entry is unhooked from it, so an interned name holds no
	// answer the cache has let go of.
	name  *internedName
	stamp pipeline.Stamp
	// until: kept no longer than this (Unix nanoseconds). The one field
	// written after the entry is published: a rebuilt answer identical to
	// the entry extends it in place instead of allocating a new entry.
	until  atomic.Int64
	wire   []byte // the packed response
	zone   string
	src    string
	view   string
	rcode  int
	ttl    uint32 // the smallest TTL of its records (DoH's Cache-Control)
	hasTTL bool
	// ttls are the offsets in wire of its records' TTLs (not the OPT's),
	// when the stamp ages (pipeline.Stamp.Ages).
	ttls []uint16
}

type answerCache struct {
	seed maphash.Seed
	// maxAge is answerMaxAge (a test's working set may outlast it on a
	// slow machine: it raises it).
	maxAge time.Duration
	slots  [answerSets][answerWays]atomic.Pointer[keptAnswer]
	// missed are, per set, the hashes of the last questions that missed
	// there: a question is kept when it misses again while still here.
	missed [answerSets][answerWays]atomic.Uint64
	// next is, per set, the way the next kept answer takes; nextMiss the
	// place in missed of the next miss. Two counters: with one, a question
	// kept at its second miss in a row (miss, then keep: two steps) would
	// only ever take every other way, and its misses every other place.
	next     [answerSets]atomic.Uint32
	nextMiss [answerSets]atomic.Uint32
}

// newAnswerCache returns an empty cache. Answers are kept only for a
// generation whose resolver can tell whether a stamp is fresh.
func newAnswerCache() *answerCache {
	return &answerCache{seed: maphash.MakeSeed(), maxAge: answerMaxAge}
}

func (c *answerCache) hash(k *answerKey) uint64 {
	return maphash.String(c.seed, k.name) ^ uint64(k.qtype)<<8 ^ uint64(k.flags)
}

// key reports the key of q and whether its answer may be kept.
func (s *Server) answerKey(sc *scratch, q *dns.Msg, qopt *dns.OPT, g *Generation) (answerKey, bool) {
	st := g.set
	if s.answers == nil || g.fresh == nil || !sc.q.plain || sc.q.name != sc.q.lower || st.rotate || sc.sign != nil {
		return answerKey{}, false
	}
	k := answerKey{name: sc.q.lower, qtype: q.Question[0].Qtype, st: st}
	if qopt != nil {
		k.flags |= answerEDNS
		if qopt.Do() {
			k.flags |= answerDO
		}
	}
	if q.CheckingDisabled {
		k.flags |= answerCD
	}
	return k, true
}

// reuse writes the kept answer to k into sc's pack buffer with q's ID and
// RD bit and fills obs as the resolution would have; nil when none is
// kept or it is no longer fresh (by fresh, the query's generation).
func (s *Server) reuse(sc *scratch, k *answerKey, q *dns.Msg, obs *Observation, fresh pipeline.Freshness, now time.Time) []byte {
	c := s.answers
	var e *keptAnswer
	if n := sc.q.entry; n != nil {
		if x := n.keptFor(k.qtype).Load(); x != nil && x.key == *k {
			e = x
		}
	}
	if e == nil {
		h := c.hash(k)
		set := &c.slots[h%answerSets]
		for i := range set {
			if x := set[i].Load(); x != nil && x.hash == h && x.key == *k {
				e = x
				break
			}
		}
	}
	if e == nil || now.UnixNano() > e.until.Load() {
		return nil
	}
	aged, ok := fresh.Fresh(e.stamp)
	if !ok {
		return nil
	}
	if sc.pack == nil {
		sc.pack = s.packs.Get().(*[]byte)
	}
	b := (*sc.pack)[2 : 2+len(e.wire)]
	copy(b, e.wire)
	b[0], b[1] = byte(q.Id>>8), byte(q.Id)
	if q.RecursionDesired {
		b[2] |= 1
	} else {
		b[2] &^= 1
	}
	if aged > 0 {
		for _, off := range e.ttls {
			ttl := binary.BigEndian.Uint32(b[off:])
			binary.BigEndian.PutUint32(b[off:], ttl-min(ttl, aged))
		}
	}
	obs.Zone, obs.Source, obs.View = e.zone, e.src, e.view
	obs.Rcode, obs.Truncated = e.rcode, false
	sc.kept, sc.aged = e, aged
	return b
}

// keep stores out, the response just packed for k, when the resolver
// stamped it and it qualifies (see above).
func (s *Server) keep(sc *scratch, k *answerKey, r *pipeline.Response, out []byte, obs *Observation, now time.Time) {
	if r.Stamp == (pipeline.Stamp{}) || len(out) > dns.MinMsgSize || len(out) < 12 || obs.Truncated || sc.sign != nil ||
		(obs.Rcode != dns.RcodeSuccess && obs.Rcode != dns.RcodeNameError) {
		return
	}
	c := s.answers
	h := c.hash(k)
	i := h % answerSets
	set := &c.slots[i]
	way := -1
	until := keptUntil(now, h, c.maxAge)
	for j := range set { // a stale answer to the same question is replaced at once
		if x := set[j].Load(); x != nil && x.hash == h && x.key == *k {
			if aged, ok := x.same(r.Stamp, out, obs); ok { // rebuilt as it was (it aged out): kept longer
				if aged > 0 {
					// The same cache entry, only older: up to
					// answerAgedMaxAge, since each such rebuild has the
					// forward cache render its records anew (an
					// allocation per question, a collection every few
					// seconds under a steady load) only to find the
					// answer unchanged.
					until = keptUntil(now, h, c.maxAge*(answerAgedMaxAge/answerMaxAge))
				}
				x.until.Store(until)
				if n := x.name; n != nil && n == sc.q.entry {
					n.keptFor(k.qtype).Store(x)
				}
				return
			}
			way = j
			break
		}
	}
	if way < 0 {
		seen := false
		for j := range c.missed[i] {
			if c.missed[i][j].Load() == h {
				seen = true
				break
			}
		}
		if !seen { // first miss: kept if it comes again
			c.missed[i][c.nextMiss[i].Add(1)%answerWays].Store(h)
			return
		}
		way = int(c.next[i].Add(1) % answerWays)
	}
	e := &keptAnswer{
		hash: h, key: *k, name: sc.q.entry, stamp: r.Stamp, wire: append([]byte(nil), out...),
		zone: obs.Zone, src: obs.Source, view: obs.View, rcode: obs.Rcode,
	}
	e.until.Store(until)
	e.ttl, e.hasTTL = minTTL(&sc.out)
	if r.Stamp.Ages() {
		var ok bool
		if e.ttls, ok = ttlOffsets(e.wire); !ok {
			return
		}
	}
	if old := set[way].Swap(e); old != nil && old.name != nil {
		old.name.keptFor(old.key.qtype).CompareAndSwap(old, nil)
	}
	if e.name != nil {
		e.name.keptFor(k.qtype).Store(e)
	}
}

// keptUntil is when an answer kept at now is to be resolved again: between
// half of limit and all of it, by its question's hash h.
func keptUntil(now time.Time, h uint64, limit time.Duration) int64 {
	return now.Add(limit/2 + time.Duration(h%uint64(limit/2))).UnixNano()
}

// same reports whether out, packed for a query with another ID and RD
// bit, with stamp and obs, is the answer e holds, and by how many seconds
// it aged since e was kept: 0 when it was rebuilt as it was; more for a
// forwarded answer rebuilt from the same cache entry, every TTL lowered
// by that. e then stays as it is (reuse lowers its TTLs as the entry
// ages), and no new entry is allocated.
func (e *keptAnswer) same(stamp pipeline.Stamp, out []byte, obs *Observation) (aged uint32, ok bool) {
	aged, ok = e.stamp.Since(stamp)
	w := e.wire
	if !ok || (aged > 0 && !e.stamp.Ages()) || len(out) != len(w) || len(w) < 12 || out[2]&^1 != w[2]&^1 ||
		e.zone != obs.Zone || e.src != obs.Source || e.view != obs.View || e.rcode != obs.Rcode {
		return 0, false
	}
	from := 3
	for _, off := range e.ttls {
		at := int(off)
		if !bytes.Equal(out[from:at], w[from:at]) {
			return 0, false
		}
		ttl := binary.BigEndian.Uint32(w[at:])
		if binary.BigEndian.Uint32(out[at:]) != ttl-min(ttl, aged) {
			return 0, false
		}
		from = at + 4
	}
	return aged, bytes.Equal(out[from:], w[from:])
}

// responseTTL is the smallest TTL of the records of the response sc holds
// (built, or kept and reused).
func (sc *scratch) responseTTL() (uint32, bool) {
	if sc.kept != nil {
		return sc.kept.ttl - min(sc.kept.ttl, sc.aged), sc.kept.hasTTL
	}
	return minTTL(&sc.out)
}

// ttlOffsets lists the offsets of the TTLs of the records of the packed
// message m, leaving out the OPT pseudo-record (its TTL field holds flags);
// false when m does not parse.
func ttlOffsets(m []byte) ([]uint16, bool) {
	if len(m) < 12 || len(m) > 0xffff {
		return nil, false
	}
	count := func(i int) int { return int(binary.BigEndian.Uint16(m[i:])) }
	off := 12
	for range count(4) { // the question
		if off = skipName(m, off); off < 0 || off+4 > len(m) {
			return nil, false
		}
		off += 4
	}
	n := count(6) + count(8) + count(10)
	offs := make([]uint16, 0, n)
	for range n {
		if off = skipName(m, off); off < 0 || off+10 > len(m) {
			return nil, false
		}
		if count(off) != int(dns.TypeOPT) {
			offs = append(offs, uint16(off+4))
		}
		off += 10 + count(off+8)
		if off > len(m) {
			return nil, false
		}
	}
	return offs, off == len(m)
}

// skipName returns the offset just past the (possibly compressed) name at
// off in m, or -1.
func skipName(m []byte, off int) int {
	for off < len(m) {
		switch l := int(m[off]); {
		case l == 0:
			return off + 1
		case l&0xc0 == 0xc0:
			if off+2 > len(m) {
				return -1
			}
			return off + 2
		case l&0xc0 != 0:
			return -1
		default:
			off += 1 + l
		}
	}
	return -1
}
