package config

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/miekg/dns"
	"gopkg.in/yaml.v3"

	"github.com/dnsd/dnsd/internal/quote"
)

// ManagedType reports whether t is a type no update item may allow: the
// SOA (dnsd keeps each zone's serial) and the DNSSEC types RRSIG, NSEC,
// NSEC3, NSEC3PARAM, DNSKEY, CDS and CDNSKEY. The default of
// Update.Types leaves them out too.
func ManagedType(t uint16) bool {
	switch t {
	case dns.TypeSOA, dns.TypeRRSIG, dns.TypeNSEC, dns.TypeNSEC3, dns.TypeNSEC3PARAM,
		dns.TypeDNSKEY, dns.TypeCDS, dns.TypeCDNSKEY:
		return true
	}
	return false
}

// labels splits an FQDN into its labels; the root has none.
func labels(name string) []string {
	name = strings.TrimSuffix(name, ".")
	if name == "" {
		return nil
	}
	return strings.Split(name, ".")
}

// inZone reports whether name is zone or below it.
func inZone(name, zone string) bool {
	return zone == "." || name == zone || strings.HasSuffix(name, "."+zone)
}

// updates parses the top-level update list. zones are the top-level
// zones (only those can be updated), views the views (to say so of a
// zone only a view has), transfers the transfer items (whose TSIG keys
// an update item may share).
func (p *Parser) updates(m *Mapping, zones []Zone, views []View, transfers []Transfer) []Update {
	items, path, present := m.List("update")
	if !present {
		return nil
	}
	key := map[string]int{} // zone name -> index of its key in zones
	for i, z := range zones {
		for _, n := range z.Names {
			key[n] = i
		}
	}
	inView := map[string]string{} // zone name -> the first view that has it
	for _, v := range views {
		for _, z := range v.Zones {
			for _, n := range z.Names {
				if _, ok := inView[n]; !ok {
					inView[n] = v.Name
				}
			}
		}
	}
	checked := map[int]bool{} // zone keys whose writable source was checked
	keys := newKeyNames(transfers)
	var out []Update
	for i, n := range items {
		ipath := IndexPath(path, i)
		um := p.Mapping(n, ipath, "zones", "tsig", "allow", "names", "types")
		if um == nil {
			continue
		}
		u := Update{Pos: p.Pos(n)}
		zonesOK := p.updateZones(um, n, ipath, &u, zones, key, inView, checked)
		if tn, _ := um.Get("tsig"); tn != nil {
			u.TSIG = p.tsig(um, ipath)
			keys.check(p, um, u.TSIG)
		}
		if an, apath := um.Get("allow"); an != nil {
			u.Allow, _ = p.prefixList(um, "allow")
			if an.Kind == yaml.SequenceNode && len(an.Content) == 0 {
				p.Errorf(an, apath, "empty allow list: no client could update (omit allow to take any client that signs with the tsig key)")
			}
		} else if tn, _ := um.Get("tsig"); tn == nil {
			p.Errorf(n, ipath, "an update item needs tsig or allow: without either, anyone who reaches dnsd could change the zones")
		}
		u.Names = p.updateNames(um, u.Zones, zonesOK)
		u.Types = p.updateTypes(um)
		out = append(out, u)
	}
	return out
}

// updateZones reads an update item's zones into u.Zones, checking that
// each is a top-level zone with exactly one writable source (once per
// zone key, over the whole list). It reports whether every zone was good.
func (p *Parser) updateZones(um *Mapping, n *yaml.Node, ipath string, u *Update, zones []Zone, key map[string]int, inView map[string]string, checked map[int]bool) bool {
	vals, nodes, zpath, zok := um.Strings("zones")
	if !zok {
		p.Errorf(n, KeyPath(ipath, "zones"), "an update item needs zones: the zones its clients may change")
		return false
	}
	if zn, _ := um.Get("zones"); zn.Kind == yaml.SequenceNode && len(zn.Content) == 0 {
		p.Errorf(zn, zpath, "empty zones list: the item would let clients change nothing")
		return false
	}
	ok := len(vals) > 0
	for j, s := range vals {
		jpath := IndexPath(zpath, j)
		names, err := zoneNamesOf(s) // as in zone keys
		if err != nil {
			p.Errorf(nodes[j], jpath, "%v", err)
			ok = false
			continue
		}
		for _, name := range names {
			what := quote.QS(s)
			if strings.Contains(s, "/") {
				what = fmt.Sprintf("%s (from %s)", quote.QS(name), s)
			}
			ki, known := key[name]
			switch {
			case !known && inView[name] != "":
				p.Errorf(nodes[j], jpath, "zone %s is a zone of view %s only: update names top-level zones (a view's zones cannot be updated)", what, quote.QS(inView[name]))
				ok = false
				continue
			case !known:
				p.Errorf(nodes[j], jpath, "zone %s is not a configured zone (update names top-level zones)", what)
				ok = false
				continue
			case slices.Contains(u.Zones, name):
				p.Errorf(nodes[j], jpath, "zone %s is already listed in this item", what)
				continue
			}
			u.Zones = append(u.Zones, name)
			if !checked[ki] {
				checked[ki] = true
				p.writableSource(nodes[j], jpath, name, zones[ki])
			}
		}
	}
	return ok
}

// writableSource checks that zone key z, which holds the zone name an
// update item lists at node n, has exactly one writable source.
func (p *Parser) writableSource(n *yaml.Node, path, name string, z Zone) {
	var at []string
	for _, s := range z.Sources {
		if wk, ok := p.kinds.lookup(s.Kind).(WritableKind); ok && wk.Writable(s.Settings) {
			at = append(at, fmt.Sprintf("%s at %s", s.Kind, s.Pos))
		}
	}
	switch len(at) {
	case 0:
		p.Errorf(n, path, "zone %s has no writable source: add \"- dynamic: {}\" to its sources, or set updates: true on its etcd source (update writes to it)", name)
	case 1:
	default:
		p.Errorf(n, path, "zone %s has %d writable sources (%s): updates need exactly one to write to", name, len(at), strings.Join(at, ", "))
	}
}

// keyNames checks that a TSIG key name stands for one key across the
// transfer and update items.
type keyNames map[string]*TSIG

func newKeyNames(transfers []Transfer) keyNames {
	k := keyNames{}
	for _, t := range transfers {
		if t.TSIG != nil && t.TSIG.Name != "" && t.TSIG.Secret != "" && k[t.TSIG.Name] == nil {
			k[t.TSIG.Name] = t.TSIG
		}
	}
	return k
}

func (k keyNames) check(p *Parser, um *Mapping, t *TSIG) {
	if t == nil || t.Name == "" || t.Algorithm == "" || t.Secret == "" {
		return // reported already
	}
	first := k[t.Name]
	if first == nil {
		k[t.Name] = t
		return
	}
	if first.Algorithm != t.Algorithm || first.Secret != t.Secret {
		tn, path := um.Get("tsig")
		nn := tn // the name's value, when the mapping writes it
		for i := 0; i+1 < len(tn.Content); i += 2 {
			if tn.Content[i].Value == "name" {
				nn = tn.Content[i+1]
			}
		}
		p.Errorf(nn, KeyPath(path, "name"), "tsig key %s is already written with another algorithm or secret (secret_file %s): a key name stands for one key", t.Name, first.SecretFile)
	}
}

// updateNames reads an update item's owner patterns: nil when names is
// not written. zonesOK: the item's zones are all good, so a pattern
// outside them is the pattern's fault.
func (p *Parser) updateNames(um *Mapping, zones []string, zonesOK bool) []string {
	vals, nodes, path, present := um.Strings("names")
	if !present {
		return nil
	}
	if ln, _ := um.Get("names"); ln.Kind == yaml.SequenceNode && len(ln.Content) == 0 {
		p.Errorf(ln, path, "empty names list: no name could be updated (omit names for every name of the zones)")
	}
	out := []string{}
	for j, s := range vals {
		jpath := IndexPath(path, j)
		pat, err := namePattern(s)
		if err != nil {
			p.Errorf(nodes[j], jpath, "bad name pattern: %v", err)
			continue
		}
		if zonesOK && !patternInZones(pat, zones) {
			p.Errorf(nodes[j], jpath, "name %s is outside the item's zones (%s)", quote.QS(s), strings.Join(zones, ", "))
			continue
		}
		if !slices.Contains(out, pat) {
			out = append(out, pat)
		}
	}
	return out
}

// namePattern normalises an owner pattern: a domain name whose labels
// may also be "*".
func namePattern(s string) (string, error) {
	ls := labels(s)
	if s == "." {
		ls = nil
	}
	stars := make([]bool, len(ls))
	for i, l := range ls {
		switch {
		case l == "*":
			stars[i], ls[i] = true, "x" // checked as an ordinary label
		case strings.Contains(l, "*"):
			return "", fmt.Errorf("%s: * must be a whole label (*.dhcp.corp.internal, _acme-challenge.*)", quote.QS(s))
		}
	}
	sub := strings.Join(ls, ".")
	if sub == "" {
		sub = s // "." or "": NormalizeName judges
	} else if strings.HasSuffix(s, ".") {
		sub += "."
	}
	norm, err := NormalizeName(sub)
	if err != nil {
		// The message names the pattern as written, not the one checked.
		return "", errors.New(strings.ReplaceAll(err.Error(), quote.QS(sub), quote.QS(s)))
	}
	if norm == "." {
		return norm, nil
	}
	ls = labels(norm)
	for i := range ls {
		if stars[i] {
			ls[i] = "*"
		}
	}
	return strings.Join(ls, ".") + ".", nil
}

// patternInZones reports whether a pattern can match names of zones: a
// name without "*" must lie in one of them; for one with "*", the labels
// after its last "*" (when there are any) must lie in one or above one.
func patternInZones(pat string, zones []string) bool {
	ls := labels(pat)
	star := -1
	for i, l := range ls {
		if l == "*" {
			star = i
		}
	}
	if star < 0 {
		return slices.ContainsFunc(zones, func(z string) bool { return inZone(pat, z) })
	}
	if star == len(ls)-1 {
		return true
	}
	suffix := strings.Join(ls[star+1:], ".") + "."
	return slices.ContainsFunc(zones, func(z string) bool { return inZone(suffix, z) || inZone(z, suffix) })
}

// updateTypes reads an update item's types: nil when not written.
func (p *Parser) updateTypes(um *Mapping) []uint16 {
	vals, nodes, path, present := um.Strings("types")
	if !present {
		return nil
	}
	if ln, _ := um.Get("types"); ln.Kind == yaml.SequenceNode && len(ln.Content) == 0 {
		p.Errorf(ln, path, "empty types list: no record could be updated (omit types for every type but SOA, DNSSEC types and the apex NS)")
	}
	out := []uint16{}
	for j, s := range vals {
		jpath := IndexPath(path, j)
		t, err := updateType(s)
		if err != nil {
			p.Errorf(nodes[j], jpath, "%v", err)
			continue
		}
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out
}

// updateType reads one record type an update item allows: a mnemonic or
// TYPEnnn (RFC 3597), any case.
func updateType(s string) (uint16, error) {
	up := strings.ToUpper(s)
	t, ok := dns.StringToType[up]
	if !ok {
		if num, found := strings.CutPrefix(up, "TYPE"); found {
			if v, err := strconv.ParseUint(num, 10, 16); err == nil && num != "" && num[0] != '+' {
				t, ok = uint16(v), true
			}
		}
	}
	name := dns.Type(t).String()
	switch {
	case !ok:
		return 0, fmt.Errorf("unknown record type %s (a type such as A, AAAA, PTR, TXT, SRV, CNAME, or TYPEnnn)", quote.QS(s))
	case t == dns.TypeSOA:
		return 0, fmt.Errorf("type SOA cannot be allowed: dnsd manages each zone's SOA (its serial rises with every update)")
	case ManagedType(t):
		return 0, fmt.Errorf("type %s cannot be allowed: DNSSEC records are managed with the zone's signing, not by dynamic update", name)
	case t == 0 || t == dns.TypeOPT || t >= 128 && t <= 255:
		return 0, fmt.Errorf("%s is not a record type: it is a query type or a message's pseudo-record (RFC 6895)", quote.QS(s))
	case t == 65535:
		return 0, fmt.Errorf("%s is a reserved type, not a record type", quote.QS(s))
	}
	return t, nil
}
