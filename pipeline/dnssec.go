package pipeline

// Pre-signed zones (RFC 4035 section 3.1). A zone whose only local source
// holds the zone's own DNSSEC records — a zone file signed beforehand,
// with DNSKEY, RRSIG and NSEC or NSEC3 records — is served as a signed
// zone to queries with the DO bit:
//
//   - every RRset of the answer (and the SOA of a negative answer)
//     carries the RRSIGs held at its name for its type; a wildcard
//     answer's RRSIGs are the wildcard's, their label count as signed;
//   - NXDOMAIN carries the NSEC that covers the name and the one that
//     covers the wildcard at the closest encloser; NODATA the NSEC at the
//     name (or, for an empty non-terminal, the one that covers it); a
//     wildcard answer the NSEC that covers the name (no closer match), a
//     wildcard NODATA that one and the NSEC at the wildcard;
//   - in an NSEC3 zone (NSEC3PARAM at the apex) the same denials by the
//     closest encloser proof of RFC 5155 section 7.2: the NSEC3 matching
//     the closest encloser, the one covering the next closer name and,
//     for NXDOMAIN, the one covering the wildcard; NODATA the NSEC3
//     matching the name.
//
// Each of these records with its own RRSIGs. Answers to DO=0 queries are
// unchanged. The source only keeps its records and finds a denial record
// by order (Presigned); what an answer carries is decided here.

import (
	"strings"

	"github.com/miekg/dns"
)

// Presigned is implemented by local sources that can hold a zone's own
// DNSSEC records (a signed zone file). They are records like any other:
// Lookup returns a name's RRSIG and NSEC records beside its data, and an
// NSEC3 record at its hashed owner name. What the source adds is the
// search of its denial records by order, which only it can do.
type Presigned interface {
	// Presigned reports whether the source holds zone signed: a DNSKEY
	// at its apex. It must be cheap and never block.
	Presigned(zone string) bool
	// NSEC returns the records held at the owner of zone's NSEC record
	// that matches name or covers it: the last NSEC owner at or before
	// name in canonical order (CanonicalCompare), the last of all when
	// none is (the chain wraps). Nil when zone has no NSEC record.
	NSEC(zone, name string) []dns.RR
	// NSEC3 returns the records held at the owner of zone's NSEC3 record
	// whose hash (the owner's first label, base32hex in lower case)
	// matches hash or covers it, in the same order of hashes, wrapping
	// the same way. Nil when zone has no NSEC3 record.
	NSEC3(zone, hash string) []dns.RR
}

// presigned returns the zone's signing source when the query asked for
// DNSSEC records (DO) and that source holds the zone signed, with the
// zone's SOA as written (a serial of dnsd's would not match the file's
// signature); nil otherwise.
func (r *resolution) presigned(z *zone) Presigned {
	if !r.req.DO || z.signer == nil || !z.signer.pre.Presigned(z.name) {
		return nil
	}
	if _, own := z.heldSOA(); !own {
		return nil
	}
	return z.signer.pre
}

// signerOf returns the entry of a zone's only local source when it
// implements Presigned, else nil.
func signerOf(entries []entry) *entry {
	var local *entry
	for i := range entries {
		if !entries[i].local {
			continue
		}
		if local != nil {
			return nil
		}
		local = &entries[i]
	}
	if local == nil || local.pre == nil {
		return nil
	}
	return local
}

// sign adds what a validator needs to one link of a pre-signed zone's
// answer: the link added m.Answer[a0:] and m.Ns[n0:] for name (written
// owner) from outcome o.
func (r *resolution) sign(s Presigned, z *zone, name, owner string, o *outcome, a0, n0 int) {
	m := &r.buf.msg
	end := len(m.Answer)
	for i := a0; i < end; i++ {
		h := m.Answer[i].Header()
		if h.Rrtype == dns.TypeRRSIG || sameType(m.Answer[a0:i], h.Rrtype) {
			continue
		}
		rrs := o.rrs
		if h.Rrtype == dns.TypeSOA && o.status != Found {
			rrs = r.held(z, z.name)
		}
		r.appendSigs(&m.Answer, rrs, h.Rrtype, owner, h.Ttl)
	}
	negative := len(m.Ns) > n0 && m.Ns[n0].Header().Rrtype == dns.TypeSOA
	if !negative && (end == a0 || o.wild == "") {
		return // a positive answer not from a wildcard is complete
	}
	apex := r.held(z, z.name)
	if negative {
		r.appendSigs(&m.Ns, apex, dns.TypeSOA, m.Ns[n0].Header().Name, m.Ns[n0].Header().Ttl)
	}
	if p := nsec3Param(apex); p != nil {
		r.nsec3Denial(s, z, p, name, o.wild, negative, n0)
		return
	}
	switch {
	case o.wild != "":
		// No closer match than the wildcard; and, for NODATA, not the
		// type at the wildcard either.
		r.appendDenial(s.NSEC(z.name, name), dns.TypeNSEC, n0)
		if negative {
			r.appendDenial(s.NSEC(z.name, o.wild), dns.TypeNSEC, n0)
		}
	case m.Rcode == dns.RcodeNameError:
		cover := s.NSEC(z.name, name)
		r.appendDenial(cover, dns.TypeNSEC, n0)
		ce := z.name
		for _, rr := range cover {
			if n, ok := rr.(*dns.NSEC); ok {
				ce = closestEncloser(name, n.Hdr.Name, n.NextDomain, z.name)
			}
		}
		r.appendDenial(s.NSEC(z.name, wildcardAt(ce)), dns.TypeNSEC, n0)
	default: // NODATA: the NSEC at the name, or covering an empty non-terminal
		r.appendDenial(s.NSEC(z.name, name), dns.TypeNSEC, n0)
	}
}

// nsec3Denial adds the NSEC3 proofs of RFC 5155 section 7.2 for name in
// an NSEC3 zone: for NODATA at a name that has an NSEC3, that one; for
// a wildcard answer, the NSEC3 covering the next closer name; else the
// closest encloser proof (and, for NXDOMAIN, the NSEC3 covering the
// wildcard at the closest encloser; for a wildcard NODATA, the one
// matching the wildcard).
func (r *resolution) nsec3Denial(s Presigned, z *zone, p *dns.NSEC3PARAM, name, wild string, negative bool, n0 int) {
	m := &r.buf.msg
	hash := func(n string) string { return strings.ToLower(dns.HashName(n, p.Hash, p.Iterations, p.Salt)) }
	if negative && wild == "" && m.Rcode != dns.RcodeNameError {
		if h := hash(name); matchesNSEC3(s.NSEC3(z.name, h), h) {
			r.appendDenial(s.NSEC3(z.name, h), dns.TypeNSEC3, n0)
			return
		}
	}
	// The closest encloser and the next closer name below it.
	ce, next := "", name
	if wild != "" {
		ce = wild[2:]
		for up := Parent(next); up != ce && up != ""; up = Parent(up) {
			next = up
		}
	} else {
		for up := Parent(name); up != ""; up = Parent(up) {
			if h := hash(up); matchesNSEC3(s.NSEC3(z.name, h), h) || up == z.name {
				ce = up
				break
			}
			next = up
		}
	}
	if wild == "" || negative {
		r.appendDenial(s.NSEC3(z.name, hash(ce)), dns.TypeNSEC3, n0)
	}
	r.appendDenial(s.NSEC3(z.name, hash(next)), dns.TypeNSEC3, n0)
	switch {
	case wild != "" && negative:
		r.appendDenial(s.NSEC3(z.name, hash(wild)), dns.TypeNSEC3, n0)
	case wild == "" && m.Rcode == dns.RcodeNameError:
		r.appendDenial(s.NSEC3(z.name, hash(wildcardAt(ce))), dns.TypeNSEC3, n0)
	}
}

// held returns the records z's signing source holds at name.
func (r *resolution) held(z *zone, name string) []dns.RR {
	q := &r.buf.q
	saved := *q
	q.Name, q.Type, q.Zone = name, dns.TypeANY, z.name
	res := z.signer.src.Lookup(r.ctx, q)
	*q = saved
	if res.Status != Found {
		return nil
	}
	return res.RRs
}

// appendSigs appends to section the RRSIGs among rrs that cover type t,
// owned by owner, their TTL no longer than ttl (the RRset's in the
// answer: a negative answer's SOA lives shorter than its record).
func (r *resolution) appendSigs(section *[]dns.RR, rrs []dns.RR, t uint16, owner string, ttl uint32) {
	for _, rr := range rrs {
		sig, ok := rr.(*dns.RRSIG)
		if !ok || sig.TypeCovered != t {
			continue
		}
		if sig.Hdr.Ttl > ttl {
			c := dns.Copy(sig)
			c.Header().Name, c.Header().Ttl = owner, ttl
			*section = append(*section, c)
			continue
		}
		*section = append(*section, withOwner(sig, owner))
	}
}

// appendDenial adds the record of type t (NSEC or NSEC3) among rrs, with
// its RRSIGs, to the authority section, unless the section (from n0)
// already has it.
func (r *resolution) appendDenial(rrs []dns.RR, t uint16, n0 int) {
	m := &r.buf.msg
	for _, rr := range rrs {
		h := rr.Header()
		if h.Rrtype != t {
			continue
		}
		for _, had := range m.Ns[n0:] {
			if hh := had.Header(); hh.Rrtype == t && hh.Name == h.Name {
				return
			}
		}
		m.Ns = append(m.Ns, rr)
		r.appendSigs(&m.Ns, rrs, t, h.Name, h.Ttl)
		return
	}
}

// nsec3Param returns the NSEC3PARAM among a zone's apex records, nil in
// an NSEC zone.
func nsec3Param(apex []dns.RR) *dns.NSEC3PARAM {
	for _, rr := range apex {
		if p, ok := rr.(*dns.NSEC3PARAM); ok {
			return p
		}
	}
	return nil
}

// matchesNSEC3 reports whether rrs hold an NSEC3 whose owner's hash is
// hash.
func matchesNSEC3(rrs []dns.RR, hash string) bool {
	for _, rr := range rrs {
		if n, ok := rr.(*dns.NSEC3); ok {
			label := n.Hdr.Name
			if i := strings.IndexByte(label, '.'); i >= 0 {
				label = label[:i]
			}
			return strings.EqualFold(label, hash)
		}
	}
	return false
}

// closestEncloser is the closest encloser of name (which does not exist)
// that an NSEC from owner to next proves: the longer of the names name
// shares with either, never above the zone's apex.
func closestEncloser(name, owner, next, apex string) string {
	n := max(dns.CompareDomainName(name, owner), dns.CompareDomainName(name, next), dns.CountLabel(apex))
	labels := dns.Split(name)
	if n >= len(labels) {
		return name
	}
	return name[labels[len(labels)-n]:]
}

// wildcardAt is the wildcard name at encloser ce.
func wildcardAt(ce string) string {
	if ce == "." {
		return "*."
	}
	return "*." + ce
}

// sameType reports whether rrs hold a record of type t.
func sameType(rrs []dns.RR, t uint16) bool {
	for _, rr := range rrs {
		if rr.Header().Rrtype == t {
			return true
		}
	}
	return false
}

// CanonicalCompare compares two domain names (fully qualified, in the
// presentation form miekg/dns writes) in the canonical order of DNSSEC
// (RFC 4034 section 6.1): label by label from the right, each as its
// bytes with ASCII letters in lower case, a name before the names below
// it. It returns -1, 0 or +1. Names that are not valid compare as their
// strings do.
func CanonicalCompare(a, b string) int {
	if strings.IndexByte(a, '\\') < 0 && strings.IndexByte(b, '\\') < 0 {
		return plainCompare(a, b)
	}
	return wireCompare(a, b)
}

// wireCompare is CanonicalCompare on the names' wire form.
func wireCompare(a, b string) int {
	var wa, wb [256]byte
	la, erra := dns.PackDomainName(dns.Fqdn(a), wa[:], 0, nil, false)
	lb, errb := dns.PackDomainName(dns.Fqdn(b), wb[:], 0, nil, false)
	if erra != nil || errb != nil {
		return strings.Compare(a, b)
	}
	var sa, sb [128]int
	na, nb := labelStarts(wa[:la], sa[:]), labelStarts(wb[:lb], sb[:])
	for na > 0 && nb > 0 {
		na, nb = na-1, nb-1
		x, y := wa[sa[na]+1:sa[na]+1+int(wa[sa[na]])], wb[sb[nb]+1:sb[nb]+1+int(wb[sb[nb]])]
		if c := compareLabel(x, y); c != 0 {
			return c
		}
	}
	switch {
	case na < nb:
		return -1
	case na > nb:
		return 1
	}
	return 0
}

// compareLabel orders two labels as RFC 4034 §6.1 does: byte by byte,
// ASCII letters in lower case, a label that is a prefix of the other
// first.
func compareLabel[L string | []byte](x, y L) int {
	for i := 0; i < len(x) && i < len(y); i++ {
		if cx, cy := lower(x[i]), lower(y[i]); cx != cy {
			if cx < cy {
				return -1
			}
			return 1
		}
	}
	switch {
	case len(x) < len(y):
		return -1
	case len(x) > len(y):
		return 1
	}
	return 0
}

// plainCompare is CanonicalCompare of names without escapes: their
// labels are their bytes.
func plainCompare(a, b string) int {
	a, b = strings.TrimSuffix(a, "."), strings.TrimSuffix(b, ".")
	for a != "" && b != "" {
		var x, y string
		if i := strings.LastIndexByte(a, '.'); i >= 0 {
			x, a = a[i+1:], a[:i]
		} else {
			x, a = a, ""
		}
		if i := strings.LastIndexByte(b, '.'); i >= 0 {
			y, b = b[i+1:], b[:i]
		} else {
			y, b = b, ""
		}
		if c := compareLabel(x, y); c != 0 {
			return c
		}
		if a == "" || b == "" {
			break
		}
	}
	switch {
	case a == "" && b != "":
		return -1
	case a != "" && b == "":
		return 1
	}
	return 0
}

// labelStarts records in starts the offset of each label of the wire
// name w (the root label excluded) and returns how many there are.
func labelStarts(w []byte, starts []int) int {
	n := 0
	for off := 0; off < len(w) && w[off] != 0 && n < len(starts); off += int(w[off]) + 1 {
		starts[n] = off
		n++
	}
	return n
}

func lower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}
