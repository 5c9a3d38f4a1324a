package hosts

import (
	"encoding/binary"
	"hash/maphash"
	"net/netip"
	"runtime"
	"sync"

	"github.com/dnsd/dnsd/internal/pacing"
)

// parallelMin is the number of pairs from which the two halves of an index
// (names, addresses) are built concurrently.
const parallelMin = 20000

// dedupScan is the number of records at one name (or address) up to which
// duplicates are found by walking its list; above it the builder uses a
// set.
const dedupScan = 8

// buildIndex indexes the pairs of segs, in order, pacing itself when pace
// is set (a reload's: see package pacing). The index refers to segs' data, which
// must not change afterwards.
func buildIndex(segs []*fileData, pace *pacing.Pacing) *index {
	ix := &index{seed: maphash.MakeSeed()}
	ix.rseed = maphash.String(ix.seed, "reverse")
	for _, d := range segs {
		if len(d.entries) == 0 {
			continue
		}
		if ix.n+len(d.entries) >= entFlag {
			break // 2^31 pairs: an id would run into entFlag (and take some 50 GB)
		}
		ix.segs = append(ix.segs, d)
		ix.base = append(ix.base, uint32(ix.n))
		ix.n += len(d.entries)
	}
	if ix.n == 0 {
		return ix
	}
	var fwd, rev int
	// One processor: one after the other (at once they would only take
	// turns, and a reload's pacing sleep in one would hand the processor
	// to the other instead of to the network poller).
	if ix.n < parallelMin || runtime.GOMAXPROCS(0) == 1 {
		fwd, rev = ix.buildFwd(pace), ix.buildRev(pace)
	} else {
		var wg sync.WaitGroup
		wg.Go(func() { fwd = ix.buildFwd(pace) })
		rev = ix.buildRev(pace)
		wg.Wait()
	}
	ix.records = fwd + rev
	return ix
}

// ahead is the number of pairs eachAhead looks up ahead of time.
const ahead = 16

// eachAhead calls f for every pair, in order, with its id and its hash.
// Building a large index is bound by memory latency: every pair's slot is
// a random place in a table of megabytes, and an occupied slot leads to
// another pair's entry and name, elsewhere again. So the pairs go in
// groups: first the group's slots (and the entries in them) are read,
// loads the processor can overlap, then f runs for each pair of the group
// and finds them in the cache. touch reads what f will read of the pair
// in an occupied slot. eachAhead returns a sum of what it read ahead, for
// the caller to keep (so that the compiler keeps the reads).
func (ix *index) eachAhead(hash func(*fileData, fileEntry) uint64, touch func(*fileData, fileEntry) uint32,
	table func() []uint32, f func(id uint32, d *fileData, e fileEntry, h uint64)) uint32 {
	var (
		hs   [ahead]uint64
		ws   [ahead]*fileData
		we   [ahead]fileEntry
		warm uint32
	)
	id := uint32(0)
	for _, d := range ix.segs {
		for start := 0; start < len(d.entries); start += ahead {
			group := d.entries[start:min(start+ahead, len(d.entries))]
			t := table()
			for k, e := range group {
				hs[k] = hash(d, e)
			}
			for k := range group { // a tight loop: the loads overlap
				warm += t[slot(hs[k], len(t))]
			}
			for k := range group {
				if v := t[slot(hs[k], len(t))]; v != 0 && (v-1)&entFlag == 0 {
					ws[k], we[k] = ix.entry(v - 1)
					warm += we[k].label
				} else {
					ws[k] = nil
				}
			}
			for k := range group {
				if ws[k] != nil {
					warm += touch(ws[k], we[k])
				}
			}
			for k, e := range group {
				f(id, d, e, hs[k])
				id++
			}
		}
	}
	return warm
}

// tableSize is the number of slots for n keys: a load of one half, so that
// a probe for an unknown key ends after about 2.5 slots. A table grows
// (doubles) only past a load of three quarters: the empty non-terminals
// are unknown in advance, and they are usually few.
func tableSize(n int) int { return max(2*n, 8) }

// full reports whether a table of size slots with used of them in use
// must grow before one more key is added.
func full(used, size int) bool { return used+1 > size/4*3 }

// place puts v (a slot value) into slots at the first free slot from h.
func place(slots []uint32, h uint64, v uint32) {
	i := slot(h, len(slots))
	for slots[i] != 0 {
		if i++; i == len(slots) {
			i = 0
		}
	}
	slots[i] = v
}

// fwdDup and revDup identify a record for the de-duplication set of a
// long list (head: the id of the list's first pair).
type (
	fwdDup struct {
		head uint32
		addr rkey
	}
	revDup struct {
		head uint32
		name string
	}
)

// buildFwd fills fwd, fnext and ents and returns the number of A/AAAA
// records. A name's list gets a pair unless one with the same address is
// in it already; every proper ancestor of a name (not the root) is an
// empty non-terminal unless it has records itself. It paces itself when
// pace is set (a reload's: see package pacing).
func (ix *index) buildFwd(pace *pacing.Pacing) int {
	ix.fnext = make([]uint32, ix.n)
	ix.fwd = make([]uint32, tableSize(ix.n))
	used, records := 0, 0
	var big map[fwdDup]struct{}
	grow := func() {
		if !full(used, len(ix.fwd)) {
			return
		}
		slots := make([]uint32, 2*len(ix.fwd))
		for _, v := range ix.fwd {
			if v != 0 {
				place(slots, ix.fwdHash(v-1), v)
			}
		}
		ix.fwd = slots
	}
	// find returns the slot of name (an ancestor): empty or holding name.
	find := func(name string) int {
		i := slot(ix.hashName(name), len(ix.fwd))
		for {
			v := ix.fwd[i]
			if v == 0 || ix.fwdIs(v-1, name) {
				return i
			}
			if i++; i == len(ix.fwd) {
				i = 0
			}
		}
	}
	// findPair returns the slot of the name of (d, e), whose hash is h:
	// empty or holding it.
	findPair := func(d *fileData, e fileEntry, h uint64) int {
		i := slot(h, len(ix.fwd))
		for {
			v := ix.fwd[i]
			if v == 0 {
				return i
			}
			if v--; v&entFlag != 0 && d.nameIs(e, ix.entSuffix(v&^entFlag)) || v&entFlag == 0 && ix.pairIs(v, d, e) {
				return i
			}
			if i++; i == len(ix.fwd) {
				i = 0
			}
		}
	}
	// last: the parent of the last new name, known to be present with
	// its ancestors; consecutive lines usually share theirs, which is
	// then not looked up again.
	last := ""
	hash := ix.nameHash
	touch := func(d *fileData, e fileEntry) uint32 { // pairIs reads the name
		if e.labelN > 0 {
			return uint32(d.labels[e.label])
		}
		return 0
	}
	pc := pacing.New(pace)
	ix.warmFwd = ix.eachAhead(hash, touch, func() []uint32 { return ix.fwd }, func(id uint32, d *fileData, e fileEntry, h uint64) {
		pc.Step()
		grow()
		i := findPair(d, e, h)
		v := ix.fwd[i]
		switch {
		case v == 0: // a new name, and its ancestors
			ix.fwd[i], ix.fnext[id] = id+1, id
			used++
			if p := d.parent(e); p != "" && p != last {
				last = p
				// The ancestors are p and what follows each dot of p
				// but the last; p starts at byte labelN+1 of the name.
				for k := -1; k < len(p)-1; k++ {
					if k >= 0 && p[k] != '.' {
						continue
					}
					grow()
					j := find(p[k+1:])
					if ix.fwd[j] != 0 {
						break // its ancestors are there too
					}
					ix.fwd[j] = 1 + (entFlag | uint32(len(ix.ents)))
					ix.ents = append(ix.ents, entName{id: id, off: uint8(int(e.labelN) + 1 + k + 1)})
					used++
				}
			}
		case (v-1)&entFlag != 0: // an empty non-terminal gets records
			ix.fwd[i], ix.fnext[id] = id+1, id
		default:
			tail := v - 1
			head := ix.fnext[tail]
			k := d.key(e)
			n, walked := 0, head
			for ; n < dedupScan; n++ {
				if ix.addrKey(walked) == k {
					return // duplicate
				}
				if walked == tail {
					break
				}
				walked = ix.fnext[walked]
			}
			if n+1 >= dedupScan { // a long list: de-duplicate with a set
				if big == nil {
					big = make(map[fwdDup]struct{})
				}
				if n+1 == dedupScan && walked == tail { // first time: the list so far
					for w := head; ; w = ix.fnext[w] {
						big[fwdDup{head, ix.addrKey(w)}] = struct{}{}
						if w == tail {
							break
						}
					}
				}
				if _, dup := big[fwdDup{head, k}]; dup {
					return
				}
				big[fwdDup{head, k}] = struct{}{}
			}
			ix.fnext[id], ix.fnext[tail] = head, id
			ix.fwd[i] = id + 1
		}
		records++
		ix.wild = ix.wild || d.label(e) == "*"
	})
	return records
}

// pairIs reports whether pair w has the name of (d, e).
func (ix *index) pairIs(w uint32, d *fileData, e fileEntry) bool {
	dw, ew := ix.entry(w)
	if ew.labelN != e.labelN || ew.parentN != e.parentN || dw.label(ew) != d.label(e) {
		return false
	}
	return dw == d && ew.parent == e.parent || dw.parent(ew) == d.parent(e)
}

// addrKey is the full reverse key of pair id's address.
func (ix *index) addrKey(id uint32) rkey {
	d, e := ix.entry(id)
	return d.key(e)
}

// buildRev fills rev, rnext and rents and returns the number of PTR
// records: one per name of an address (wildcards left out), in file order;
// every proper prefix of an address is an empty non-terminal. It paces
// itself when pace is set.
func (ix *index) buildRev(pace *pacing.Pacing) int {
	ix.rnext = make([]uint32, ix.n)
	ix.rev = make([]uint32, tableSize(ix.n))
	used, records := 0, 0
	var big map[revDup]struct{}
	grow := func() {
		if !full(used, len(ix.rev)) {
			return
		}
		slots := make([]uint32, 2*len(ix.rev))
		for _, v := range ix.rev {
			if v != 0 {
				place(slots, ix.hashKey(ix.revKey(v-1)), v)
			}
		}
		ix.rev = slots
	}
	find := func(k rkey, h uint64) int {
		i := slot(h, len(ix.rev))
		for {
			v := ix.rev[i]
			if v == 0 || ix.revKey(v-1) == k {
				return i
			}
			if i++; i == len(ix.rev) {
				i = 0
			}
		}
	}
	var parent rkey // as in buildFwd
	hash := func(d *fileData, e fileEntry) uint64 { return ix.hashKey(d.key(e)) }
	touch := func(d *fileData, e fileEntry) uint32 { // revKey reads the address
		if e.v6 {
			return uint32(d.v6[e.addr][0])
		}
		return 0
	}
	pc := pacing.New(pace)
	ix.warmRev = ix.eachAhead(hash, touch, func() []uint32 { return ix.rev }, func(id uint32, d *fileData, e fileEntry, h uint64) {
		pc.Step()
		if d.label(e) == "*" { // a wildcard
			return
		}
		k := d.key(e)
		grow()
		i := find(k, h)
		v := ix.rev[i]
		if v == 0 { // a new address, and its prefixes
			ix.rev[i], ix.rnext[id] = id+1, id
			used++
			if k.v6 {
				ix.v6 = true
			} else {
				ix.v4 = true
			}
			if p := k.prefix(k.n - 1); p == parent {
				records++
				return
			} else {
				parent = p
			}
			for n := k.n - 1; n > 0; n-- {
				p := k.prefix(n)
				grow()
				j := find(p, ix.hashKey(p))
				if ix.rev[j] != 0 {
					break
				}
				ix.rev[j] = 1 + (entFlag | uint32(len(ix.rents)))
				ix.rents = append(ix.rents, p)
				used++
			}
			records++
			return
		}
		tail := v - 1 // never an empty non-terminal: those are shorter
		head := ix.rnext[tail]
		n, walked := 0, head
		for ; n < dedupScan; n++ {
			if ix.pairIs(walked, d, e) {
				return
			}
			if walked == tail {
				break
			}
			walked = ix.rnext[walked]
		}
		if n+1 >= dedupScan {
			name := d.name(e)
			if big == nil {
				big = make(map[revDup]struct{})
			}
			if n+1 == dedupScan && walked == tail {
				for w := head; ; w = ix.rnext[w] {
					big[revDup{head, ix.name(w)}] = struct{}{}
					if w == tail {
						break
					}
				}
			}
			if _, dup := big[revDup{head, name}]; dup {
				return
			}
			big[revDup{head, name}] = struct{}{}
		}
		ix.rnext[id], ix.rnext[tail] = head, id
		ix.rev[i] = id + 1
		records++
	})
	return records
}

// prefix is k cut to its first n labels (octets or nibbles).
func (k rkey) prefix(n uint8) rkey {
	bitsKept := uint(n) * 4
	if !k.v6 {
		bitsKept = uint(n) * 8
		k.lo &= ^uint64(0) << (32 - bitsKept) & 0xffffffff
		k.n = n
		return k
	}
	switch {
	case bitsKept == 0:
		k.hi, k.lo = 0, 0
	case bitsKept < 64:
		k.hi &= ^uint64(0) << (64 - bitsKept)
		k.lo = 0
	case bitsKept == 64:
		k.lo = 0
	default:
		k.lo &= ^uint64(0) << (128 - bitsKept)
	}
	k.n = n
	return k
}

// parseReverse reads a name under in-addr.arpa. or ip6.arpa. as the key
// of the address prefix it names. Only the names appendReverse writes (and
// their ancestors) are accepted: decimal octets without leading zeros,
// lower-case hex nibbles.
func parseReverse(name string) (rkey, bool) {
	const v4Suffix, v6Suffix = ".in-addr.arpa.", ".ip6.arpa."
	var k rkey
	switch {
	case len(name) > len(v4Suffix) && name[len(name)-len(v4Suffix):] == v4Suffix:
		labels := name[:len(name)-len(v4Suffix)+1] // "z.y.x.w."
		var oct [4]byte
		n := 0
		for len(labels) > 0 {
			if n == 4 {
				return rkey{}, false
			}
			v, i := 0, 0
			for ; i < len(labels) && labels[i] != '.'; i++ {
				c := labels[i]
				if c < '0' || c > '9' || i == 3 || i == 1 && labels[0] == '0' {
					return rkey{}, false
				}
				v = v*10 + int(c-'0')
			}
			if i == 0 || v > 255 {
				return rkey{}, false
			}
			oct[n] = byte(v)
			n++
			labels = labels[i+1:]
		}
		// oct holds the octets last first: the name's rightmost label is
		// the address's first octet.
		var a uint32
		for j := range n {
			a |= uint32(oct[n-1-j]) << (24 - 8*j)
		}
		k.lo, k.n = uint64(a), uint8(n)
	case len(name) > len(v6Suffix) && name[len(name)-len(v6Suffix):] == v6Suffix:
		labels := name[:len(name)-len(v6Suffix)+1] // "x.y.z."
		if len(labels)%2 != 0 || len(labels) > 64 {
			return rkey{}, false
		}
		n := len(labels) / 2
		var a [16]byte
		for j := range n { // label j from the left is nibble n-1-j
			c, dot := labels[2*j], labels[2*j+1]
			var v byte
			switch {
			case c >= '0' && c <= '9':
				v = c - '0'
			case c >= 'a' && c <= 'f':
				v = c - 'a' + 10
			default:
				return rkey{}, false
			}
			if dot != '.' {
				return rkey{}, false
			}
			nib := n - 1 - j
			if nib%2 == 0 {
				a[nib/2] |= v << 4
			} else {
				a[nib/2] |= v
			}
		}
		k.hi, k.lo = binary.BigEndian.Uint64(a[:8]), binary.BigEndian.Uint64(a[8:])
		k.n, k.v6 = uint8(n), true
	default:
		return rkey{}, false
	}
	return k, true
}

const hexDigits = "0123456789abcdef"

// appendReverse appends the in-addr.arpa. or ip6.arpa. name of addr.
func appendReverse(dst []byte, addr netip.Addr) []byte {
	if addr.Is4() {
		a := addr.As4()
		for i := 3; i >= 0; i-- {
			dst = appendUint8(dst, a[i])
			dst = append(dst, '.')
		}
		return append(dst, "in-addr.arpa."...)
	}
	a := addr.As16()
	for i := 15; i >= 0; i-- {
		dst = append(dst, hexDigits[a[i]&0xf], '.', hexDigits[a[i]>>4], '.')
	}
	return append(dst, "ip6.arpa."...)
}

func appendUint8(dst []byte, v byte) []byte {
	if v >= 100 {
		dst = append(dst, '0'+v/100)
	}
	if v >= 10 {
		dst = append(dst, '0'+v/10%10)
	}
	return append(dst, '0'+v%10)
}
