package hosts

import (
	"hash/maphash"
	"math/bits"
	"net"
	"strings"
	"time"

	"github.com/miekg/dns"

	"github.com/dnsd/dnsd/internal/pacing"
	"github.com/dnsd/dnsd/pipeline"
)

// The index is compact: a 1,000,000-line file must load in well under a
// second and stay under 100 MiB. It holds no string, slice or record per
// name: the names stay in their file's arena (fileData), every (address,
// name) pair is one 12-byte fileEntry, and two open-addressing tables of
// uint32 find a name or an address. A name's records are a circular list
// of the pairs that hold it, in file order, duplicates left out; the same
// for an address's PTR records. Records (dns.A, AAAA, PTR) are made from
// the pairs: built ahead for a small index (up to prebuiltMax pairs), so a
// hit costs no allocation, or at lookup time for a large one (one
// allocation for a name with one record), where building them all would
// cost 70 bytes a record. The index has no TTL: Views with several TTLs
// share it.

// index is an immutable snapshot of hosts data. Readers never lock: a new
// index replaces the old one as a whole.
type index struct {
	segs  []*fileData  // the files' data, in file order (a pair's id runs across them)
	base  []uint32     // base[i]: id of segs[i]'s first pair
	n     int          // pairs
	seed  maphash.Seed // hashes names
	rseed uint64       // hashes reverse keys (from seed)

	// fwd finds a name: a slot holds 0 (empty), 1+the id of the name's
	// last pair (the list's tail; fnext[tail] is its head), or
	// 1+entFlag|i for the empty non-terminal ents[i].
	fwd   []uint32
	fnext []uint32 // per pair: the next pair of the same name (circular)
	ents  []entName
	// rev finds a reverse name: 1+the id of the address's last PTR pair
	// (rnext as fnext), or 1+entFlag|i for the prefix rents[i] (an
	// empty non-terminal such as 2.1.10.in-addr.arpa.). A wildcard's
	// pair has no PTR.
	rev   []uint32
	rnext []uint32
	rents []rkey
	// v4, v6: some PTR is in in-addr.arpa. (ip6.arpa.), which then
	// exists as an empty non-terminal.
	v4, v6 bool

	// warmFwd, warmRev keep what eachAhead read ahead for each table,
	// so that the compiler keeps those reads.
	warmFwd, warmRev uint32

	// records counts the records held (for logs).
	records int
	// wild: some name's first label is "*" (a wildcard, matched by the
	// pipeline). Wildcard names have no PTR record.
	wild bool
}

// entFlag marks a slot value that is an empty non-terminal.
const entFlag = 1 << 31

// entName is an empty non-terminal: the name of pair id from byte off on
// (an ancestor of that name).
type entName struct {
	id  uint32
	off uint8
}

// rkey is a reverse name as the address (prefix) it stands for: n labels
// of an in-addr.arpa. name (octets, n ≤ 4) or of an ip6.arpa. name
// (nibbles, n ≤ 32), the address bits beyond them zero.
type rkey struct {
	hi, lo uint64 // IPv6: the address's halves; IPv4: lo
	n      uint8
	v6     bool
}

// entry returns pair id and the data holding it.
func (ix *index) entry(id uint32) (*fileData, fileEntry) {
	s := len(ix.base) - 1
	for ix.base[s] > id {
		s--
	}
	d := ix.segs[s]
	return d, d.entries[id-ix.base[s]]
}

// appendName appends the name of pair id to dst.
func (ix *index) appendName(dst []byte, id uint32) []byte {
	d, e := ix.entry(id)
	return d.appendName(dst, e)
}

// name is the name of pair id, as a new string.
func (ix *index) name(id uint32) string {
	d, e := ix.entry(id)
	return d.name(e)
}

// entSuffix is the name of the empty non-terminal ents[i]: always a
// suffix of its pair's parent, since an ancestor starts past the first
// label.
func (ix *index) entSuffix(i uint32) string {
	en := ix.ents[i]
	d, e := ix.entry(en.id)
	return d.parent(e)[int(en.off)-int(e.labelN)-1:]
}

// fwdIs reports whether the forward slot value v (minus one) stands for
// name.
func (ix *index) fwdIs(v uint32, name string) bool {
	if v&entFlag != 0 {
		return ix.entSuffix(v&^entFlag) == name
	}
	d, e := ix.entry(v)
	return d.nameIs(e, name)
}

// fwdHash is the hash of the name the forward slot value v (minus one)
// stands for.
func (ix *index) fwdHash(v uint32) uint64 {
	if v&entFlag != 0 {
		return ix.hashName(ix.entSuffix(v &^ entFlag))
	}
	d, e := ix.entry(v)
	return ix.nameHash(d, e)
}

// nameHash is the hash of the name of (d, e), as hashName of it written out.
func (ix *index) nameHash(d *fileData, e fileEntry) uint64 {
	var buf [256]byte
	return maphash.Bytes(ix.seed, d.appendName(buf[:0], e))
}

// revKey is the key a reverse slot value (minus one) stands for.
func (ix *index) revKey(v uint32) rkey {
	if v&entFlag != 0 {
		return ix.rents[v&^entFlag]
	}
	d, e := ix.entry(v)
	return d.key(e)
}

// slot maps a hash onto n slots.
func slot(h uint64, n int) int {
	return int((h >> 32) * uint64(n) >> 32)
}

func (ix *index) hashName(name string) uint64 { return maphash.String(ix.seed, name) }

// hashKey hashes a reverse key: two rounds of a multiply-mix (as
// wyhash), seeded per index.
func (ix *index) hashKey(k rkey) uint64 {
	const m1, m2, m3 = 0xa0761d6478bd642f, 0xe7037ed1a0b428db, 0x8ebc6af09c88c6e3
	h1, l1 := bits.Mul64(k.hi^m1^ix.rseed, k.lo^m2)
	v := uint64(k.n)
	if k.v6 {
		v |= 1 << 8
	}
	h2, l2 := bits.Mul64(h1^l1^m3, v^m1)
	return h2 ^ l2
}

// findName returns the forward slot value of name (an entry id, or
// entFlag|i for an empty non-terminal). names, when not nil, holds the
// name of every list's tail as one string, which is quicker to compare
// than a name in two parts.
func (ix *index) findName(name string, names []string) (uint32, bool) {
	if len(ix.fwd) == 0 {
		return 0, false
	}
	i := slot(ix.hashName(name), len(ix.fwd))
	for {
		v := ix.fwd[i]
		if v == 0 {
			return 0, false
		}
		if v--; names != nil && v&entFlag == 0 {
			if names[v] == name {
				return v, true
			}
		} else if ix.fwdIs(v, name) {
			return v, true
		}
		if i++; i == len(ix.fwd) {
			i = 0
		}
	}
}

// isTail reports whether pair id, (d, e), is the last pair of its name's
// list: the pair the name's slot holds.
func (ix *index) isTail(id uint32, d *fileData, e fileEntry) bool {
	i := slot(ix.nameHash(d, e), len(ix.fwd))
	for {
		v := ix.fwd[i]
		if v == 0 {
			return false
		}
		if v-1 == id {
			return true
		}
		if i++; i == len(ix.fwd) {
			i = 0
		}
	}
}

// findRev returns the reverse slot value of name, a name under arpa.
// in-addr.arpa. and ip6.arpa. exist as empty non-terminals when some PTR
// is below them.
func (ix *index) findRev(name string) (uint32, bool) {
	switch name {
	case "in-addr.arpa.":
		return entFlag, ix.v4
	case "ip6.arpa.":
		return entFlag, ix.v6
	}
	k, ok := parseReverse(name)
	if !ok || len(ix.rev) == 0 {
		return 0, false
	}
	i := slot(ix.hashKey(k), len(ix.rev))
	for {
		v := ix.rev[i]
		if v == 0 {
			return 0, false
		}
		if ix.revKey(v-1) == k {
			return v - 1, true
		}
		if i++; i == len(ix.rev) {
			i = 0
		}
	}
}

// ttlIndex is an index with a TTL: what a Source reads. For a small index
// the records are built ahead (pre); for a large one at lookup time.
type ttlIndex struct {
	ix  *index
	ttl uint32
	pre *prebuilt
}

// prebuilt holds a small index's records, and its names, by the id of a
// list's tail.
type prebuilt struct {
	fwd, rev [][]dns.RR
	names    []string
}

// prebuiltMax is the number of pairs up to which records are built
// ahead (about 150 bytes a pair: an A and a PTR record, their slices and
// the reverse name), so that a hit allocates nothing; a larger index makes
// them at lookup time.
var prebuiltMax = 1 << 17 // a variable for tests

// newTTLIndex returns ix's records with ttl, built ahead when ix is small.
func newTTLIndex(ix *index, ttl uint32) *ttlIndex {
	r := &ttlIndex{ix: ix, ttl: ttl}
	if ix.n <= prebuiltMax {
		r.pre = ix.prebuild(ttl, nil)
	}
	return r
}

// lookup returns the records at name and whether the name exists. The
// reverse table is consulted only when reverse is true.
func (r *ttlIndex) lookup(name string, reverse bool) (fwd, rev []dns.RR, ok bool) {
	ix := r.ix
	var names []string
	if r.pre != nil {
		names = r.pre.names
	}
	if v, found := ix.findName(name, names); found {
		ok = true
		if v&entFlag == 0 {
			if r.pre != nil {
				fwd = r.pre.fwd[v]
			} else {
				fwd = ix.fwdRecords(v, name, r.ttl, nil)
			}
		}
	}
	if reverse && strings.HasSuffix(name, ".arpa.") {
		if v, found := ix.findRev(name); found {
			ok = true
			if v&entFlag == 0 {
				if r.pre != nil {
					rev = r.pre.rev[v]
				} else {
					rev = ix.revRecords(v, name, r.ttl, nil)
				}
			}
		}
	}
	return fwd, rev, ok
}

// prebuild makes every record of ix with ttl, in bulk. With abort set
// (in the background), it gives way to the server every 1,024 names (a
// millisecond or so) and gives up, returning nil, once abort reports true.
//
// Giving way is a short sleep, not runtime.Gosched: with one processor
// Gosched runs whatever else is runnable and then this again, never the
// network poller, so a readable connection waits for the build. The sleep
// outlasts the scheduler's next look for work, so the processor goes idle
// and the poller runs (see package pacing); with nothing to serve, the build
// waits up to a millisecond per 1,024 names.
func (ix *index) prebuild(ttl uint32, abort func() bool) *prebuilt {
	p := &prebuilt{fwd: make([][]dns.RR, ix.n), rev: make([][]dns.RR, ix.n), names: make([]string, ix.n)}
	b := &bulk{}
	var buf [256]byte
	stopped := func(i int) bool {
		if i%1024 != 0 || abort == nil {
			return false
		}
		time.Sleep(pacing.Pause) // in the background: the server goes first (see package pacing)
		return abort()
	}
	for i, v := range ix.fwd {
		if stopped(i) {
			return nil
		}
		if v != 0 && (v-1)&entFlag == 0 {
			p.names[v-1] = b.intern(ix.appendName(buf[:0], v-1))
			p.fwd[v-1] = ix.fwdRecords(v-1, p.names[v-1], ttl, b)
		}
	}
	for i, v := range ix.rev {
		if stopped(i) {
			return nil
		}
		if v != 0 && (v-1)&entFlag == 0 {
			d, e := ix.entry(v - 1)
			owner := b.intern(appendReverse(buf[:0], d.addr(e)))
			p.rev[v-1] = ix.revRecords(v-1, owner, ttl, b)
		}
	}
	return p
}

// bulk hands out records carved from arrays allocated in chunks, so that
// building many records costs few allocations.
type bulk struct {
	as    []dns.A
	aaaas []dns.AAAA
	ptrs  []dns.PTR
	ips   []byte
	rrs   []dns.RR
	names strings.Builder // arena for reverse names, never grown: see intern
}

const bulkChunk = 256

func (b *bulk) a() *dns.A {
	if len(b.as) == cap(b.as) {
		b.as = make([]dns.A, 0, bulkChunk)
	}
	b.as = b.as[:len(b.as)+1]
	return &b.as[len(b.as)-1]
}

func (b *bulk) aaaa() *dns.AAAA {
	if len(b.aaaas) == cap(b.aaaas) {
		b.aaaas = make([]dns.AAAA, 0, bulkChunk)
	}
	b.aaaas = b.aaaas[:len(b.aaaas)+1]
	return &b.aaaas[len(b.aaaas)-1]
}

func (b *bulk) ptr() *dns.PTR {
	if len(b.ptrs) == cap(b.ptrs) {
		b.ptrs = make([]dns.PTR, 0, bulkChunk)
	}
	b.ptrs = b.ptrs[:len(b.ptrs)+1]
	return &b.ptrs[len(b.ptrs)-1]
}

func (b *bulk) ip4() net.IP {
	if len(b.ips)+4 > cap(b.ips) {
		b.ips = make([]byte, 0, 4*bulkChunk)
	}
	i := len(b.ips)
	b.ips = b.ips[:i+4]
	return net.IP(b.ips[i : i+4 : i+4])
}

// slice returns an empty slice with room for n records. Its capacity is
// n, so a later append copies instead of overwriting a neighbour.
func (b *bulk) slice(n int) []dns.RR {
	if len(b.rrs)+n > cap(b.rrs) {
		b.rrs = make([]dns.RR, 0, max(n, 4*bulkChunk))
	}
	i := len(b.rrs)
	b.rrs = b.rrs[:i+n]
	return b.rrs[i:i:(i + n)]
}

// intern returns rb as a string carved from a 64 KiB arena, so that many
// reverse names are not as many allocations. A strings.Builder never
// modifies bytes it has written, and it is never grown past its capacity
// here, so earlier strings stay valid.
func (b *bulk) intern(rb []byte) string {
	const chunk = 64 << 10
	if b.names.Cap()-b.names.Len() < len(rb) {
		b.names = strings.Builder{}
		b.names.Grow(chunk)
	}
	start := b.names.Len()
	b.names.Write(rb)
	return b.names.String()[start:]
}

// One-record answers, each a single allocation. The addresses of AAAA
// records are shared with the file's data (records are read-only).
type (
	oneA struct {
		rr [1]dns.RR
		a  dns.A
		ip [4]byte
	}
	oneAAAA struct {
		rr [1]dns.RR
		a  dns.AAAA
	}
	onePTR struct {
		rr [1]dns.RR
		p  dns.PTR
	}
)

func header(name string, t uint16, ttl uint32, rdlen uint16) dns.RR_Header {
	return dns.RR_Header{Name: name, Rrtype: t, Class: dns.ClassINET, Ttl: ttl, Rdlength: rdlen}
}

// fwdRecords returns the A and AAAA records, owned by owner, of the name
// whose list ends at pair x, in file order, from b (nil: allocated for
// this answer).
func (ix *index) fwdRecords(x uint32, owner string, ttl uint32, b *bulk) []dns.RR {
	head := ix.fnext[x]
	if b == nil && head == x {
		d, e := ix.entry(x)
		if e.v6 {
			o := &oneAAAA{}
			o.a = dns.AAAA{Hdr: header(owner, dns.TypeAAAA, ttl, 16), AAAA: d.v6[e.addr][:]}
			o.rr[0] = &o.a
			return o.rr[:]
		}
		o := &oneA{}
		o.ip = v4bytes(e.addr)
		o.a = dns.A{Hdr: header(owner, dns.TypeA, ttl, 4), A: o.ip[:]}
		o.rr[0] = &o.a
		return o.rr[:]
	}
	n := 1
	for id := head; id != x; id = ix.fnext[id] {
		n++
	}
	if b == nil {
		b = &bulk{}
	}
	rrs := b.slice(n)
	for id := head; ; id = ix.fnext[id] {
		d, e := ix.entry(id)
		if e.v6 {
			rr := b.aaaa()
			*rr = dns.AAAA{Hdr: header(owner, dns.TypeAAAA, ttl, 16), AAAA: d.v6[e.addr][:]}
			rrs = append(rrs, rr)
		} else {
			rr, ip, a4 := b.a(), b.ip4(), v4bytes(e.addr)
			copy(ip, a4[:])
			*rr = dns.A{Hdr: header(owner, dns.TypeA, ttl, 4), A: ip}
			rrs = append(rrs, rr)
		}
		if id == x {
			return rrs
		}
	}
}

// revRecords returns the PTR records, owned by owner, of the address
// whose list ends at pair x, one per name in file order.
func (ix *index) revRecords(x uint32, owner string, ttl uint32, b *bulk) []dns.RR {
	head := ix.rnext[x]
	if b == nil && head == x {
		o := &onePTR{}
		o.p = dns.PTR{Hdr: header(owner, dns.TypePTR, ttl, 0), Ptr: ix.name(x)}
		o.rr[0] = &o.p
		return o.rr[:]
	}
	n := 1
	for id := head; id != x; id = ix.rnext[id] {
		n++
	}
	if b == nil {
		b = &bulk{}
	}
	rrs := b.slice(n)
	var buf [256]byte
	for id := head; ; id = ix.rnext[id] {
		rr := b.ptr()
		*rr = dns.PTR{Hdr: header(owner, dns.TypePTR, ttl, 0), Ptr: b.intern(ix.appendName(buf[:0], id))}
		rrs = append(rrs, rr)
		if id == x {
			return rrs
		}
	}
}

func v4bytes(a uint32) [4]byte { return [4]byte{byte(a >> 24), byte(a >> 16), byte(a >> 8), byte(a)} }

// list yields the records at names in zone until yield returns false;
// it reports whether it went through. Records not built ahead are made in
// bulk for the listing.
func (r *ttlIndex) list(zone string, reverse bool, yield func(dns.RR) bool) bool {
	ix := r.ix
	b := &bulk{}
	var buf [256]byte
	for _, v := range ix.fwd {
		if v == 0 || (v-1)&entFlag != 0 {
			continue
		}
		d, e := ix.entry(v - 1)
		if !d.inZone(e, zone) {
			continue
		}
		rrs := []dns.RR(nil)
		if r.pre != nil {
			rrs = r.pre.fwd[v-1]
		} else {
			rrs = ix.fwdRecords(v-1, b.intern(d.appendName(buf[:0], e)), r.ttl, b)
		}
		for _, rr := range rrs {
			if !yield(rr) {
				return false
			}
		}
	}
	if !reverse {
		return true
	}
	for _, v := range ix.rev {
		if v == 0 || (v-1)&entFlag != 0 {
			continue
		}
		d, e := ix.entry(v - 1)
		owner := appendReverse(buf[:0], d.addr(e))
		if !pipeline.InZone(string(owner), zone) {
			continue
		}
		rrs := []dns.RR(nil)
		if r.pre != nil {
			rrs = r.pre.rev[v-1]
		} else {
			rrs = ix.revRecords(v-1, b.intern(owner), r.ttl, b)
		}
		for _, rr := range rrs {
			if !yield(rr) {
				return false
			}
		}
	}
	return true
}
