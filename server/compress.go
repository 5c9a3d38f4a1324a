package server

import "github.com/miekg/dns"

// Name compression of packed responses (RFC 1035 §4.1.4) without the map
// miekg/dns allocates for it per message: finish packs a response as
// written and compressor rewrites it in place, each name that repeats the
// whole or the tail of an earlier one shortened to a pointer to it.
//
// Owner and question names are always compressed; names inside RDATA only
// for the types whose RDATA every decoder is required to decompress
// (RFC 3597 §4: NS, MD, MF, CNAME, SOA, MB, MG, MR, PTR, MINFO, MX),
// never SRV or any later type. Names compare byte for byte, as miekg/dns
// compares them: a pointer never changes how a name is spelled (an owner
// in lower case is not made to read as a question asked in mixed case,
// which validators and 0x20 clients would see). A pointer reaches the first 16 KiB of a message;
// at most compressNames names are remembered as targets, and past that
// later names are still shortened to those but not remembered.
const (
	compressSlots    = 256 // a power of two, larger than compressNames
	compressNames    = 192
	maxPointerTarget = 0x3fff
)

// compressor is reusable working memory for compress. Its table of earlier
// names is emptied by advancing gen: nothing is cleared per message.
type compressor struct {
	gen   uint16
	names int
	// last is where the name written last (not counting names only
	// pointed at) can be pointed at, or -1: records of one owner in a
	// row, and the owner of the first answer after the question, skip
	// the table.
	last int
	// begun: a name was written; pending, when not 0, is where the
	// first one was, not yet in the table.
	begun   bool
	pending int
	slots   [compressSlots]nameSlot
	// The name being written: its labels' offsets from its start and
	// the hash of the name from each label on.
	starts [128]uint8
	hashes [128]uint32
}

// nameSlot is an earlier name of the message: where it was written and
// the hash of its lower-case labels; empty unless gen is the compressor's.
type nameSlot struct {
	hash uint32
	gen  uint16
	off  uint16
}

// compress rewrites the packed message m with its names compressed, in
// place, and returns it shortened: never longer than m. It reports false,
// m then partly rewritten and of no use, for a message it cannot read
// (names already compressed, a malformed name or record, bytes after the
// last record) or that is signed (TSIG, SIG(0): the signature covers the
// bytes as they are).
func (c *compressor) compress(m []byte) ([]byte, bool) {
	c.gen++
	if c.gen == 0 {
		clear(c.slots[:])
		c.gen = 1
	}
	c.names, c.last, c.begun, c.pending = 0, -1, false, 0
	n, ok := c.walk(m)
	return m[:n], ok
}

// walk reads m record by record, reading at i and writing at o ≤ i (what
// it writes is never longer than what it read, and a pointer only reaches
// back into what it wrote). It reports the length written and whether m
// is a message it can read.
func (c *compressor) walk(m []byte) (int, bool) {
	if len(m) < 12 {
		return 0, false
	}
	i, o := 12, 12
	var ok bool
	for range u16(m, 4) { // the question
		if i, o, ok = c.name(m, i, o, true); !ok || i+4 > len(m) {
			return 0, false
		}
		o = c.copy(m, i, o, 4)
		i += 4
	}
	for range u16(m, 6) + u16(m, 8) + u16(m, 10) {
		if i, o, ok = c.name(m, i, o, true); !ok || i+10 > len(m) {
			return 0, false
		}
		rrtype, rdlen := uint16(u16(m, i)), u16(m, i+8)
		if rrtype == dns.TypeTSIG || rrtype == dns.TypeSIG {
			return 0, false // a signature covers the bytes as they are
		}
		o = c.copy(m, i, o, 10)
		i += 10
		end := i + rdlen
		if end > len(m) {
			return 0, false
		}
		rdata := o
		// The RDATA: pre bytes as they are, names names, post bytes; or
		// (only) a name at pre that later names may point at, written
		// as it is, the bytes around it too.
		pre, names, post, only := rdlen, 0, 0, false
		if rdlen > 0 { // empty RDATA (an update's deletion) has no names
			switch rrtype {
			case dns.TypeNS, dns.TypeMD, dns.TypeMF, dns.TypeCNAME, dns.TypeMB, dns.TypeMG, dns.TypeMR, dns.TypePTR:
				pre, names = 0, 1
			case dns.TypeMINFO:
				pre, names = 0, 2
			case dns.TypeMX:
				pre, names = 2, 1
			case dns.TypeSOA:
				pre, names, post = 0, 2, 20
			case dns.TypeDNAME, dns.TypeNSEC:
				pre, only = 0, true
			case dns.TypeSVCB, dns.TypeHTTPS, dns.TypeAFSDB, dns.TypeRT, dns.TypeKX:
				pre, only = 2, true
			case dns.TypeSRV:
				pre, only = 6, true
			case dns.TypeRRSIG:
				pre, only = 18, true
			}
		}
		if i+pre > end || (names > 0 && !c.fits(m[:end], i+pre, names, post)) {
			// Not of its type's form (a field left out, as an
			// update's may be): as it is.
			pre, names, post, only = rdlen, 0, 0, false
		}
		o = c.copy(m, i, o, pre)
		i += pre
		if only {
			if ni, no, ok := c.name(m[:end], i, o, false); ok {
				i, o = ni, no
			}
			post = end - i // what follows the name; all of it when it does not read
		}
		for range names {
			if i, o, ok = c.name(m[:end], i, o, true); !ok {
				return 0, false
			}
		}
		if i+post != end {
			return 0, false
		}
		o = c.copy(m, i, o, post)
		i = end
		m[rdata-2], m[rdata-1] = byte((o-rdata)>>8), byte(o-rdata)
	}
	return o, i == len(m)
}

// fits reports whether m holds from i names uncompressed names and then
// exactly post bytes.
func (c *compressor) fits(m []byte, i, names, post int) bool {
	for range names {
		_, size, ok := c.labels(m, i)
		if !ok {
			return false
		}
		i += size
	}
	return i+post == len(m)
}

// copy moves the n bytes at i to o and returns the offset after them.
func (c *compressor) copy(m []byte, i, o, n int) int {
	if i != o {
		copy(m[o:o+n], m[i:i+n])
	}
	return o + n
}

// name reads the uncompressed name at i and writes it at o
// (with point, ending in a pointer to the longest tail of it written
// before, if any) and remembers it for later names to point at; it
// returns the offsets after the name read and written.
func (c *compressor) name(m []byte, i, o int, point bool) (int, int, bool) {
	k, size, ok := c.labels(m, i)
	if !ok {
		return 0, 0, false
	}
	if k == 0 { // the root
		m[o] = 0
		return i + 1, o + 1, true
	}
	if point && c.last >= 0 && sameName(m, i, c.last) {
		m[o], m[o+1] = 0xc0|byte(c.last>>8), byte(c.last)
		return i + size, o + 2, true
	}
	if !c.begun { // the first name (the question's): hashed only if a later name needs the table
		c.begun = true
		if o <= maxPointerTarget {
			c.pending, c.last = o, o
		}
		copy(m[o:o+size], m[i:i+size])
		return i + size, o + size, true
	}
	if p := c.pending; p > 0 {
		c.pending = 0
		pk, _, _ := c.labels(m, p) // written as it was read: it reads
		c.hash(m, p, pk)
		for j := range pk {
			if off := p + int(c.starts[j]); off <= maxPointerTarget && c.names < compressNames {
				c.insert(c.hashes[j], off)
			}
		}
		c.labels(m, i) // the starts of this name again
	}
	c.hash(m, i, k)
	match, at := k, 0 // the first label of the longest tail written before, and where
	for j := range k {
		if !point {
			break
		}
		if t, ok := c.find(m, c.hashes[j], i+int(c.starts[j])); ok {
			match, at = j, t
			break
		}
	}
	raw := size // the bytes written as they are: the labels before the tail
	if match < k {
		raw = int(c.starts[match])
	}
	copy(m[o:o+raw], m[i:i+raw])
	for j := range match {
		if off := o + int(c.starts[j]); off <= maxPointerTarget && c.names < compressNames {
			c.insert(c.hashes[j], off)
		}
	}
	n := o + raw
	if match < k {
		m[n], m[n+1] = 0xc0|byte(at>>8), byte(at)
		n += 2
	}
	switch {
	case !point: // a name only pointed at: the owner before it stays the last
	case match == 0:
		c.last = at
	case o <= maxPointerTarget:
		c.last = o
	default:
		c.last = -1
	}
	return i + size, n, true
}

// labels records in c.starts the offsets of the labels of the uncompressed
// name at i and returns their number and the name's length.
func (c *compressor) labels(m []byte, i int) (k, size int, ok bool) {
	p := i
	for {
		if p >= len(m) {
			return 0, 0, false
		}
		l := int(m[p])
		if l == 0 {
			return k, p + 1 - i, true
		}
		if l > 63 || k == len(c.starts) { // a pointer or an unknown label type
			return 0, 0, false
		}
		c.starts[k] = uint8(p - i)
		k++
		if p += 1 + l; p-i >= 255 { // a name is at most 255 bytes, its root included
			return 0, 0, false
		}
	}
}

// hash records in c.hashes the hash of each tail of the name at i, whose
// k labels c.starts holds, from the last label up.
func (c *compressor) hash(m []byte, i, k int) {
	h := uint32(2166136261)
	for j := k - 1; j >= 0; j-- {
		s := i + int(c.starts[j])
		for _, b := range m[s : s+1+int(m[s])] {
			h = (h ^ uint32(b)) * 16777619
		}
		c.hashes[j] = h
	}
}

// find returns where the name at in (uncompressed, read ahead of all that
// was written) with hash h was written before.
func (c *compressor) find(m []byte, h uint32, in int) (int, bool) {
	for s := h % compressSlots; ; s = (s + 1) % compressSlots {
		sl := &c.slots[s]
		if sl.gen != c.gen {
			return 0, false
		}
		if sl.hash == h && sameName(m, in, int(sl.off)) {
			return int(sl.off), true
		}
	}
}

// insert remembers that a name with hash h was written at off.
func (c *compressor) insert(h uint32, off int) {
	s := h % compressSlots
	for c.slots[s].gen == c.gen {
		s = (s + 1) % compressSlots
	}
	c.slots[s] = nameSlot{hash: h, gen: c.gen, off: uint16(off)}
	c.names++
}

// sameName reports whether the uncompressed name at a is the name at b,
// which may end in a pointer, byte for byte: a pointer must not change a
// name's spelling (an owner written in lower case stays so beside a
// question asked in mixed case).
func sameName(m []byte, a, b int) bool {
	for {
		for m[b]&0xc0 == 0xc0 {
			b = int(m[b]&0x3f)<<8 | int(m[b+1])
		}
		l := int(m[a])
		if l != int(m[b]) {
			return false
		}
		if l == 0 {
			return true
		}
		if string(m[a+1:a+1+l]) != string(m[b+1:b+1+l]) {
			return false
		}
		a += 1 + l
		b += 1 + l
	}
}

func u16(m []byte, i int) int { return int(m[i])<<8 | int(m[i+1]) }

// packCompressed packs out into buf (from a pack buffer: the result is in
// it unless out is too large for it) with its names compressed. When even
// so it exceeds maxSize, the library packs it instead, truncated to
// maxSize (TC=1) for UDP, or errTooLarge when a stream's answer does not
// fit in 64 KiB: that path allocates, the others do not.
func (sc *scratch) packCompressed(out *dns.Msg, maxSize int, buf []byte) ([]byte, error) {
	out.Compress = false // the pipeline's message may be an upstream's, with it set
	b, err := out.PackBuffer(buf)
	if err != nil {
		return nil, err
	}
	c, ok := sc.names.compress(b)
	if ok && len(c) <= maxSize {
		return c, nil
	}
	if !ok && len(b) <= maxSize { // not one it reads: as written
		return out.PackBuffer(buf)
	}
	// A stream has no smaller answer to send and no larger transport to
	// retry over: an answer over 64 KiB cut to fit would be a partial
	// RRset, or an empty one with a TC bit the client cannot act on.
	if maxSize == dns.MaxMsgSize {
		if out.Compress = true; out.Len() > maxSize {
			return nil, errTooLarge
		}
	} else {
		out.Truncate(maxSize)
	}
	return out.PackBuffer(buf)
}
