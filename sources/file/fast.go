package file

import (
	"bytes"
	"math"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"unsafe"

	"github.com/miekg/dns"
)

// fastRecords reads a zone file the way dns.ZoneParser does, in a
// fraction of its time for the records most zones are made of: one line,
// an owner (or none: the one above), TTL and class in either order, and
// A, AAAA, NS, CNAME, PTR, MX or SRV data. A record of another type, or
// one whose data has quotes, escapes or parentheses (an SOA over several
// lines), is handed to ZoneParser on its own, with the owner, TTL and
// origin in force at its line. $TTL and $ORIGIN are followed.
//
// It gives up (false) at the first thing it is not sure to read
// exactly as ZoneParser would: any error, $INCLUDE, $GENERATE, a class
// other than IN, anything but plain ASCII before the type. The caller
// then parses the whole file with ZoneParser, so what is served and what
// an error says never depend on which of the two read the file.
// FuzzFastRecords holds the two to the same records.
//
// Each record goes to add as it is read; when fastRecords gives up, what
// it added must be dropped. The records' names are parts of file, which
// must not change afterwards.
func fastRecords(file []byte, origin, path string, defTTL uint32, add func(dns.RR)) bool {
	if origin != "" {
		origin = dns.Fqdn(origin)
		if _, ok := dns.IsDomainName(origin); !ok {
			return false
		}
	}
	p := fastParser{origin: origin, path: path, ttl: defTTL}
	// The file as a string without a copy: on a start, every page a
	// copy touches is a page fault more.
	data := unsafe.String(unsafe.SliceData(file), len(file))
	for len(data) > 0 {
		rr, rest, ok := p.next(data)
		if !ok {
			return false
		}
		if rr != nil {
			add(rr)
		}
		data = rest
	}
	return true
}

// fastParser is what ZoneParser keeps between records.
type fastParser struct {
	origin    string
	path      string
	owner     string     // the last owner, for lines that start with a blank
	ttl       uint32     // the TTL of records that give none
	directive bool       // ttl was set by $TTL, not by an earlier record
	toks      [16]string // a line's tokens
	ends      [16]int    // where each ends in its line
	ips       []byte     // where A and AAAA data are cut from
}

// special reports whether ZoneParser's lexer gives c a meaning other
// than a token's byte ('\r' it drops).
func special(c byte) bool {
	return c == '(' || c == ')' || c == '"' || c == '\\' || c == '\r'
}

func blank(c byte) bool { return c == ' ' || c == '\t' }

// next reads the record (or directive, or blank line) at the start of
// data and returns the record, or nil, and what follows it.
func (p *fastParser) next(data string) (rr dns.RR, rest string, ok bool) {
	line, newline := data, false
	if i := strings.IndexByte(data, '\n'); i >= 0 {
		line, rest, newline = data[:i], data[i+1:], true
	}
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	code := line
	if i := strings.IndexByte(code, ';'); i >= 0 {
		code = code[:i]
	}
	// The line's tokens up to its first special byte: each ends at a
	// blank or at the end of code; one glued to a special byte is not
	// taken (it is data, or the line is not for us).
	complexAt, n := -1, 0
	for i := 0; i < len(code); {
		if blank(code[i]) {
			i++
			continue
		}
		j := i
		for j < len(code) && !blank(code[j]) && !special(code[j]) {
			j++
		}
		if j < len(code) && special(code[j]) || n == len(p.toks) {
			complexAt = i
			break
		}
		p.toks[n], p.ends[n] = code[i:j], j
		n++
		i = j
	}
	toks := p.toks[:n]
	if complexAt < 0 && n == 0 {
		return nil, rest, true // blank or comment only
	}
	leading := blank(line[0])
	if !leading && n > 0 && toks[0][0] == '$' {
		return nil, rest, complexAt < 0 && p.dollar(toks)
	}

	// Owner, TTL and class in either order, the type.
	h := dns.RR_Header{Class: dns.ClassINET, Ttl: p.ttl}
	i := 0
	if !leading {
		if n == 0 {
			return nil, "", false
		}
		name, ok := absName(toks[0], p.origin)
		if !ok {
			return nil, "", false
		}
		p.owner, i = name, 1
	}
	if p.owner == "" {
		return nil, "", false
	}
	h.Name = p.owner
	typ := -1
	var hasTTL, hasClass bool
	for ; i < n && typ < 0; i++ {
		kind, t := headToken(toks[i])
		switch {
		case kind == headType:
			h.Rrtype, typ = t, i
		case kind == headClass && !hasClass:
			hasClass = true
		case kind == headString && !hasTTL:
			ttl, ok := zoneTTL(toks[i])
			if !ok {
				return nil, "", false
			}
			hasTTL, h.Ttl = true, ttl
			if !p.directive {
				p.ttl = ttl
			}
		default:
			return nil, "", false
		}
	}
	if typ < 0 {
		return nil, "", false
	}
	typeEnd := p.ends[typ]
	if complexAt >= 0 {
		// ZoneParser reads the data, from the blank after the type to
		// the end of the record, perhaps some lines further on.
		end, ok := recordEnd(data, complexAt)
		if !ok {
			return nil, "", false
		}
		rest = data[min(end+1, len(data)):]
		rr, ok = p.delegate(h, toks[typ], data[typeEnd:end], end < len(data))
		return rr, rest, ok
	}
	rdata := toks[typ+1:]
	if len(rdata) == 0 {
		return nil, "", false
	}
	rr, known, ok := p.rdata(h, rdata)
	if !known {
		rr, ok = p.delegate(h, toks[typ], line[typeEnd:], newline)
	}
	return rr, rest, ok
}

// dollar follows a $TTL or $ORIGIN line; any other directive is not for
// fastRecords.
func (p *fastParser) dollar(toks []string) bool {
	if len(toks) != 2 {
		return false
	}
	if kind, _ := headToken(toks[1]); kind != headString {
		return false // ZoneParser's lexer takes it for a type or class
	}
	switch {
	case strings.EqualFold(toks[0], "$TTL"):
		ttl, ok := zoneTTL(toks[1])
		p.ttl, p.directive = ttl, true
		return ok
	case strings.EqualFold(toks[0], "$ORIGIN"):
		origin, ok := absName(toks[1], p.origin)
		p.origin = origin
		return ok
	}
	return false
}

type headKind int

const (
	headOther  headKind = iota // not for fastRecords: see headToken
	headString                 // neither a type nor a class
	headType
	headClass // IN
)

// headToken tells what ZoneParser's lexer takes a token before the type
// for, and the type's number. headOther is what fastRecords leaves to
// ZoneParser: classes other than IN, ANY and NONE (a type and a class),
// TYPEn and CLASSn, and tokens with non-ASCII bytes, which
// strings.ToUpper may turn into a type's name.
func headToken(t string) (headKind, uint16) {
	switch {
	case t == "IN":
		return headClass, 0
	case '0' <= t[0] && t[0] <= '9': // no type's or class's name does
		return headString, 0
	}
	var buf [16]byte
	up := buf[:min(len(t), len(buf))]
	for i := range len(t) {
		c := t[i]
		if c >= 0x80 {
			return headOther, 0
		}
		if 'a' <= c && c <= 'z' {
			c -= 'a' - 'A'
		}
		if i < len(up) {
			up[i] = c
		}
	}
	if bytes.HasPrefix(up, []byte("TYPE")) || bytes.HasPrefix(up, []byte("CLASS")) {
		return headOther, 0
	}
	if len(t) > len(buf) {
		return headString, 0 // longer than any type's or class's name
	}
	typ, isType := dns.StringToType[string(up)]
	class, isClass := dns.StringToClass[string(up)]
	switch {
	case isType && !isClass:
		return headType, typ
	case isClass && !isType && class == dns.ClassINET:
		return headClass, 0
	case isType || isClass:
		return headOther, 0
	}
	return headString, 0
}

// rdata builds the records fastRecords reads itself; known is false for
// other types.
func (p *fastParser) rdata(h dns.RR_Header, rd []string) (rr dns.RR, known, ok bool) {
	switch h.Rrtype {
	case dns.TypeA, dns.TypeAAAA:
		if len(rd) != 1 {
			return nil, true, false
		}
		// As net.ParseIP, which ZoneParser calls, into p.ips.
		addr, err := netip.ParseAddr(rd[0])
		v6 := strings.IndexByte(rd[0], ':') >= 0
		if err != nil || addr.Zone() != "" || v6 != (h.Rrtype == dns.TypeAAAA) {
			return nil, true, false
		}
		if len(p.ips) < net.IPv6len {
			p.ips = make([]byte, 256*net.IPv6len)
		}
		ip := net.IP(p.ips[:net.IPv6len:net.IPv6len])
		p.ips = p.ips[net.IPv6len:]
		*(*[net.IPv6len]byte)(ip) = addr.As16()
		if v6 {
			return &dns.AAAA{Hdr: h, AAAA: ip}, true, true
		}
		return &dns.A{Hdr: h, A: ip}, true, true
	case dns.TypeNS, dns.TypeCNAME, dns.TypePTR:
		if len(rd) != 1 {
			return nil, true, false
		}
		name, ok := absName(rd[0], p.origin)
		switch h.Rrtype {
		case dns.TypeNS:
			rr = &dns.NS{Hdr: h, Ns: name}
		case dns.TypeCNAME:
			rr = &dns.CNAME{Hdr: h, Target: name}
		default:
			rr = &dns.PTR{Hdr: h, Ptr: name}
		}
		return rr, true, ok
	case dns.TypeMX:
		if len(rd) != 2 {
			return nil, true, false
		}
		pref, err := strconv.ParseUint(rd[0], 10, 16)
		name, ok := absName(rd[1], p.origin)
		return &dns.MX{Hdr: h, Preference: uint16(pref), Mx: name}, true, ok && err == nil
	case dns.TypeSRV:
		if len(rd) != 4 {
			return nil, true, false
		}
		var v [3]uint16
		for i := range v {
			n, err := strconv.ParseUint(rd[i], 10, 16)
			if err != nil {
				return nil, true, false
			}
			v[i] = uint16(n)
		}
		name, ok := absName(rd[3], p.origin)
		return &dns.SRV{Hdr: h, Priority: v[0], Weight: v[1], Port: v[2], Target: name}, true, ok
	}
	return nil, false, false
}

// delegate has ZoneParser read one record whose header fastRecords has
// read: typ is its type's token, data the rest of the record, newline
// whether a newline ended it.
func (p *fastParser) delegate(h dns.RR_Header, typ, data string, newline bool) (dns.RR, bool) {
	if strings.ContainsAny(h.Name, " \t\r\n;()\"\\") {
		return nil, false
	}
	var b strings.Builder
	b.Grow(len(h.Name) + len(typ) + len(data) + 16)
	b.WriteString(h.Name)
	b.WriteByte(' ')
	b.WriteString(strconv.FormatUint(uint64(h.Ttl), 10))
	b.WriteString(" IN ")
	b.WriteString(typ)
	b.WriteString(data)
	if newline {
		b.WriteByte('\n')
	}
	zp := dns.NewZoneParser(strings.NewReader(b.String()), p.origin, p.path)
	rr, ok := zp.Next()
	if !ok || zp.Err() != nil {
		return nil, false
	}
	if _, more := zp.Next(); more || zp.Err() != nil {
		return nil, false
	}
	return rr, true
}

// recordEnd finds the newline that ends a record whose special bytes
// start at data[from]: the first outside quotes, comments and
// parentheses (len(data) at the end of the file). ok is false when the
// file ends inside quotes or parentheses, or a parenthesis closes that
// was not open.
func recordEnd(data string, from int) (end int, ok bool) {
	depth, quote, comment := 0, false, false
	for i := from; i < len(data); i++ {
		c := data[i]
		switch {
		case comment:
			if c == '\n' {
				comment = false
				if depth == 0 {
					return i, true
				}
			}
		case c == '\\':
			if i+1 < len(data) && data[i+1] != '\n' {
				i++ // the escaped byte is the token's
			}
		case c == '"':
			quote = !quote
		case quote:
		case c == ';':
			comment = true
		case c == '(':
			depth++
		case c == ')':
			if depth--; depth < 0 {
				return 0, false
			}
		case c == '\n' && depth == 0:
			return i, true
		}
	}
	return len(data), depth == 0 && !quote
}

// absName makes name absolute against origin as ZoneParser does: "@" is
// the origin, a name without a final dot is relative to it.
func absName(name, origin string) (string, bool) {
	if name == "@" {
		return origin, origin != ""
	}
	if _, ok := dns.IsDomainName(name); !ok || name == "" {
		return "", false
	}
	switch {
	case dns.IsFqdn(name):
		return name, true
	case origin == "":
		return "", false
	case origin == ".":
		return name + origin, true
	}
	return name + "." + origin, true
}

// zoneTTL reads a TTL as ZoneParser does: seconds, or a sum of numbers
// each followed by s, m, h, d or w (any case).
func zoneTTL(t string) (uint32, bool) {
	var sum, cur uint64
	for i := range len(t) {
		switch c := t[i]; c {
		case 's', 'S':
			sum, cur = sum+cur, 0
		case 'm', 'M':
			sum, cur = sum+cur*60, 0
		case 'h', 'H':
			sum, cur = sum+cur*3600, 0
		case 'd', 'D':
			sum, cur = sum+cur*86400, 0
		case 'w', 'W':
			sum, cur = sum+cur*604800, 0
		default:
			if c < '0' || c > '9' {
				return 0, false
			}
			cur = cur*10 + uint64(c-'0')
		}
		if sum > math.MaxUint32 || cur > math.MaxUint32 {
			return 0, false
		}
	}
	if sum+cur > math.MaxUint32 {
		return 0, false
	}
	return uint32(sum + cur), true
}
