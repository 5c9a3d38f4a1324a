package config

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/dnsd/dnsd/internal/quote"
)

// zoneSeen records where a zone name was first declared.
type zoneSeen struct {
	key string
	pos Pos
}

func (p *Parser) zones(m *Mapping) []Zone {
	n, path := m.Get("zones")
	if n == nil {
		at := m.node
		if m.Has("zones") {
			at = m.KeyNode("zones")
		}
		p.Errorf(at, path, "no zones: nothing to serve (add a zones: mapping of zone names to sources)")
		return nil
	}
	if n.Kind != yaml.MappingNode {
		p.Errorf(n, path, "expected a mapping of zone names to source lists, got %s", Describe(n))
		return nil
	}
	if len(n.Content) == 0 {
		p.Errorf(n, path, "no zones: nothing to serve")
		return nil
	}
	seen := map[string]zoneSeen{}
	var zones []Zone
	for _, kv := range p.pairs(n, path) {
		k, v := deref(kv[0]), kv[1]
		if k.Kind != yaml.ScalarNode {
			p.Errorf(k, path, "a zone key must be a string of zone names, got %s", Describe(k))
			continue
		}
		zpath := KeyPath(path, k.Value)
		z := Zone{Key: k.Value, Pos: p.Pos(k)}
		z.Names = p.zoneNames(k, zpath, seen)
		z.Sources = p.sources(v, zpath, &z)
		zones = append(zones, z)
	}
	return zones
}

// zoneNames splits a zone key into normalised zone names, expanding CIDRs
// into their reverse zones and reporting duplicates across all keys.
func (p *Parser) zoneNames(k *yaml.Node, path string, seen map[string]zoneSeen) []string {
	var names []string
	toks := fieldsWithOffsets(k.Value)
	if len(toks) == 0 {
		p.Errorf(k, path, "empty zone key: expected one or more zone names separated by spaces")
		return nil
	}
	for _, t := range toks {
		pos := p.Pos(k)
		switch k.Style {
		case 0:
			pos.Col += t.off
		case yaml.DoubleQuotedStyle, yaml.SingleQuotedStyle:
			pos.Col += t.off + 1
		}
		expanded, err := zoneNamesOf(t.s)
		if err != nil {
			p.ErrorAt(pos, path, "%v", err)
			continue
		}
		from := ""
		if strings.Contains(t.s, "/") {
			from = " (from " + t.s + ")"
		}
		for _, name := range expanded {
			if first, dup := seen[name]; dup {
				p.ErrorAt(pos, path, "duplicate zone %s%s: already declared in key %s at %s", quote.QS(name), from, quote.QS(first.key), first.pos)
				continue
			}
			seen[name] = zoneSeen{key: k.Value, pos: pos}
			names = append(names, name)
		}
	}
	return names
}

// zoneNamesOf is the zones one name of a zone key stands for: itself,
// normalised, or for a CIDR its reverse zones.
func zoneNamesOf(s string) ([]string, error) {
	if strings.Contains(s, "/") {
		pr, err := parsePrefix(s)
		if err != nil {
			return nil, err
		}
		return ReverseZones(pr), nil
	}
	name, err := NormalizeName(s)
	if err != nil {
		return nil, fmt.Errorf("bad zone name: %w", err)
	}
	return []string{name}, nil
}

type token struct {
	s   string
	off int // byte offset in the key
}

func fieldsWithOffsets(s string) []token {
	var toks []token
	start := -1
	for i, r := range s {
		space := r == ' ' || r == '\t' || r == '\n' || r == '\r'
		switch {
		case space && start >= 0:
			toks = append(toks, token{s[start:i], start})
			start = -1
		case !space && start < 0:
			start = i
		}
	}
	if start >= 0 {
		toks = append(toks, token{s[start:], start})
	}
	return toks
}

// NormalizeName validates a domain name and returns it in lower case,
// fully qualified. "." is the root. Labels are 1-63 characters of
// letters, digits, '-' and '_'; the whole name at most 253 characters
// (without the final dot).
func NormalizeName(s string) (string, error) {
	return normalizeDomain(s, false)
}

// NormalizeWildcardName is NormalizeName for names that may be
// wildcards: the first label may also be "*" alone
// ("*.apps.example.internal").
func NormalizeWildcardName(s string) (string, error) {
	return normalizeDomain(s, true)
}

func normalizeDomain(s string, wildcard bool) (string, error) {
	if s == "." {
		return ".", nil
	}
	name := strings.ToLower(strings.TrimSuffix(s, "."))
	if name == "" {
		return "", fmt.Errorf("empty name")
	}
	if len(name) > 253 {
		return "", fmt.Errorf("%s is longer than 253 characters", quote.QS(s))
	}
	first := true
	for label := range strings.SplitSeq(name, ".") {
		if label == "" {
			return "", fmt.Errorf("%s has an empty label", quote.QS(s))
		}
		if len(label) > 63 {
			return "", fmt.Errorf("%s has a label longer than 63 characters", quote.QS(s))
		}
		if wildcard && first && label == "*" {
			first = false
			continue
		}
		first = false
		for _, c := range label {
			if wildcard && c == '*' {
				return "", fmt.Errorf("%s: '*' is allowed only as the whole first label (a wildcard: *.apps.example.internal)", quote.QS(s))
			}
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return "", fmt.Errorf("%s: character %q is not allowed (letters, digits, '-' and '_')", quote.QS(s), c)
			}
		}
	}
	return name + ".", nil
}

// ReverseZones returns the reverse-DNS zones covering a prefix: for IPv4
// the in-addr.arpa zones at the next octet boundary (10.96.0.0/12 gives
// 96.10.in-addr.arpa. ... 111.10.in-addr.arpa.), for IPv6 the ip6.arpa
// zones at the next nibble boundary. A prefix yields at most 128 zones
// (IPv4 /n with n%8 == 1) or 8 (IPv6).
func ReverseZones(pr netip.Prefix) []string {
	pr = pr.Masked()
	bits := pr.Bits()
	if pr.Addr().Is4() {
		octets := (bits + 7) / 8
		a := pr.Addr().As4()
		count := 1 << (octets*8 - bits)
		zones := make([]string, 0, count)
		for i := range count {
			var b strings.Builder
			for j := octets - 1; j >= 0; j-- {
				o := int(a[j])
				if j == octets-1 {
					o += i
				}
				b.WriteString(strconv.Itoa(o))
				b.WriteByte('.')
			}
			b.WriteString("in-addr.arpa.")
			zones = append(zones, b.String())
		}
		return zones
	}
	nibbles := (bits + 3) / 4
	a := pr.Addr().As16()
	count := 1 << (nibbles*4 - bits)
	zones := make([]string, 0, count)
	for i := range count {
		var b strings.Builder
		for j := nibbles - 1; j >= 0; j-- {
			nb := int(a[j/2]>>(4*(1-j%2))) & 0xf
			if j == nibbles-1 {
				nb += i
			}
			b.WriteString(strconv.FormatInt(int64(nb), 16))
			b.WriteByte('.')
		}
		b.WriteString("ip6.arpa.")
		zones = append(zones, b.String())
	}
	return zones
}

// sources parses a zone's value: a non-empty list of single-key mappings
// `kind: {settings}`.
func (p *Parser) sources(v *yaml.Node, path string, z *Zone) []Source {
	if isNull(v) {
		p.Errorf(v, path, "no sources: expected a list such as [- hosts: {files: [...]}]")
		return nil
	}
	v = deref(v)
	if v.Kind != yaml.SequenceNode {
		p.Errorf(v, path, "expected a list of sources (- kind: {settings}), got %s", Describe(v))
		return nil
	}
	if len(v.Content) == 0 {
		p.Errorf(v, path, "no sources: the list is empty")
		return nil
	}
	var out []Source
	known := p.kinds.names()
	for i, it := range v.Content {
		ipath := IndexPath(path, i)
		it = deref(it)
		var kindNode, settings *yaml.Node
		var pairs [][2]*yaml.Node
		if it.Kind == yaml.MappingNode {
			pairs = p.pairs(it, ipath)
		}
		switch {
		case it.Kind == yaml.ScalarNode && p.kinds.lookup(it.Value) != nil:
			kindNode = it // "- forward" without a colon: all defaults
		case it.Kind == yaml.MappingNode && len(pairs) == 1:
			kindNode, settings = deref(pairs[0][0]), pairs[0][1]
		case it.Kind == yaml.MappingNode:
			var keys []string
			for _, kv := range pairs {
				keys = append(keys, kv[0].Value)
			}
			p.Errorf(it, ipath, "a source has exactly one kind, got %d keys (%s): start each source with its own \"- \"", len(keys), strings.Join(keys, ", "))
			continue
		default:
			p.Errorf(it, ipath, "expected a source (kind: {settings}, kind one of %s), got %s", strings.Join(known, ", "), Describe(it))
			continue
		}
		kind := p.kinds.lookup(kindNode.Value)
		if kindNode.Kind != yaml.ScalarNode || kind == nil {
			p.Errorf(kindNode, ipath, "unknown source kind %s (known: %s)", quote.QS(kindNode.Value), strings.Join(known, ", "))
			continue
		}
		spath := KeyPath(ipath, kind.Name())
		src := Source{Kind: kind.Name(), Fallthrough: kind.DefaultFallthrough(), Pos: p.Pos(it)}
		m := p.Mapping(settings, spath, append(kind.Settings().Keys(), "fallthrough")...)
		if m == nil {
			continue
		}
		m.Bool("fallthrough", &src.Fallthrough)
		src.Settings = kind.Settings().Parse(&Block{Mapping: m, Parser: p, Path: spath, Zone: z, At: kindNode})
		out = append(out, src)
	}
	return out
}
