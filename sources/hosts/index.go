// Package hosts is dnsd's hosts source (docs/sources/hosts.md): it serves
// A, AAAA and PTR records from /etc/hosts-format files and inline entries,
// and re-reads the files the moment they change.
//
// A Backend holds a set of files: it loads, indexes and watches them once
// and can be shared by any number of Sources (zones, reloads). A Source is
// one zone's view over a Backend plus its inline entries. The index holds
// every name of the files; it has no zone filter, because the pipeline only
// asks a source for names inside the source's zone.
package hosts

import (
	"net"
	"net/netip"
	"strings"
	"sync"

	"github.com/miekg/dns"

	"github.com/dnsd/dnsd/pipeline"
)

// index is an immutable snapshot of hosts data. Readers never lock: a new
// index replaces the old one as a whole.
type index struct {
	// fwd maps a lower-case FQDN to its A and AAAA records. A key with an
	// empty value is an empty non-terminal (an ancestor of a name).
	fwd map[string][]dns.RR
	// rev maps a reverse name (in-addr.arpa., ip6.arpa.) to its PTR
	// records, one per name of the address in file order; empty values are
	// empty non-terminals.
	rev map[string][]dns.RR
	// records counts the records held (for logs).
	records int
	// wild: some name's first label is "*" (a wildcard, matched by the
	// pipeline). Wildcard names have no PTR record.
	wild bool
}

// isWildcard reports whether name's first label is "*".
func isWildcard(name string) bool {
	return len(name) >= 2 && name[0] == '*' && name[1] == '.'
}

// lookup returns the records at name and whether the name exists. The
// reverse map is consulted only when reverse is true.
func (ix *index) lookup(name string, reverse bool) (fwd, rev []dns.RR, ok bool) {
	fwd, ok = ix.fwd[name]
	if reverse && strings.HasSuffix(name, ".arpa.") {
		var okr bool
		rev, okr = ix.rev[name]
		ok = ok || okr
	}
	return fwd, rev, ok
}

// dedupScan is the number of records at one name up to which duplicates
// are found by a linear scan; above it the builder uses a set.
const dedupScan = 8

// dupKey identifies one record for de-duplication.
type dupKey struct {
	owner  string
	addr   netip.Addr // A/AAAA
	target string     // PTR
}

// builder builds one half of an index: the forward map or the reverse
// map, so that both halves of a large index are built in parallel. It
// allocates records, addresses and one-record slices in bulk, so loading a
// large file costs few allocations per line.
type builder struct {
	ttl     uint32
	m       map[string][]dns.RR
	records int
	wild    bool // a wildcard name was added (forward half)

	as    []dns.A
	aaaas []dns.AAAA
	ptrs  []dns.PTR
	ips   []byte
	slots []dns.RR
	big   map[dupKey]struct{}
	buf   [80]byte        // reverse name scratch
	names strings.Builder // arena for reverse names, never grown: see intern
}

// parallelMin is the number of pairs from which the two halves of an index
// are built concurrently.
const parallelMin = 20000

// buildIndex builds an index of n (address, name) pairs, n4 of them IPv4.
// each must call add for every pair, in order; it is called twice, maybe
// concurrently.
func buildIndex(ttl uint32, n, n4 int, each func(add func(netip.Addr, string))) *index {
	fwd := &builder{
		ttl:   ttl,
		m:     make(map[string][]dns.RR, n),
		as:    make([]dns.A, 0, n4),
		aaaas: make([]dns.AAAA, 0, n-n4),
		ips:   make([]byte, 0, 4*n4+16*(n-n4)),
		slots: make([]dns.RR, 0, n),
	}
	rev := &builder{
		ttl:   ttl,
		m:     make(map[string][]dns.RR, n),
		ptrs:  make([]dns.PTR, 0, n),
		slots: make([]dns.RR, 0, n),
	}
	if n < parallelMin {
		each(fwd.addForward)
		each(rev.addReverse)
	} else {
		var wg sync.WaitGroup
		wg.Go(func() { each(fwd.addForward) })
		each(rev.addReverse)
		wg.Wait()
	}
	return &index{fwd: fwd.m, rev: rev.m, records: fwd.records + rev.records, wild: fwd.wild}
}

// slot returns a one-record slice backed by the bulk array. Its capacity is
// one, so a later append copies instead of overwriting a neighbour.
func (b *builder) slot(rr dns.RR) []dns.RR {
	if len(b.slots) == cap(b.slots) {
		b.slots = make([]dns.RR, 0, 1024)
	}
	i := len(b.slots)
	b.slots = append(b.slots, rr)
	return b.slots[i : i+1 : i+1]
}

func (b *builder) ip(n int) net.IP {
	if len(b.ips)+n > cap(b.ips) {
		b.ips = make([]byte, 0, 4096)
	}
	i := len(b.ips)
	b.ips = b.ips[:i+n]
	return net.IP(b.ips[i : i+n : i+n])
}

// addForward adds an A or AAAA record at name, and the name's ancestors
// as empty non-terminals.
func (b *builder) addForward(addr netip.Addr, name string) {
	cur, exists := b.m[name]
	if b.isDup(cur, dupKey{owner: name, addr: addr}) {
		return
	}
	var rr dns.RR
	if addr.Is4() {
		ip := b.ip(4)
		a4 := addr.As4()
		copy(ip, a4[:])
		b.as = append(b.as, dns.A{
			Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: b.ttl, Rdlength: 4},
			A:   ip,
		})
		rr = &b.as[len(b.as)-1]
	} else {
		ip := b.ip(16)
		a16 := addr.As16()
		copy(ip, a16[:])
		b.aaaas = append(b.aaaas, dns.AAAA{
			Hdr:  dns.RR_Header{Name: name, Rrtype: dns.TypeAAAA, Class: dns.ClassINET, Ttl: b.ttl, Rdlength: 16},
			AAAA: ip,
		})
		rr = &b.aaaas[len(b.aaaas)-1]
	}
	b.push(name, cur, rr)
	b.records++
	b.wild = b.wild || isWildcard(name)
	if !exists {
		addENTs(b.m, name)
	}
}

// addReverse adds a PTR record to name at addr's reverse name, and the
// reverse name's ancestors as empty non-terminals. The owner string is
// allocated only the first time a reverse name is seen. A wildcard name
// gets no PTR: it names no host.
func (b *builder) addReverse(addr netip.Addr, name string) {
	if isWildcard(name) {
		return
	}
	rb := appendReverse(b.buf[:0], addr)
	cur, exists := b.m[string(rb)]
	var rname string
	if len(cur) > 0 {
		rname = cur[0].Header().Name // share the existing string
		if b.isDup(cur, dupKey{owner: rname, target: name}) {
			return
		}
	} else {
		rname = b.intern(rb)
	}
	b.ptrs = append(b.ptrs, dns.PTR{
		Hdr: dns.RR_Header{Name: rname, Rrtype: dns.TypePTR, Class: dns.ClassINET, Ttl: b.ttl},
		Ptr: name,
	})
	b.push(rname, cur, &b.ptrs[len(b.ptrs)-1])
	b.records++
	if !exists {
		addENTs(b.m, rname)
	}
}

// intern returns rb as a string carved from a 64 KiB arena, so that a
// million reverse names are not a million allocations. A strings.Builder
// never modifies bytes it has written, and it is never grown past its
// capacity here, so earlier strings stay valid.
func (b *builder) intern(rb []byte) string {
	const chunk = 64 << 10
	if b.names.Cap()-b.names.Len() < len(rb) {
		b.names = strings.Builder{}
		b.names.Grow(chunk)
	}
	start := b.names.Len()
	b.names.Write(rb)
	return b.names.String()[start:]
}

// push appends rr to the records at owner.
func (b *builder) push(owner string, cur []dns.RR, rr dns.RR) {
	if len(cur) == 0 {
		b.m[owner] = b.slot(rr)
		return
	}
	b.m[owner] = append(cur, rr)
}

// isDup reports whether k is already among cur, recording it otherwise
// when cur is large.
func (b *builder) isDup(cur []dns.RR, k dupKey) bool {
	if len(cur) < dedupScan {
		for _, rr := range cur {
			if sameRecord(rr, k) {
				return true
			}
		}
		return false
	}
	if b.big == nil {
		b.big = make(map[dupKey]struct{})
	}
	if len(cur) == dedupScan { // first time this owner is this large
		for _, rr := range cur {
			b.big[recordKey(k.owner, rr)] = struct{}{}
		}
	}
	if _, dup := b.big[k]; dup {
		return true
	}
	b.big[k] = struct{}{}
	return false
}

func sameRecord(rr dns.RR, k dupKey) bool {
	switch rr := rr.(type) {
	case *dns.A:
		return k.addr.Is4() && [4]byte(rr.A) == k.addr.As4()
	case *dns.AAAA:
		return k.addr.Is6() && [16]byte(rr.AAAA) == k.addr.As16()
	case *dns.PTR:
		return k.addr == netip.Addr{} && rr.Ptr == k.target
	}
	return false
}

func recordKey(owner string, rr dns.RR) dupKey {
	switch rr := rr.(type) {
	case *dns.A:
		return dupKey{owner: owner, addr: netip.AddrFrom4([4]byte(rr.A))}
	case *dns.AAAA:
		return dupKey{owner: owner, addr: netip.AddrFrom16([16]byte(rr.AAAA))}
	case *dns.PTR:
		return dupKey{owner: owner, target: rr.Ptr}
	}
	return dupKey{owner: owner}
}

// addENTs records every proper ancestor of name (not the root) as an empty
// non-terminal, stopping at the first one already present: its own
// ancestors are then present too.
func addENTs(m map[string][]dns.RR, name string) {
	for i := 0; i < len(name)-1; i++ {
		if name[i] != '.' {
			continue
		}
		anc := name[i+1:]
		if len(anc) <= 1 {
			return
		}
		if _, ok := m[anc]; ok {
			return
		}
		m[anc] = nil
	}
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

// list yields the records at names in zone until yield returns false;
// it reports whether it went through.
func (ix *index) list(zone string, reverse bool, yield func(dns.RR) bool) bool {
	maps := []map[string][]dns.RR{ix.fwd}
	if reverse {
		maps = append(maps, ix.rev)
	}
	for _, m := range maps {
		for name, rrs := range m {
			if len(rrs) == 0 || !pipeline.InZone(name, zone) {
				continue
			}
			for _, rr := range rrs {
				if !yield(rr) {
					return false
				}
			}
		}
	}
	return true
}
