package config

import (
	"net/netip"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/dnsd/dnsd/internal/quote"
)

// maxViews bounds the views (a client's matching views are a 64-bit set).
const maxViews = 64

// views parses the top-level views list. listen is the top-level listen
// list: a view's listen entries must be among them; written is that list
// as written (p.listen), whose rejected entries have an error of their
// own already.
func (p *Parser) views(m *Mapping, listen, written []Listen) []View {
	items, path, present := m.List("views")
	if !present {
		return nil
	}
	if len(items) > maxViews {
		n, _ := m.Get("views")
		p.Errorf(n, path, "%d views: at most %d", len(items), maxViews)
		return nil
	}
	seen := map[string]Pos{}
	var out []View
	for i, n := range items {
		vpath := IndexPath(path, i)
		vm := p.Mapping(n, vpath, "name", "clients", "listen", "zones")
		if vm == nil {
			continue
		}
		v := View{Pos: p.Pos(n)}
		if nn := vm.Str("name", &v.Name); nn == nil {
			p.Errorf(n, vpath, "a view needs a name")
		} else if !viewName(v.Name) {
			p.Errorf(nn, KeyPath(vpath, "name"), "bad view name %s: letters, digits, '-' and '_', at most 63", quote.QS(v.Name))
		} else if v.Name == "default" {
			p.Errorf(nn, KeyPath(vpath, "name"), "%s is the name of the top-level zones; choose another", quote.QS(v.Name))
		} else if at, dup := seen[v.Name]; dup {
			p.Errorf(nn, KeyPath(vpath, "name"), "duplicate view name %s (first at %s)", quote.QS(v.Name), at)
		} else {
			seen[v.Name] = v.Pos
		}
		v.Clients = p.prefixes(vm, "clients")
		ln, lpath := vm.Get("listen") // nil when absent or null
		cn, _ := vm.Get("clients")
		if ln != nil {
			v.Listen, _ = p.listen(vm, true, true)
			for j, l := range v.Listen {
				if !containsListen(listen, l) && !containsListen(written, l) {
					p.ErrorAt(l.Pos, IndexPath(lpath, j), "listen entry %s is not in the top-level listen", quote.QS(l.String()))
				}
			}
		}
		if cn == nil && ln == nil {
			p.Errorf(n, vpath, "view %s needs clients, listen or both (a view without either would take every query)", quote.QS(v.Name))
		}
		v.Zones = p.zones(vm)
		out = append(out, v)
	}
	return out
}

func containsListen(all []Listen, l Listen) bool {
	for _, a := range all {
		if a.Proto == l.Proto && a.Addr == l.Addr {
			return true
		}
	}
	return false
}

func viewName(s string) bool {
	if s == "" || len(s) > 63 {
		return false
	}
	return strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_')
	}) < 0
}

// prefixes reads a view's list of client CIDRs at key (nil when absent).
func (p *Parser) prefixes(m *Mapping, key string) []netip.Prefix {
	out, present := p.prefixList(m, key)
	if !present {
		return nil
	}
	if n, path := m.Get(key); n != nil && n.Kind == yaml.SequenceNode && len(n.Content) == 0 {
		p.Errorf(n, path, "empty %s list (omit %s to match every client)", key, key)
	}
	return out
}
