package etcd

import (
	"hash/maphash"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/miekg/dns"
)

// index holds the records of every key below the prefix, by name. One
// writer (the backend's watch goroutine) applies puts and deletes; any
// number of readers look names up concurrently without locks.
//
// Each name is a node in a tree of labels. A node exists while at least
// one key is at or below its name. Its own records (from keys naming it)
// are published as an immutable slice behind an atomic pointer; a put or
// delete rebuilds only the touched name's slice, so an event costs
// O(records at that name), never O(index). A name's answer also includes
// the own records of its direct children (SkyDNS: several keys below a
// name are several records of it); that combined set is computed by the
// first reader after a change and cached with a generation number.
type index struct {
	prefix string
	ttl    uint32 // for values without "ttl", seconds
	seed   maphash.Seed
	names  *table[*node] // FQDN -> node

	// Writer only.
	keys    map[string]*keyEntry
	records int
}

// keyEntry is the writer's state for one etcd key.
type keyEntry struct {
	node   *node // nil: the key names no valid name
	modRev int64
	p      parsed // empty when the value is malformed
}

// node is one name.
type node struct {
	name   string // lower-case FQDN
	label  string // first label (its key in the parent's kids)
	parent *node  // nil for the root

	// Writer only.
	refs    int      // keys at or below this name
	keys    []string // keys naming this node, sorted
	hasRecs bool     // own records non-empty, as counted in parent.kidRecs

	own     atomic.Pointer[ownSet]
	kids    atomic.Pointer[table[*node]] // by label; nil until the first child
	wild    atomic.Pointer[node]         // the "*" child
	kidRecs atomic.Int32                 // direct children with own records
	gen     atomic.Uint64                // bumped when own or a child's own records change
	view    atomic.Pointer[viewSet]
}

// ownSet is a name's own records: one span per key with records, in key
// order, with the key's group.
type ownSet struct {
	rrs   []dns.RR
	group string // the only span's group when spans is nil
	spans []span // nil when one key gave every record
}

type span struct {
	start, end int
	group      string
}

// viewSet caches a node's own records combined with its children's.
type viewSet struct {
	gen uint64
	rrs []dns.RR
}

func newIndex(prefix string, ttl uint32) *index {
	seed := maphash.MakeSeed()
	return &index{
		prefix: prefix,
		ttl:    ttl,
		seed:   seed,
		names:  newTable[*node](seed, 0),
		keys:   make(map[string]*keyEntry),
	}
}

// put applies a put of key at revision modRev (writer only). It returns
// whether anything changed, and the error that made the key or value
// malformed (the key then gives no record, but its name exists). A put at
// the revision already applied is a no-op (re-lists).
func (ix *index) put(key string, val []byte, modRev int64) (changed bool, err error) {
	e := ix.keys[key]
	if e != nil && e.modRev == modRev {
		return false, nil
	}
	if e == nil {
		e = &keyEntry{}
		name, kerr := keyName(ix.prefix, key)
		ix.keys[key] = e
		if kerr != nil {
			e.modRev = modRev
			return true, kerr
		}
		e.node = ix.acquire(name)
		e.node.keys = insertSorted(e.node.keys, key)
	}
	e.modRev = modRev
	if e.node == nil {
		_, kerr := keyName(ix.prefix, key)
		return true, kerr
	}
	p, verr := parseValue(e.node.name, val, ix.ttl)
	ix.records += len(p.rrs) - len(e.p.rrs)
	e.p = p
	ix.publishOwn(e.node)
	return true, verr
}

// del applies a delete of key (writer only).
func (ix *index) del(key string) bool {
	e := ix.keys[key]
	if e == nil {
		return false
	}
	delete(ix.keys, key)
	n := e.node
	if n == nil {
		return true
	}
	ix.records -= len(e.p.rrs)
	if i, ok := slices.BinarySearch(n.keys, key); ok {
		n.keys = slices.Delete(n.keys, i, i+1)
	}
	ix.publishOwn(n)
	ix.release(n)
	return true
}

func insertSorted(keys []string, k string) []string {
	i, ok := slices.BinarySearch(keys, k)
	if ok {
		return keys
	}
	return slices.Insert(keys, i, k)
}

// acquire returns name's node, creating it and its ancestors, and counts
// one more key at or below each of them.
func (ix *index) acquire(name string) *node {
	n := ix.node(name)
	for p := n; p != nil; p = p.parent {
		p.refs++
	}
	return n
}

// node returns name's node, creating it and missing ancestors.
func (ix *index) node(name string) *node {
	if n, ok := ix.names.get(name); ok {
		return n
	}
	n := &node{name: name}
	if name != "." {
		i := strings.IndexByte(name, '.')
		n.label = name[:i]
		up := name[i+1:]
		if up == "" {
			up = "."
		}
		n.parent = ix.node(up)
		kids := n.parent.kids.Load()
		if kids == nil {
			kids = newTable[*node](ix.seed, 0)
			n.parent.kids.Store(kids)
		}
		kids.set(n.label, n)
		if n.label == "*" {
			n.parent.wild.Store(n)
		}
	}
	ix.names.set(name, n)
	return n
}

// release counts one key less at or below n and its ancestors, removing
// the nodes no key is at or below any more.
func (ix *index) release(n *node) {
	for p := n; p != nil; p = p.parent {
		p.refs--
		if p.refs > 0 {
			continue
		}
		ix.names.del(p.name)
		if p.parent != nil {
			if kids := p.parent.kids.Load(); kids != nil {
				kids.del(p.label)
			}
			if p.label == "*" {
				p.parent.wild.Store(nil)
			}
		}
	}
}

// publishOwn rebuilds n's own records from its keys and publishes them.
func (ix *index) publishOwn(n *node) {
	var with []*keyEntry
	total := 0
	for _, k := range n.keys {
		if e := ix.keys[k]; len(e.p.rrs) > 0 {
			with = append(with, e)
			total += len(e.p.rrs)
		}
	}
	switch len(with) {
	case 0:
		n.own.Store(nil)
	case 1:
		n.own.Store(&ownSet{rrs: with[0].p.rrs, group: with[0].p.group})
	default:
		o := &ownSet{rrs: make([]dns.RR, 0, total), spans: make([]span, 0, len(with))}
		for _, e := range with {
			start := len(o.rrs)
			o.rrs = append(o.rrs, e.p.rrs...)
			o.spans = append(o.spans, span{start, len(o.rrs), e.p.group})
		}
		n.own.Store(o)
	}
	has := len(with) > 0
	n.gen.Add(1)
	if p := n.parent; p != nil {
		if has != n.hasRecs {
			if has {
				p.kidRecs.Add(1)
			} else {
				p.kidRecs.Add(-1)
			}
		}
		p.gen.Add(1)
	}
	n.hasRecs = has
}

// lookup returns the node of name, or nil.
func (ix *index) lookup(name string) *node {
	n, _ := ix.names.get(name)
	return n
}

// ownRecords are the records of the keys naming n.
func (n *node) ownRecords() []dns.RR {
	if o := n.own.Load(); o != nil {
		return o.rrs
	}
	return nil
}

// records are n's answer: its own records and its direct children's,
// filtered by group. It does not allocate unless n has children with
// records and changed since the last call.
func (n *node) records() []dns.RR {
	if n.kidRecs.Load() == 0 {
		return n.ownRecords()
	}
	g := n.gen.Load()
	if v := n.view.Load(); v != nil && v.gen == g {
		return v.rrs
	}
	rrs := n.combine()
	n.view.Store(&viewSet{gen: g, rrs: rrs})
	return rrs
}

// part is one key's records at a depth below the name asked.
type part struct {
	rrs   []dns.RR
	group string
	depth int
}

func (o *ownSet) parts(depth int, out []part) []part {
	if o == nil {
		return out
	}
	if o.spans == nil {
		return append(out, part{o.rrs, o.group, depth})
	}
	for _, s := range o.spans {
		out = append(out, part{o.rrs[s.start:s.end], s.group, depth})
	}
	return out
}

// combine builds n's own records plus its children's, applying SkyDNS
// groups: the shallowest depth (0 = the name's own keys, 1 = its
// children's) where a key has a group decides; if the keys there agree on
// one group, only keys of that group or of none are kept; if they
// disagree, nothing is filtered.
func (n *node) combine() []dns.RR {
	parts := n.own.Load().parts(0, nil)
	if kids := n.kids.Load(); kids != nil {
		// Children in label order: answers do not depend on hashing.
		var with []*node
		kids.each(func(_ string, c *node) bool {
			if c.own.Load() != nil {
				with = append(with, c)
			}
			return true
		})
		slices.SortFunc(with, func(a, b *node) int { return strings.Compare(a.label, b.label) })
		for _, c := range with {
			parts = c.own.Load().parts(1, parts)
		}
	}
	group := chooseGroup(parts)
	total := 0
	for _, p := range parts {
		if keepGroup(p.group, group) {
			total += len(p.rrs)
		}
	}
	out := make([]dns.RR, 0, total)
	for _, p := range parts {
		if keepGroup(p.group, group) {
			out = append(out, p.rrs...)
		}
	}
	return out
}

func chooseGroup(parts []part) string {
	for depth := 0; depth <= 1; depth++ {
		group, set := "", false
		for _, p := range parts {
			if p.depth != depth || p.group == "" {
				continue
			}
			if set && p.group != group {
				return "" // disagreement: no filtering
			}
			group, set = p.group, true
		}
		if set {
			return group
		}
	}
	return ""
}

func keepGroup(g, chosen string) bool { return chosen == "" || g == "" || g == chosen }

// wildcard returns the stored wildcard node that answers name, a name
// that has no node: the "*" child of name's closest existing ancestor,
// searching no higher than zone (RFC 4592). nil when there is none.
func (ix *index) wildcard(name, zone string) *node {
	for i := 0; i < len(name)-1; i++ {
		if name[i] != '.' {
			continue
		}
		up := name[i+1:]
		if len(up) < len(zone) {
			return nil
		}
		if n := ix.lookup(up); n != nil {
			return n.wild.Load()
		}
	}
	return nil
}

// Limits of the work one query with "*" labels may cause.
const (
	maxExpandNodes   = 4096
	maxExpandRecords = 512
)

// expand answers a query name with "*" labels: every name with as many
// labels, equal labels where the query has no "*", contributes its
// records (owned by that name). ok is false when no name matches.
func (ix *index) expand(name string) (rrs []dns.RR, ok bool) {
	labels := dns.SplitDomainName(name)
	last := -1
	for i, l := range labels {
		if l == "*" {
			last = i
		}
	}
	if last < 0 {
		return nil, false
	}
	fixed := "."
	if last+1 < len(labels) {
		fixed = strings.Join(labels[last+1:], ".") + "."
	}
	start := ix.lookup(fixed)
	if start == nil {
		return nil, false
	}
	frontier := []*node{start}
	visited := 0
	for i := last; i >= 0 && len(frontier) > 0; i-- {
		var next []*node
		for _, f := range frontier {
			kids := f.kids.Load()
			if kids == nil {
				continue
			}
			if labels[i] == "*" {
				kids.each(func(_ string, c *node) bool {
					next = append(next, c)
					visited++
					return visited < maxExpandNodes
				})
			} else if c, found := kids.get(labels[i]); found {
				next = append(next, c)
			}
			if visited >= maxExpandNodes {
				break
			}
		}
		frontier = next
	}
	if len(frontier) == 0 {
		return nil, false
	}
	seen := make(map[string]bool)
	for _, f := range frontier {
		for _, rr := range f.records() {
			if len(rrs) >= maxExpandRecords {
				return rrs, true
			}
			c := dns.Copy(rr)
			c.Header().Name = name
			if k := c.String(); !seen[k] {
				seen[k] = true
				rrs = append(rrs, c)
			}
		}
	}
	return rrs, true
}

// hasStarLabel reports whether name has a label that is exactly "*".
func hasStarLabel(name string) bool {
	i := strings.IndexByte(name, '*')
	for i >= 0 {
		if (i == 0 || name[i-1] == '.') && i+1 < len(name) && name[i+1] == '.' {
			return true
		}
		j := strings.IndexByte(name[i+1:], '*')
		if j < 0 {
			return false
		}
		i += j + 1
	}
	return false
}

// Limits of the NS search below ns.dns.<zone>.
const (
	maxNSDepth   = 3
	maxNSTargets = 32
)

// nameServers returns NS records owned by zone for every name at or below
// ns (the node of ns.dns.<zone>) that has an A or AAAA record of its own
// (SkyDNS's convention: /…/dns/ns/ns1 with an address is a name server).
func nameServers(zone string, ns *node) []dns.RR {
	var out []dns.RR
	var walk func(n *node, depth int)
	walk = func(n *node, depth int) {
		if len(out) >= maxNSTargets {
			return
		}
		for _, rr := range n.ownRecords() {
			if t := rr.Header().Rrtype; t == dns.TypeA || t == dns.TypeAAAA {
				out = append(out, &dns.NS{
					Hdr: dns.RR_Header{Name: zone, Rrtype: dns.TypeNS, Class: dns.ClassINET, Ttl: rr.Header().Ttl},
					Ns:  n.name,
				})
				break
			}
		}
		if depth >= maxNSDepth {
			return
		}
		if kids := n.kids.Load(); kids != nil {
			kids.each(func(_ string, c *node) bool {
				walk(c, depth+1)
				return len(out) < maxNSTargets
			})
		}
	}
	walk(ns, 0)
	return out
}
