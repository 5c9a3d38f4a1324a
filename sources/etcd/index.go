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
// are published as an immutable set behind an atomic pointer; a put or
// delete rebuilds only the touched name's set, so an event costs
// O(records at that name), never O(index). A name's answer also includes
// the own records of its direct children (SkyDNS: several keys below a
// name are several records of it); that combined set is computed by the
// first reader after a change and cached with a generation number.
//
// Memory is what limits how many records a process holds, so the common
// case costs as little as possible: a name with one key, spelt as its
// name gives it (/skydns/internal/example/db for db.example.internal.),
// without a group. Its key is not stored (it is derived from the name),
// its revision is in the node, its records are in the published set and
// a lone A or AAAA record shares one allocation with that set. Names
// with other keys (several keys, another spelling, a group) keep a list
// of their keys beside, in multi.
type index struct {
	prefix string
	ttl    uint32 // for values without "ttl", seconds
	seed   maphash.Seed
	tomb   *node      // the tables' tombstone
	names  *nodeTable // FQDN -> node

	// Writer only.
	multi   map[*node][]keyState // names whose keys are not one plain key
	bad     map[string]int64     // keys that name no valid name -> revision
	nkeys   int                  // keys held, bad ones included
	records int

	// During a re-read of the prefix (startMarks), every key put is
	// marked; the keys left unmarked at the end are gone from etcd.
	marking bool
	badSeen map[string]struct{} // malformed keys marked
}

// keyState is one key of a name in multi.
type keyState struct {
	key    string
	modRev int64
	rrs    []dns.RR
	group  string
	ownTTL bool    // the value had a "ttl" (else the records have the default)
	marked bool    // put during the current re-read
	set    *ownSet // rrs as the set of a key without group, when at hand
}

// node is one name.
type node struct {
	name  string // lower-case FQDN; a node's parent is the name without its first label
	own   atomic.Pointer[ownSet]
	inner atomic.Pointer[inner] // nil until the first child

	// Writer only.
	modRev int64 // revision of the plain key (flags&hasKey)
	refs   int32 // keys at or below this name
	flags  uint8
}

// node flags (writer only).
const (
	hasKey  = 1 << iota // the name has its plain key (and no keys in multi)
	ownTTL              // the plain key's value had a "ttl"
	hasRecs             // own records non-empty, as counted in the parent's kidRecs
	marked              // the plain key was put during the current re-read
)

// inner is what a name with children has besides.
type inner struct {
	kids    *nodeTable // by label
	wild    atomic.Pointer[node]
	kidRecs atomic.Int32  // direct children with own records
	gen     atomic.Uint64 // bumped when own or a child's own records change
	view    atomic.Pointer[viewSet]
}

// ownSet is a name's own records. split is nil when one key without a
// group gave every record.
type ownSet struct {
	rrs   []dns.RR
	split *ownParts
}

// ownParts are the keys behind an ownSet: one span per key with records,
// in key order, with the key's group.
type ownParts struct {
	group string // the only span's group when spans is nil
	exact bool   // the only span's key is a record key (see recordKey)
	spans []span
}

type span struct {
	start, end int
	group      string
	exact      bool // a record key's: not counted at the parent
}

// ownA and ownAAAA hold a lone address record with its set in one
// allocation (112 and 128 bytes instead of 32 + 16 + 64 + 8 or 16).
type ownA struct {
	set ownSet
	arr [1]dns.RR
	rr  dns.A
	ip  [4]byte
}

type ownAAAA struct {
	set ownSet
	arr [1]dns.RR
	rr  dns.AAAA
	ip  [16]byte
}

// newOwnSet returns the set of rrs, one key's records without a group.
func newOwnSet(rrs []dns.RR) *ownSet {
	if len(rrs) == 1 {
		switch rr := rrs[0].(type) {
		case *dns.A:
			if len(rr.A) == 4 {
				return newOwnA(rr.Hdr, [4]byte(rr.A))
			}
		case *dns.AAAA:
			if len(rr.AAAA) == 16 {
				return newOwnAAAA(rr.Hdr, [16]byte(rr.AAAA))
			}
		}
	}
	return &ownSet{rrs: rrs}
}

func newOwnA(hdr dns.RR_Header, ip [4]byte) *ownSet {
	o := &ownA{rr: dns.A{Hdr: hdr}, ip: ip}
	o.rr.A = o.ip[:]
	o.arr[0] = &o.rr
	o.set.rrs = o.arr[:]
	return &o.set
}

func newOwnAAAA(hdr dns.RR_Header, ip [16]byte) *ownSet {
	o := &ownAAAA{rr: dns.AAAA{Hdr: hdr}, ip: ip}
	o.rr.AAAA = o.ip[:]
	o.arr[0] = &o.rr
	o.set.rrs = o.arr[:]
	return &o.set
}

// viewSet caches a node's own records combined with its children's.
type viewSet struct {
	gen uint64
	rrs []dns.RR
}

func newIndex(prefix string, ttl uint32) *index {
	seed := maphash.MakeSeed()
	tomb := &node{}
	return &index{
		prefix: prefix,
		ttl:    ttl,
		seed:   seed,
		tomb:   tomb,
		names:  newNodeTable(seed, false, tomb),
		multi:  make(map[*node][]keyState),
		bad:    make(map[string]int64),
	}
}

// put applies a put of key at revision modRev (writer only). It returns
// whether anything changed, and the error that made the key or value
// malformed (the key then gives no record, but its name exists). A put at
// the revision already applied is a no-op (re-lists).
func (ix *index) put(key string, val []byte, modRev int64) (changed bool, err error) {
	name, kerr := keyName(ix.prefix, key)
	if kerr != nil {
		rev, ok := ix.bad[key]
		if ix.marking {
			ix.badSeen[key] = struct{}{}
		}
		if ok && rev == modRev {
			return false, nil
		}
		if !ok {
			ix.nkeys++
		}
		ix.bad[key] = modRev
		return true, kerr
	}
	plain := plainKey(ix.prefix, key)
	n := ix.names.get(name)
	if n != nil {
		if rev, ok := ix.keyRev(n, key, plain); ok {
			if rev == modRev {
				if ix.marking {
					ix.mark(n, key)
				}
				return false, nil
			}
		} else {
			n = nil
		}
	}
	if n == nil {
		n = ix.acquire(name)
		ix.nkeys++
	}
	p, verr := parseValue(n.name, val, ix.ttl)
	ix.setKey(n, keyState{key: key, modRev: modRev, rrs: p.rrs, group: p.group, ownTTL: p.ownTTL, marked: ix.marking, set: p.set}, plain)
	ix.publishOwn(n)
	return true, verr
}

// del applies a delete of key (writer only).
func (ix *index) del(key string) bool {
	name, kerr := keyName(ix.prefix, key)
	if kerr != nil {
		if _, ok := ix.bad[key]; !ok {
			return false
		}
		delete(ix.bad, key)
		ix.nkeys--
		return true
	}
	n := ix.names.get(name)
	if n == nil || !ix.dropKey(n, key, plainKey(ix.prefix, key)) {
		return false
	}
	ix.nkeys--
	ix.publishOwn(n)
	ix.release(n)
	return true
}

// keyCount is the number of keys held, malformed ones included (writer
// only).
func (ix *index) keyCount() int { return ix.nkeys }

// startMarks starts a re-read of the prefix: from now on every key put is
// marked, until unmarked (writer only).
func (ix *index) startMarks() {
	ix.marking = true
	ix.badSeen = make(map[string]struct{})
	ix.names.each(func(_ string, n *node) bool {
		n.flags &^= marked
		return true
	})
	for _, keys := range ix.multi {
		for i := range keys {
			keys[i].marked = false
		}
	}
}

// mark marks n's key key (writer only).
func (ix *index) mark(n *node, key string) {
	if n.flags&hasKey != 0 {
		n.flags |= marked
		return
	}
	keys := ix.multi[n]
	for i := range keys {
		if keys[i].key == key {
			keys[i].marked = true
		}
	}
}

// unmarked ends the re-read started by startMarks and returns the keys
// held that were not put during it (writer only).
func (ix *index) unmarked() []string {
	var out []string
	for k := range ix.bad {
		if _, ok := ix.badSeen[k]; !ok {
			out = append(out, k)
		}
	}
	ix.names.each(func(_ string, n *node) bool {
		if n.flags&hasKey != 0 {
			if n.flags&marked == 0 {
				out = append(out, ix.plainKeyOf(n.name))
			}
			return true
		}
		for _, ks := range ix.multi[n] {
			if !ks.marked {
				out = append(out, ks.key)
			}
		}
		return true
	})
	ix.marking, ix.badSeen = false, nil
	return out
}

// plainKey reports whether key, a valid key below prefix, is spelt as
// the name it gives is mapped back: no empty segment, no upper case, no
// record ID.
func plainKey(prefix, key string) bool {
	if key == prefix {
		return true
	}
	rest := key[len(strings.TrimSuffix(prefix, "/")):] // "/seg/seg"
	for i := 0; i < len(rest); i++ {
		c := rest[i]
		if c == '/' && (i+1 == len(rest) || rest[i+1] == '/') || 'A' <= c && c <= 'Z' || c == '@' {
			return false
		}
	}
	return true
}

// plainKeyOf is the plain key of name.
func (ix *index) plainKeyOf(name string) string {
	if name == "." {
		return ix.prefix
	}
	var b strings.Builder
	b.Grow(len(ix.prefix) + len(name) + 1)
	b.WriteString(strings.TrimSuffix(ix.prefix, "/"))
	for end := len(name) - 1; end > 0; {
		i := strings.LastIndexByte(name[:end], '.') + 1
		b.WriteByte('/')
		b.WriteString(name[i:end])
		end = i - 1
	}
	return b.String()
}

// keyRev returns the revision of key at n, and whether n has key.
func (ix *index) keyRev(n *node, key string, plain bool) (int64, bool) {
	if n.flags&hasKey != 0 {
		return n.modRev, plain
	}
	for _, ks := range ix.multi[n] {
		if ks.key == key {
			return ks.modRev, true
		}
	}
	return 0, false
}

// keyStates returns n's keys (a fresh slice for a plain key).
func (ix *index) keyStates(n *node) []keyState {
	if n.flags&hasKey == 0 {
		return ix.multi[n]
	}
	ks := keyState{key: ix.plainKeyOf(n.name), modRev: n.modRev, ownTTL: n.flags&ownTTL != 0, marked: n.flags&marked != 0}
	if o := n.own.Load(); o != nil {
		ks.rrs, ks.set = o.rrs, o
	}
	return []keyState{ks}
}

// setKey stores ks, one of n's keys (plain: spelt as n's name), and
// counts its records.
func (ix *index) setKey(n *node, ks keyState, plain bool) {
	if plain && ks.group == "" && (n.flags&hasKey != 0 || len(ix.multi[n]) == 0) {
		// The common case: n's only key, in the node itself.
		if o := n.own.Load(); o != nil && n.flags&hasKey != 0 {
			ix.records -= len(o.rrs)
		}
		ix.records += len(ks.rrs)
		ix.storePlain(n, &ks)
		return
	}
	keys := ix.keyStates(n)
	i, found := slices.BinarySearchFunc(keys, ks.key, func(e keyState, k string) int { return strings.Compare(e.key, k) })
	if found {
		ix.records -= len(keys[i].rrs)
		keys[i] = ks
	} else {
		keys = slices.Insert(keys, i, ks)
	}
	ix.records += len(ks.rrs)
	ix.storeKeys(n, keys)
}

// dropKey removes key from n's keys; false when n does not have it.
func (ix *index) dropKey(n *node, key string, plain bool) bool {
	if n.flags&hasKey != 0 {
		if !plain {
			return false
		}
		if o := n.own.Load(); o != nil {
			ix.records -= len(o.rrs)
		}
		n.flags &^= hasKey | ownTTL | marked
		n.own.Store(nil) // publishOwn follows
		return true
	}
	keys := ix.multi[n]
	i := slices.IndexFunc(keys, func(e keyState) bool { return e.key == key })
	if i < 0 {
		return false
	}
	ix.records -= len(keys[i].rrs)
	ix.storeKeys(n, slices.Delete(keys, i, i+1))
	return true
}

// storeKeys makes keys n's keys: a plain key without a group in the node
// itself, anything else in multi. The records are published by
// publishOwn.
func (ix *index) storeKeys(n *node, keys []keyState) {
	n.flags &^= hasKey | ownTTL | marked
	if len(keys) == 1 && keys[0].group == "" && plainKey(ix.prefix, keys[0].key) {
		delete(ix.multi, n)
		ix.storePlain(n, &keys[0])
		return
	}
	if len(keys) == 0 {
		delete(ix.multi, n)
		return
	}
	ix.multi[n] = keys
}

// storePlain makes ks, a plain key without a group, n's only key.
func (ix *index) storePlain(n *node, ks *keyState) {
	n.flags = n.flags&^(ownTTL|marked) | hasKey
	if ks.ownTTL {
		n.flags |= ownTTL
	}
	if ks.marked {
		n.flags |= marked
	}
	n.modRev = ks.modRev
	switch {
	case len(ks.rrs) == 0:
		n.own.Store(nil)
	case ks.set != nil:
		n.own.Store(ks.set)
	default:
		n.own.Store(newOwnSet(ks.rrs))
	}
}

// acquire returns name's node, creating it and its ancestors, and counts
// one more key at or below each of them.
func (ix *index) acquire(name string) *node {
	n := ix.node(name)
	for p := n; p != nil; p = ix.parent(p) {
		p.refs++
	}
	return n
}

// parent returns n's parent node (writer only: it exists while n does),
// nil for the root.
func (ix *index) parent(n *node) *node {
	if n.name == "." {
		return nil
	}
	return ix.names.get(parentName(n.name))
}

// parentName is the name one label up ("." for a top-level name).
func parentName(n string) string {
	i := strings.IndexByte(n, '.')
	if i < 0 || i+1 >= len(n) {
		return "."
	}
	return n[i+1:]
}

// node returns name's node, creating it and missing ancestors.
func (ix *index) node(name string) *node {
	if n := ix.names.get(name); n != nil {
		return n
	}
	n := &node{name: name}
	if name != "." {
		p := ix.node(parentName(name))
		in := p.inner.Load()
		if in == nil {
			in = &inner{kids: newNodeTable(ix.seed, true, ix.tomb)}
			p.inner.Store(in)
		}
		label := n.label()
		in.kids.insert(label, n)
		if label == "*" {
			in.wild.Store(n)
		}
	}
	ix.names.insert(name, n)
	return n
}

// release counts one key less at or below n and its ancestors, removing
// the nodes no key is at or below any more.
func (ix *index) release(n *node) {
	for p := n; p != nil; {
		up := ix.parent(p)
		p.refs--
		if p.refs <= 0 {
			ix.names.del(p.name)
			if up != nil {
				in := up.inner.Load()
				label := p.label()
				in.kids.del(label)
				if label == "*" {
					in.wild.Store(nil)
				}
			}
		}
		p = up
	}
}

// publishOwn publishes n's own records from its keys.
func (ix *index) publishOwn(n *node) {
	if n.flags&hasKey == 0 {
		var with []keyState
		total := 0
		for _, ks := range ix.multi[n] {
			if len(ks.rrs) > 0 {
				with = append(with, ks)
				total += len(ks.rrs)
			}
		}
		switch len(with) {
		case 0:
			n.own.Store(nil)
		case 1:
			o := &ownSet{rrs: with[0].rrs}
			if exact := recordKey(with[0].key); with[0].group != "" || exact {
				o.split = &ownParts{group: with[0].group, exact: exact}
			}
			n.own.Store(o)
		default:
			o := &ownSet{rrs: make([]dns.RR, 0, total), split: &ownParts{spans: make([]span, 0, len(with))}}
			for _, ks := range with {
				start := len(o.rrs)
				o.rrs = append(o.rrs, ks.rrs...)
				o.split.spans = append(o.split.spans, span{start, len(o.rrs), ks.group, recordKey(ks.key)})
			}
			n.own.Store(o)
		}
	}
	has := n.own.Load() != nil
	if in := n.inner.Load(); in != nil {
		in.gen.Add(1)
	}
	if p := ix.parent(n); p != nil {
		in := p.inner.Load()
		if has != (n.flags&hasRecs != 0) {
			if has {
				in.kidRecs.Add(1)
			} else {
				in.kidRecs.Add(-1)
			}
		}
		in.gen.Add(1)
	}
	if has {
		n.flags |= hasRecs
	} else {
		n.flags &^= hasRecs
	}
}

// lookup returns the node of name, or nil.
func (ix *index) lookup(name string) *node {
	return ix.names.get(name)
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
	in := n.inner.Load()
	if in == nil || in.kidRecs.Load() == 0 {
		return n.ownRecords()
	}
	g := in.gen.Load()
	if v := in.view.Load(); v != nil && v.gen == g {
		return v.rrs
	}
	rrs := n.combine()
	in.view.Store(&viewSet{gen: g, rrs: rrs})
	return rrs
}

// part is one key's records at a depth below the name asked.
type part struct {
	rrs   []dns.RR
	group string
	depth int
}

// parts appends o's keys' records as parts at depth; below the name asked
// (depth 1) record keys do not count.
func (o *ownSet) parts(depth int, out []part) []part {
	if o == nil {
		return out
	}
	if o.split == nil {
		return append(out, part{o.rrs, "", depth})
	}
	if o.split.spans == nil {
		if depth > 0 && o.split.exact {
			return out
		}
		return append(out, part{o.rrs, o.split.group, depth})
	}
	for _, s := range o.split.spans {
		if depth > 0 && s.exact {
			continue
		}
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
	if in := n.inner.Load(); in != nil {
		// Children in label order: answers do not depend on hashing.
		var with []*node
		in.kids.each(func(label string, c *node) bool {
			// A stored "*" is a wildcard record (RFC 4592): it answers
			// names below n that do not exist, never n itself.
			if c.own.Load() != nil && label != "*" {
				with = append(with, c)
			}
			return true
		})
		slices.SortFunc(with, func(a, b *node) int { return strings.Compare(a.label(), b.label()) })
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
	return oneTTL(out)
}

// oneTTL gives each RRset of rrs (records of one type, all at one name)
// one TTL, the lowest of its records' (RFC 2181 §5.2): several keys of a
// name may carry different "ttl"s. Records are copied where they change
// (the keys' own are shared); rrs is returned as is when nothing does.
func oneTTL(rrs []dns.RR) []dns.RR {
	type set struct {
		t     uint16
		low   uint32
		mixed bool
	}
	var sets []set // a name has few types
	anyMixed := false
	for _, rr := range rrs {
		h := rr.Header()
		i := slices.IndexFunc(sets, func(s set) bool { return s.t == h.Rrtype })
		if i < 0 {
			sets = append(sets, set{t: h.Rrtype, low: h.Ttl})
			continue
		}
		if h.Ttl != sets[i].low {
			sets[i].mixed, anyMixed = true, true
			sets[i].low = min(sets[i].low, h.Ttl)
		}
	}
	if !anyMixed {
		return rrs
	}
	for k, rr := range rrs {
		h := rr.Header()
		i := slices.IndexFunc(sets, func(s set) bool { return s.t == h.Rrtype })
		if sets[i].mixed && h.Ttl != sets[i].low {
			cp := dns.Copy(rr)
			cp.Header().Ttl = sets[i].low
			rrs[k] = cp
		}
	}
	return rrs
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
			if in := n.inner.Load(); in != nil {
				return in.wild.Load()
			}
			return nil
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
			in := f.inner.Load()
			if in == nil {
				continue
			}
			if labels[i] == "*" {
				in.kids.each(func(_ string, c *node) bool {
					next = append(next, c)
					visited++
					return visited < maxExpandNodes
				})
			} else if c := in.kids.get(labels[i]); c != nil {
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
		if in := n.inner.Load(); in != nil {
			in.kids.each(func(_ string, c *node) bool {
				walk(c, depth+1)
				return len(out) < maxNSTargets
			})
		}
	}
	walk(ns, 0)
	return out
}
