package hosts

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"

	"github.com/dnsd/dnsd/internal/fsutil"
	"github.com/dnsd/dnsd/internal/quote"
)

// Line syntax (hosts(5)): an address, then one or more names, separated by
// spaces or tabs; '#' starts a comment anywhere on the line. Names are
// case-insensitive, a trailing dot is optional. An IPv6 address may carry a
// zone (fe80::1%eth0): the zone is dropped and the address is served
// without it, since a DNS record cannot carry a zone (as CoreDNS does). An
// IPv4-mapped IPv6 address (::ffff:10.0.0.1) is served as IPv4 (A/PTR in
// in-addr.arpa.).

// maxNameLen is the longest name in presentation form without the trailing
// dot (253 characters = 255 octets on the wire).
const maxNameLen = 253

// badKind says why a line was rejected.
type badKind uint8

const (
	lineOK badKind = iota
	badAddr
	badNoName
	badName
	// badNames: some of the line's names are bad; the others are kept.
	badNames
	// badLong: a line over fsutil.MaxLine, skipped unread.
	badLong
)

func (k badKind) String() string {
	switch k {
	case badAddr:
		return "bad address"
	case badNoName:
		return "address without names"
	case badName:
		return "bad name"
	case badNames:
		return "bad name (the line's other names are kept)"
	case badLong:
		return fsutil.ErrLongLine.Error()
	}
	return "ok"
}

// span is a name in a parse arena: arena[off : off+n].
type span struct {
	off, n uint32
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'
}

// nextField returns the next whitespace-separated field of line starting
// at i, and the index just after it. field is empty at the end.
func nextField(line []byte, i int) (field []byte, next int) {
	for i < len(line) && isSpace(line[i]) {
		i++
	}
	start := i
	for i < len(line) && !isSpace(line[i]) {
		i++
	}
	return line[start:i], i
}

// parseLine parses one line (no newline). Names are appended to arena in
// lower case with a trailing dot and recorded in spans. A blank or
// comment-only line returns an invalid addr and lineOK. A bad line returns
// the kind and the offending field; arena and spans are then returned as
// they were passed in. A bad name among good ones is left out: the line
// returns its address and good names with badNames and the first bad
// name (as glibc, dnsmasq and CoreDNS keep a line's good names).
func parseLine(line, arena []byte, spans []span) (netip.Addr, []byte, []span, badKind, []byte) {
	if i := bytes.IndexByte(line, '#'); i >= 0 {
		line = line[:i]
	}
	field, i := nextField(line, 0)
	if len(field) == 0 {
		return netip.Addr{}, arena, spans, lineOK, nil
	}
	addr, ok := parseAddr(field)
	if !ok {
		return netip.Addr{}, arena, spans, badAddr, field
	}
	arena0, spans0 := len(arena), len(spans)
	var bad []byte // the first bad name
	for {
		field, i = nextField(line, i)
		if len(field) == 0 {
			break
		}
		start := len(arena)
		arena, ok = appendName(arena, field)
		if !ok {
			arena = arena[:start]
			if bad == nil {
				bad = field
			}
			continue
		}
		spans = append(spans, span{off: uint32(start), n: uint32(len(arena) - start)})
	}
	switch {
	case bad != nil && len(spans) == spans0:
		return netip.Addr{}, arena[:arena0], spans[:spans0], badName, bad
	case bad != nil:
		return addr, arena, spans, badNames, bad
	case len(spans) == spans0:
		return netip.Addr{}, arena, spans, badNoName, nil
	}
	return addr, arena, spans, lineOK, nil
}

// parseAddr parses an IPv4 or IPv6 address. IPv4 is parsed without
// allocating; IPv6 goes through netip (zone stripped first, IPv4-mapped
// addresses unmapped).
func parseAddr(b []byte) (netip.Addr, bool) {
	if a, ok := parseV4(b); ok {
		return a, true
	}
	if bytes.IndexByte(b, ':') < 0 {
		return netip.Addr{}, false
	}
	if i := bytes.IndexByte(b, '%'); i >= 0 {
		if i == len(b)-1 {
			return netip.Addr{}, false // "%" without a zone name
		}
		b = b[:i]
	}
	a, err := netip.ParseAddr(string(b))
	if err != nil || !a.Is6() {
		return netip.Addr{}, false
	}
	return a.Unmap(), true // ::ffff:10.0.0.1 is IPv4 (A), as config does for entries
}

// parseV4 parses dotted-quad IPv4 (decimal, no leading zeros, like netip).
func parseV4(b []byte) (netip.Addr, bool) {
	var ip [4]byte
	i := 0
	for k := range 4 {
		if k > 0 {
			if i >= len(b) || b[i] != '.' {
				return netip.Addr{}, false
			}
			i++
		}
		start, v := i, 0
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			v = v*10 + int(b[i]-'0')
			i++
			if i-start > 3 {
				return netip.Addr{}, false
			}
		}
		if i == start || v > 255 || (b[start] == '0' && i-start > 1) {
			return netip.Addr{}, false
		}
		ip[k] = byte(v)
	}
	if i != len(b) {
		return netip.Addr{}, false
	}
	return netip.AddrFrom4(ip), true
}

// appendName validates a host name and appends it to arena in lower case
// with a trailing dot. Accepted: labels of 1–63 characters from [a-z0-9-_]
// (any case), at most 253 characters without the trailing dot; the first
// label may be "*" alone, which makes the name a wildcard ("*.apps.example",
// RFC 4592). "*" anywhere else ("a.*.b", "*a.b") is rejected. On failure
// arena is returned unchanged.
func appendName(arena, name []byte) ([]byte, bool) {
	if len(name) > 1 && name[len(name)-1] == '.' {
		name = name[:len(name)-1]
	}
	if len(name) == 0 || len(name) > maxNameLen {
		return arena, false
	}
	start, label := len(arena), 0
	for _, c := range name {
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '-', c == '_':
		case c >= 'A' && c <= 'Z':
			c += 'a' - 'A'
		case c == '*':
			if len(arena) != start || len(name) > 1 && name[1] != '.' {
				return arena[:start], false // only a whole first label
			}
		case c == '.':
			if label == 0 {
				return arena[:start], false
			}
			label = -1
		default:
			return arena[:start], false
		}
		label++
		if label > 63 {
			return arena[:start], false
		}
		arena = append(arena, c)
	}
	if label == 0 {
		return arena[:start], false
	}
	return append(arena, '.'), true
}

// ErrBadLine is wrapped by the errors ParseLine returns for a line that is
// not blank but cannot be used.
var ErrBadLine = errors.New("bad hosts line")

// ParseLine parses one hosts-file line (without its newline). It returns
// the address and the names as lower-case FQDNs: what a file's line gives.
// A blank or comment-only line gives no names and a nil error; a line with
// a bad address, a bad name or no names gives an error wrapping
// ErrBadLine, and, when it has good names beside a bad one, its address
// and those names too (they are served).
func ParseLine(line []byte) (addr netip.Addr, names []string, err error) {
	if len(line) > fsutil.MaxLine {
		return netip.Addr{}, nil, fmt.Errorf("%w: %s", ErrBadLine, badLong)
	}
	addr, arena, spans, kind, field := parseLine(line, nil, nil)
	if kind != lineOK {
		if field != nil {
			err = fmt.Errorf("%w: %s %s", ErrBadLine, kind, quote.Q(field))
		} else {
			err = fmt.Errorf("%w: %s", ErrBadLine, kind)
		}
		if kind != badNames {
			return netip.Addr{}, nil, err
		}
	}
	if len(spans) == 0 {
		return netip.Addr{}, nil, nil
	}
	all := string(arena)
	names = make([]string, len(spans))
	for i, s := range spans {
		names[i] = all[s.off : s.off+s.n]
	}
	return addr, names, err
}
