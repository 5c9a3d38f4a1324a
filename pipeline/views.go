package pipeline

import (
	"fmt"
	"net/netip"
)

// Views (split horizon): a view is a second zone table chosen by who asks
// and where. The views are checked in order and the first that matches
// the query wins; a name that none of its zones matches is resolved by the
// default (top-level) zones, never by a later view. Which views a client
// address is in is one walk down a binary trie of every view's prefixes,
// whatever their number.

// MaxViews bounds the number of views (a client's matches are a bit set).
const MaxViews = 64

// DefaultView is the name of the top-level zones as a view (metrics, logs).
const DefaultView = "default"

// ViewSpec declares one view.
type ViewSpec struct {
	Name string // required: unique, not DefaultView
	// Clients: client addresses the view is for; empty matches every client.
	Clients []netip.Prefix
	// Listen: listen entries (Request.Listen values) the view is for; empty
	// matches every entry.
	Listen []string
	// Zones answer the view's queries; a name none of them holds is
	// answered by the top-level zones (none: all of them are).
	Zones []ZoneSpec
}

type view struct {
	name      string
	table     table
	anyClient bool
	listen    map[string]struct{} // nil: any
}

type views struct {
	list   []*view
	v4, v6 *trieNode
}

// trieNode is a node of a binary trie over address bits; views has the
// bit of every view with a prefix ending at this node.
type trieNode struct {
	kids  [2]*trieNode
	views uint64
}

func (p *Pipeline) compileViews(specs []ViewSpec, seen map[any]struct{}) (*views, []error) {
	if len(specs) > MaxViews {
		return nil, []error{fmt.Errorf("pipeline: %d views, at most %d", len(specs), MaxViews)}
	}
	vs := &views{v4: &trieNode{}, v6: &trieNode{}}
	var errs []error
	names := map[string]bool{DefaultView: true}
	for i, spec := range specs {
		if names[spec.Name] {
			errs = append(errs, fmt.Errorf("pipeline: view %q declared twice (or named %q)", spec.Name, DefaultView))
			continue
		}
		names[spec.Name] = true
		t, terrs := p.compile(spec.Zones, seen)
		for _, e := range terrs {
			errs = append(errs, fmt.Errorf("view %q: %w", spec.Name, e))
		}
		v := &view{name: spec.Name, table: t, anyClient: len(spec.Clients) == 0}
		if len(spec.Listen) > 0 {
			v.listen = make(map[string]struct{}, len(spec.Listen))
			for _, l := range spec.Listen {
				v.listen[l] = struct{}{}
			}
		}
		for _, pfx := range spec.Clients {
			vs.insert(pfx, uint64(1)<<i)
		}
		vs.list = append(vs.list, v)
	}
	return vs, errs
}

func (vs *views) insert(pfx netip.Prefix, mask uint64) {
	pfx = pfx.Masked()
	addr, bits := pfx.Addr(), pfx.Bits()
	n := vs.v6
	if addr.Is4() {
		n = vs.v4
	} else if addr.Is4In6() && bits >= 96 {
		addr, bits, n = addr.Unmap(), bits-96, vs.v4
	}
	b := addr.AsSlice()
	for i := 0; i < bits; i++ {
		bit := (b[i/8] >> (7 - i%8)) & 1
		if n.kids[bit] == nil {
			n.kids[bit] = &trieNode{}
		}
		n = n.kids[bit]
	}
	n.views |= mask
}

// clientViews returns the set of views with a prefix containing a.
func (vs *views) clientViews(a netip.Addr) uint64 {
	a = a.Unmap()
	n, bits := vs.v6, 128
	if a.Is4() {
		n, bits = vs.v4, 32
	}
	var set uint64
	if !a.IsValid() {
		return 0
	}
	b := a.As16()
	off := 0
	if bits == 32 {
		off = 12
	}
	for i := 0; n != nil; i++ {
		set |= n.views
		if i == bits {
			break
		}
		n = n.kids[(b[off+i/8]>>(7-i%8))&1]
	}
	return set
}

// pick returns the first view that matches the client and the listen
// entry, or nil (the default zones).
func (vs *views) pick(client netip.Addr, listen string) *view {
	var set uint64
	looked := false
	for i, v := range vs.list {
		if !v.anyClient {
			if !looked {
				set, looked = vs.clientViews(client), true
			}
			if set&(uint64(1)<<i) == 0 {
				continue
			}
		}
		if v.listen != nil {
			if _, ok := v.listen[listen]; !ok {
				continue
			}
		}
		return v
	}
	return nil
}
