package etcd

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/netip"
	"strconv"
	"strings"

	"github.com/miekg/dns"

	"github.com/dnsd/dnsd/pipeline"
)

// maxNameLen is the longest name in presentation format with its final dot.
const maxNameLen = 254

// keyName maps an etcd key below prefix to the lower-case FQDN it names:
// the key's path segments after the prefix, in reverse order, joined with
// dots (/skydns/internal/example/b/a under /skydns: a.b.example.internal.).
// Empty segments (a trailing "/", "//") are ignored; the prefix itself
// names the root ".". A segment must be a DNS label of letters, digits,
// '-' and '_' (upper case folds to lower), or exactly "*". The last
// segment may instead be a record ID, "@" and label characters: the key
// is then a record of the name of the segments before it
// (/skydns/internal/example/db/@a-1 is a record of db.example.internal.),
// counted at that name only (see recordKey).
func keyName(prefix, key string) (string, error) {
	rest, ok := strings.CutPrefix(key, prefix)
	if !ok || (prefix != "/" && rest != "" && rest[0] != '/') {
		return "", fmt.Errorf("key is not below the prefix %s", prefix)
	}
	rest, err := cutRecordID(rest)
	if err != nil {
		return "", err
	}
	n := 0 // name length with dots
	labels := 0
	for seg := range strings.SplitSeq(rest, "/") {
		if seg == "" {
			continue
		}
		if err := checkLabel(seg); err != nil {
			return "", err
		}
		n += len(seg) + 1
		labels++
	}
	if labels == 0 {
		return ".", nil
	}
	if n > maxNameLen {
		return "", fmt.Errorf("name longer than %d characters", maxNameLen-1)
	}
	b := make([]byte, n)
	end := n
	for seg := range strings.SplitSeq(rest, "/") {
		if seg == "" {
			continue
		}
		end--
		b[end] = '.'
		end -= len(seg)
		for i := 0; i < len(seg); i++ {
			c := seg[i]
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			b[end+i] = c
		}
	}
	return string(b), nil
}

// cutRecordID returns rest (a key's path below the prefix) without its
// last segment when that is a record ID ("@" and letters, digits, '-',
// '_'; at most 63 characters).
func cutRecordID(rest string) (string, error) {
	end := len(strings.TrimRight(rest, "/"))
	i := strings.LastIndexByte(rest[:end], '/') + 1
	seg := rest[i:end]
	if !strings.HasPrefix(seg, "@") {
		return rest, nil
	}
	if len(seg) > 63 {
		return "", fmt.Errorf("record ID %.20q... longer than 63 characters", seg)
	}
	for j := 1; j < len(seg); j++ {
		if c := seg[j]; !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return "", fmt.Errorf("record ID %q: character %q not allowed (letters, digits, '-', '_')", seg, c)
		}
	}
	return rest[:i], nil
}

// recordKey reports whether key ends in a record ID segment ("@…"): its
// records count at its own name only, not at the name's parent as a
// child's records do.
func recordKey(key string) bool {
	key = strings.TrimRight(key, "/")
	i := strings.LastIndexByte(key, '/')
	return i >= 0 && i+1 < len(key) && key[i+1] == '@'
}

// checkLabel reports whether s is a label a key segment may hold.
func checkLabel(s string) error {
	if len(s) > 63 {
		return fmt.Errorf("label %.20q... longer than 63 characters", s)
	}
	if s == "*" {
		return nil
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return fmt.Errorf("label %q: character %q not allowed (letters, digits, '-', '_', or a whole-label '*')", s, c)
		}
	}
	return nil
}

// value is one SkyDNS service value (the JSON stored at a key).
type value struct {
	Host        string  `json:"host"`        // "": none
	Port        jsonInt `json:"port"`        // 0: none
	Priority    jsonInt `json:"priority"`    // 0: none
	Weight      jsonInt `json:"weight"`      // 0: none
	Text        string  `json:"text"`        // "": none
	Mail        bool    `json:"mail"`        // false: not a mail server
	TTL         jsonInt `json:"ttl"`         // 0: the source's ttl
	TargetStrip jsonInt `json:"targetstrip"` // 0: none stripped
	Group       string  `json:"group"`       // "": no group
}

// jsonInt is an integer written as a JSON number or as a string holding
// a decimal integer ("ttl": "60" appears in CoreDNS's examples).
type jsonInt int64

func (j *jsonInt) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	s := string(b)
	if len(b) >= 2 && b[0] == '"' {
		var err error
		if s, err = strconv.Unquote(s); err != nil {
			return err
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return fmt.Errorf("%s is not an integer", b)
	}
	*j = jsonInt(n)
	return nil
}

// Defaults SkyDNS applies (CoreDNS's msg package does the same).
const (
	defaultPriority = 10
	defaultWeight   = 100
)

// parsed is what one key contributes: its records and its group.
type parsed struct {
	rrs    []dns.RR
	group  string
	ownTTL bool    // the value had a "ttl" (else the records have the default)
	set    *ownSet // rrs as an index's set, for a lone A or AAAA record
}

// parseValue decodes a SkyDNS value stored at name (the key's own name)
// into records, all owned by name. ttl is used for values without "ttl".
// Any problem (bad JSON, unknown field, bad IP, out-of-range number, a
// value that gives no record) is an error and the value gives nothing.
func parseValue(name string, data []byte, ttl uint32) (parsed, error) {
	v, ok := fastValue(data)
	if !ok {
		var err error
		if v, err = decodeValue(data); err != nil {
			return parsed{}, err
		}
	}
	if err := v.check(); err != nil {
		return parsed{}, err
	}
	ownTTL := v.TTL > 0
	if ownTTL {
		ttl = uint32(v.TTL)
	}
	hdr := func(t uint16) dns.RR_Header {
		return dns.RR_Header{Name: name, Rrtype: t, Class: dns.ClassINET, Ttl: ttl}
	}
	var rrs []dns.RR
	var addr netip.Addr
	var target string // SRV/MX target, CNAME/PTR target
	if v.Host != "" {
		var err error
		addr, target, err = parseHost(v.Host)
		if err != nil {
			return parsed{}, err
		}
	}
	if lone := v.Port == 0 && !v.Mail && v.Text == ""; lone && addr.IsValid() {
		// The common value: one address, built as the index keeps it.
		var set *ownSet
		if addr.Is4() {
			set = newOwnA(hdr(dns.TypeA), addr.As4())
		} else {
			set = newOwnAAAA(hdr(dns.TypeAAAA), addr.As16())
		}
		return parsed{rrs: set.rrs, group: v.Group, ownTTL: ownTTL, set: set}, nil
	}
	switch {
	case addr.Is4():
		a4 := addr.As4()
		rrs = append(rrs, &dns.A{Hdr: hdr(dns.TypeA), A: net.IP(a4[:])})
	case addr.Is6():
		a16 := addr.As16()
		rrs = append(rrs, &dns.AAAA{Hdr: hdr(dns.TypeAAAA), AAAA: net.IP(a16[:])})
	case target != "" && pipeline.Reverse(name): // a host name gives a PTR record
		rrs = append(rrs, &dns.PTR{Hdr: hdr(dns.TypePTR), Ptr: target})
	case target != "" && v.Port == 0 && !v.Mail:
		rrs = append(rrs, &dns.CNAME{Hdr: hdr(dns.TypeCNAME), Target: target})
	}
	if v.Port > 0 || v.Mail {
		// An address host gets a target name synthesized from the key:
		// its own name, which holds the A/AAAA record above.
		t := target
		if addr.IsValid() {
			t = name
		}
		t = stripLabels(t, int(v.TargetStrip))
		prio := uint16(v.Priority)
		if v.Priority == 0 {
			prio = defaultPriority
		}
		if v.Port > 0 {
			w := uint16(v.Weight)
			if v.Weight == 0 {
				w = defaultWeight
			}
			rrs = append(rrs, &dns.SRV{Hdr: hdr(dns.TypeSRV), Priority: prio, Weight: w, Port: uint16(v.Port), Target: t})
		}
		if v.Mail {
			rrs = append(rrs, &dns.MX{Hdr: hdr(dns.TypeMX), Preference: prio, Mx: t})
		}
	}
	if v.Text != "" {
		rrs = append(rrs, &dns.TXT{Hdr: hdr(dns.TypeTXT), Txt: txtStrings(v.Text)})
	}
	return parsed{rrs: rrs, group: v.Group, ownTTL: ownTTL}, nil
}

// decodeValue decodes a value with encoding/json: nothing after the
// object. A member the format does not know is ignored, as SkyDNS and
// CoreDNS ignore it (tools write extra ones, such as "key"); a misspelt
// member that leaves nothing to answer is caught as "no record".
func decodeValue(data []byte) (value, error) {
	var v value
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&v); err != nil {
		return value{}, fmt.Errorf("bad JSON: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return value{}, errors.New("bad JSON: data after the object")
	}
	return v, nil
}

// fastValue decodes the usual value: an object of members spelt in lower
// case, strings of printable ASCII without escapes, numbers as plain
// decimal integers, mail as true or false. Anything else (ok false) is
// left to decodeValue, which also decides what is an error.
// encoding/json's decoder leaves about 1 KB of garbage a value, which
// during the first read of a large prefix decides how far the heap grows
// (FuzzParseValue checks that both decode alike whenever this accepts).
func fastValue(data []byte) (v value, ok bool) {
	i := skipSpace(data, 0)
	if i == len(data) || data[i] != '{' {
		return v, false
	}
	i = skipSpace(data, i+1)
	if i < len(data) && data[i] == '}' {
		return v, skipSpace(data, i+1) == len(data)
	}
	for {
		var k []byte
		if k, i, ok = plainString(data, i); !ok {
			return v, false
		}
		if i = skipSpace(data, i); i == len(data) || data[i] != ':' {
			return v, false
		}
		i = skipSpace(data, i+1)
		var str *string
		var num *jsonInt
		switch string(k) {
		case "host":
			str = &v.Host
		case "text":
			str = &v.Text
		case "group":
			str = &v.Group
		case "port":
			num = &v.Port
		case "priority":
			num = &v.Priority
		case "weight":
			num = &v.Weight
		case "ttl":
			num = &v.TTL
		case "targetstrip":
			num = &v.TargetStrip
		case "mail":
			switch {
			case bytes.HasPrefix(data[i:], []byte("true")):
				v.Mail, i = true, i+4
			case bytes.HasPrefix(data[i:], []byte("false")):
				v.Mail, i = false, i+5
			default:
				return v, false
			}
		default:
			return v, false
		}
		switch {
		case str != nil:
			var b []byte
			if b, i, ok = plainString(data, i); !ok {
				return v, false
			}
			*str = string(b)
		case num != nil:
			j := i
			for j < len(data) && '0' <= data[j] && data[j] <= '9' {
				j++
			}
			if j == i || j-i > 18 || data[i] == '0' && j-i > 1 {
				return v, false
			}
			n, err := strconv.ParseInt(string(data[i:j]), 10, 64)
			if err != nil {
				return v, false
			}
			*num, i = jsonInt(n), j
		}
		if i = skipSpace(data, i); i == len(data) {
			return v, false
		}
		switch data[i] {
		case ',':
			i = skipSpace(data, i+1)
		case '}':
			return v, skipSpace(data, i+1) == len(data)
		default:
			return v, false
		}
	}
}

// plainString reads a JSON string at data[i] made of printable ASCII
// without escapes; it returns its content and the index after it.
func plainString(data []byte, i int) ([]byte, int, bool) {
	if i == len(data) || data[i] != '"' {
		return nil, i, false
	}
	for j := i + 1; j < len(data); j++ {
		switch c := data[j]; {
		case c == '"':
			return data[i+1 : j], j + 1, true
		case c == '\\' || c < ' ' || c > '~':
			return nil, i, false
		}
	}
	return nil, i, false
}

func skipSpace(data []byte, i int) int {
	for i < len(data) && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r') {
		i++
	}
	return i
}

// check validates the numbers and the fields' combination.
func (v *value) check() error {
	for _, f := range []struct {
		name string
		n    jsonInt
		max  int64
	}{
		{"port", v.Port, math.MaxUint16},
		{"priority", v.Priority, math.MaxUint16},
		{"weight", v.Weight, math.MaxUint16},
		{"ttl", v.TTL, math.MaxInt32},
		{"targetstrip", v.TargetStrip, 127},
	} {
		if f.n < 0 || int64(f.n) > f.max {
			return fmt.Errorf("%s %d out of range 0..%d", f.name, f.n, f.max)
		}
	}
	switch {
	case v.Host == "" && v.Text == "":
		return errors.New("neither host nor text: the value gives no record")
	case v.Host == "" && v.Port > 0:
		return errors.New("port without host")
	case v.Host == "" && v.Mail:
		return errors.New("mail without host")
	}
	return nil
}

// parseHost classifies a host: an IP address (IPv4-mapped IPv6 is
// IPv4), else a lower-case FQDN. Something that looks like an address
// but is not one (digits and dots, or a colon) is an error, as is a name
// with characters other than letters, digits, '-', '_' and '.'.
func parseHost(h string) (netip.Addr, string, error) {
	looksIP := strings.IndexByte(h, ':') >= 0
	if !looksIP {
		looksIP = strings.Trim(h, "0123456789.") == ""
	}
	if looksIP {
		a, err := netip.ParseAddr(h)
		if err != nil || a.Zone() != "" {
			return netip.Addr{}, "", fmt.Errorf("bad IP address %q", h)
		}
		return a.Unmap(), "", nil
	}
	for i := 0; i < len(h); i++ {
		c := h[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.' || c == '*') {
			return netip.Addr{}, "", fmt.Errorf("host %q: character %q not allowed in a name", h, c)
		}
	}
	name := strings.ToLower(dns.Fqdn(h))
	if _, ok := dns.IsDomainName(name); !ok || name == "." || strings.Contains(name, "..") || len(name) > maxNameLen {
		return netip.Addr{}, "", fmt.Errorf("host %q is neither an IP address nor a domain name", h)
	}
	return netip.Addr{}, name, nil
}

// stripLabels removes n labels from the left of name; when that would
// leave nothing, name is kept whole (SkyDNS's targetstrip).
func stripLabels(name string, n int) string {
	off := 0
	for range n {
		i := strings.IndexByte(name[off:], '.')
		if i < 0 || off+i+1 >= len(name) {
			return name
		}
		off += i + 1
	}
	return name[off:]
}

// txtStrings splits text into character-strings of at most 255 bytes, in
// the escaped form miekg/dns expects in TXT.Txt.
func txtStrings(text string) []string {
	var out []string
	for len(text) > 0 {
		n := min(len(text), 255)
		out = append(out, escapeTXT(text[:n]))
		text = text[n:]
	}
	return out
}

func escapeTXT(s string) string {
	clean := true
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == '"' || c == '\\' || c < ' ' || c > '~' {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c < ' ' || c > '~':
			fmt.Fprintf(&b, "\\%03d", c)
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}
