package server

import (
	"encoding/binary"
	"hash/maphash"
	"strings"
	"sync/atomic"

	"github.com/miekg/dns"
)

// The fast query parser. Almost every query is a 12-byte header, one
// question whose name is plain letters, digits and hyphens without
// compression, and at most one OPT record without options. parseQuery
// decodes exactly that shape into the scratch's message without
// allocating (the name strings are reused while the same name repeats);
// anything else — compression pointers, escaped label bytes, other
// records, EDNS options, short or odd packets — goes to miekg/dns Unpack,
// so the result is always what Unpack would have produced.
// FuzzServeRaw checks the two against each other.

// parsedQuery is the parsed query and its storage, part of a scratch.
type parsedQuery struct {
	msg      dns.Msg
	question [1]dns.Question
	extra    [1]dns.RR
	opt      dns.OPT

	// The last name decoded on this scratch, in wire form, as miekg/dns
	// presents it and in lower case: repeated names cost no allocation.
	wire  []byte
	name  string
	lower string
	// entry is name's entry in the names table (nil when not interned):
	// where the answers kept for it are found first.
	entry *internedName
	// plain: the last query had the fast parser's shape (no EDNS options,
	// no TSIG, plain labels).
	plain bool
	// names, when set, interns the decoded names across goroutines.
	names *nameTable
}

// The table of interned names: nameSets sets of nameWays names.
// Eight ways for the reason the answer cache has eight (answercache.go).
const (
	nameSets = 1 << 13
	nameWays = 8
)

// nameTable interns the question names the fast parser decodes, for every
// goroutine of a server: a name asked lately costs no allocation, so a
// server answering a working set of names allocates nothing per query.
// A name hashes (by its wire form) to a set of nameWays slots, each with a
// tag (bits of the hash) read before the name itself; a new name takes
// the set's slots in turn. Strings are immutable, so an interned name is
// shared freely; a tag and its name are stored apart, so a reader always
// compares the name too.
type nameTable struct {
	seed maphash.Seed
	sets [nameSets]nameSet
}

type nameSet struct {
	tags  [nameWays]atomic.Uint32
	names [nameWays]atomic.Pointer[internedName]
	next  atomic.Uint32
}

type internedName struct {
	name, lower string
	// kept points at answers kept for this name (answercache.go), one per
	// parity of the question type (A and AAAA both find theirs): a
	// question asked again finds its answer here, without the answer
	// cache's set, whose line is a cache miss of its own at every query.
	kept [2]atomic.Pointer[keptAnswer]
}

// keptFor is where the answer kept for this name and qtype is pointed at.
func (n *internedName) keptFor(qtype uint16) *atomic.Pointer[keptAnswer] { return &n.kept[qtype&1] }

func newNameTable() *nameTable { return &nameTable{seed: maphash.MakeSeed()} }

// parseQuery fills sc.q.msg from in. It reports false when miekg/dns
// Unpack would fail. lower is the question name in lower case when the
// message has exactly one question.
func (sc *scratch) parseQuery(in []byte) (q *dns.Msg, lower string, ok bool) {
	if q, lower, ok := sc.q.fast(in); ok {
		sc.q.plain = true
		return q, lower, true
	}
	sc.q.plain = false
	q = &sc.q.msg
	*q = dns.Msg{}
	if err := q.Unpack(in); err != nil {
		// An EDNS option miekg/dns cannot decode (an empty ZONEVERSION,
		// RFC 9660, which clients send to ask for it; an option of a
		// length its type does not allow) fails the whole message. dnsd
		// uses no option of a query: answer it as if it had none.
		stripped := optionsStripped(in)
		*q = dns.Msg{}
		if stripped == nil || q.Unpack(stripped) != nil {
			return nil, "", false
		}
	}
	// miekg/dns stops a section at the message's end and takes its count
	// for a lie; a message shorter than its header says (a header alone
	// that claims a question) is unparseable: dropped, never answered.
	if len(in) >= 12 && (int(binary.BigEndian.Uint16(in[4:])) != len(q.Question) ||
		int(binary.BigEndian.Uint16(in[6:])) != len(q.Answer) ||
		int(binary.BigEndian.Uint16(in[8:])) != len(q.Ns) ||
		int(binary.BigEndian.Uint16(in[10:])) != len(q.Extra)) {
		return nil, "", false
	}
	if len(q.Question) == 1 {
		lower = sc.q.lowerOf(q.Question[0].Name)
	}
	return q, lower, true
}

// optionsStripped returns a copy of msg whose OPT record carries no
// options, or nil when msg has no OPT record with options, is not well
// formed up to it, or its options do not exactly fill the record (each a
// code, a length and that many bytes): a message broken there stays
// unparseable. Compression pointers point backwards, so nothing before
// the options moves.
func optionsStripped(msg []byte) []byte {
	if len(msg) < 12 {
		return nil
	}
	off := 12
	for range int(binary.BigEndian.Uint16(msg[4:])) {
		if off = skipName(msg, off); off < 0 || off+4 > len(msg) {
			return nil
		}
		off += 4
	}
	records := int(binary.BigEndian.Uint16(msg[6:])) + int(binary.BigEndian.Uint16(msg[8:]))
	extra := int(binary.BigEndian.Uint16(msg[10:]))
	for i := range records + extra {
		if off = skipName(msg, off); off < 0 || off+10 > len(msg) {
			return nil
		}
		rdlen := int(binary.BigEndian.Uint16(msg[off+8:]))
		end := off + 10 + rdlen
		if end > len(msg) {
			return nil
		}
		if i >= records && binary.BigEndian.Uint16(msg[off:]) == dns.TypeOPT && rdlen > 0 {
			o := off + 10
			for o+4 <= end {
				o += 4 + int(binary.BigEndian.Uint16(msg[o+2:]))
			}
			if o != end {
				return nil
			}
			out := make([]byte, 0, len(msg)-rdlen)
			out = append(out, msg[:off+8]...)
			out = append(out, 0, 0)
			return append(out, msg[end:]...)
		}
		off = end
	}
	return nil
}

// lowerOf returns name in lower case, reusing the cached string.
func (p *parsedQuery) lowerOf(name string) string {
	if name == p.name {
		return p.lower
	}
	return strings.ToLower(name)
}

// fast decodes the common shape; ok false means "use Unpack", never
// "invalid".
func (p *parsedQuery) fast(in []byte) (*dns.Msg, string, bool) {
	if len(in) < 12+1+4 {
		return nil, "", false
	}
	qd := binary.BigEndian.Uint16(in[4:])
	an := binary.BigEndian.Uint16(in[6:])
	ns := binary.BigEndian.Uint16(in[8:])
	ar := binary.BigEndian.Uint16(in[10:])
	if qd != 1 || an != 0 || ns != 0 || ar > 1 {
		return nil, "", false
	}
	// The question name: plain labels only, at most 254 wire octets
	// including the final zero (miekg/dns's limit).
	off := 12
	for {
		if off >= len(in) {
			return nil, "", false
		}
		c := int(in[off])
		if c == 0 {
			off++
			break
		}
		if c > 63 || off+1+c > len(in) || off+1+c-12 > 254 {
			return nil, "", false
		}
		for _, b := range in[off+1 : off+1+c] {
			if !plainLabelByte(b) {
				return nil, "", false
			}
		}
		off += 1 + c
	}
	wire := in[12:off]
	if len(wire) > 254 || off+4 > len(in) {
		return nil, "", false
	}
	qtype := binary.BigEndian.Uint16(in[off:])
	qclass := binary.BigEndian.Uint16(in[off+2:])
	off += 4

	var opt *dns.OPT
	if ar == 1 {
		// Root owner, type OPT, no options: 11 bytes.
		if off+11 > len(in) || in[off] != 0 || binary.BigEndian.Uint16(in[off+1:]) != dns.TypeOPT ||
			binary.BigEndian.Uint16(in[off+9:]) != 0 {
			return nil, "", false
		}
		opt = &p.opt
		*opt = dns.OPT{Hdr: dns.RR_Header{
			Name:   ".",
			Rrtype: dns.TypeOPT,
			Class:  binary.BigEndian.Uint16(in[off+3:]),
			Ttl:    binary.BigEndian.Uint32(in[off+5:]),
		}}
	}

	if string(wire) != string(p.wire) || p.name == "" {
		p.setName(wire)
	}
	bits := binary.BigEndian.Uint16(in[2:])
	m := &p.msg
	*m = dns.Msg{MsgHdr: dns.MsgHdr{
		Id:                 binary.BigEndian.Uint16(in[0:]),
		Response:           bits&(1<<15) != 0,
		Opcode:             int(bits>>11) & 0xF,
		Authoritative:      bits&(1<<10) != 0,
		Truncated:          bits&(1<<9) != 0,
		RecursionDesired:   bits&(1<<8) != 0,
		RecursionAvailable: bits&(1<<7) != 0,
		Zero:               bits&(1<<6) != 0,
		AuthenticatedData:  bits&(1<<5) != 0,
		CheckingDisabled:   bits&(1<<4) != 0,
		Rcode:              int(bits & 0xF),
	}}
	p.question[0] = dns.Question{Name: p.name, Qtype: qtype, Qclass: qclass}
	m.Question = p.question[:]
	if opt != nil {
		p.extra[0] = opt
		m.Extra = p.extra[:]
		m.Rcode |= opt.ExtendedRcode()
	}
	return m, p.lower, true
}

// setName decodes wire (plain labels, checked) into p's cached strings.
func (p *parsedQuery) setName(wire []byte) {
	p.wire = append(p.wire[:0], wire...)
	if len(wire) == 1 {
		p.name, p.lower, p.entry = ".", ".", nil
		return
	}
	var buf [256]byte
	n := 0
	upper := false
	for i := 0; wire[i] != 0; {
		c := int(wire[i])
		for _, b := range wire[i+1 : i+1+c] {
			upper = upper || 'A' <= b && b <= 'Z'
			buf[n] = b
			n++
		}
		buf[n] = '.'
		n++
		i += 1 + c
	}
	var set *nameSet
	var tag uint32
	if p.names != nil {
		h := maphash.Bytes(p.names.seed, wire)
		set, tag = &p.names.sets[h%nameSets], uint32(h>>32)|1
		for i := range set.tags {
			if set.tags[i].Load() != tag {
				continue
			}
			if e := set.names[i].Load(); e != nil && e.name == string(buf[:n]) {
				p.name, p.lower, p.entry = e.name, e.lower, e
				return
			}
		}
	}
	p.name = string(buf[:n])
	p.lower = p.name
	if upper {
		p.lower = strings.ToLower(p.name)
	}
	p.entry = nil
	if set != nil {
		p.entry = &internedName{name: p.name, lower: p.lower}
		i := set.next.Add(1) % nameWays
		set.tags[i].Store(0) // no reader takes the old tag for the new name
		set.names[i].Store(p.entry)
		set.tags[i].Store(tag)
	}
}

// plainLabelByte reports whether miekg/dns presents b as itself.
func plainLabelByte(b byte) bool {
	return 'a' <= b && b <= 'z' || 'A' <= b && b <= 'Z' || '0' <= b && b <= '9' || b == '-' || b == '_' || b == '*'
}
