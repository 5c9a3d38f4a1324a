package etcd

import (
	"hash/maphash"
	"strings"
	"sync/atomic"
)

// nodeTable is a hash table of nodes with lock-free reads and a single
// writer, keyed by the node's name (the index's table of every name) or
// by its first label (a node's children). It is open-addressed with
// linear probing: a slot is one atomic pointer to a node, so an entry
// costs 8 bytes a slot (about 16 bytes at the table's load) and no
// allocation of its own. A deleted node leaves a tombstone, so readers
// probing past it keep going; the writer reuses tombstones and rebuilds
// the slots (into a new array, published with an atomic store) when
// tombstones and nodes fill three quarters of them. Readers never see a
// slot array without an empty slot. Writes must be serialised by the
// caller (the backend's one watch goroutine).
type nodeTable struct {
	seed    maphash.Seed
	byLabel bool  // keyed by the first label, else by the name
	tomb    *node // marks a deleted entry; shared by the index's tables
	cur     atomic.Pointer[slotArray]
	n       int // nodes (writer only)
	used    int // nodes and tombstones (writer only)
}

type slotArray struct {
	mask uint64
	s    []atomic.Pointer[node]
}

const minSlots = 8

func newNodeTable(seed maphash.Seed, byLabel bool, tomb *node) *nodeTable {
	t := &nodeTable{seed: seed, byLabel: byLabel, tomb: tomb}
	t.cur.Store(newSlotArray(minSlots))
	return t
}

func newSlotArray(n int) *slotArray {
	return &slotArray{mask: uint64(n - 1), s: make([]atomic.Pointer[node], n)}
}

// is reports whether n is the node at key k.
func (t *nodeTable) is(n *node, k string) bool {
	if !t.byLabel {
		return n.name == k
	}
	return len(n.name) > len(k) && n.name[len(k)] == '.' && n.name[:len(k)] == k
}

// key is n's key in the table.
func (t *nodeTable) key(n *node) string {
	if !t.byLabel {
		return n.name
	}
	return n.label()
}

// get returns the node at k, or nil. It never blocks and does not
// allocate.
func (t *nodeTable) get(k string) *node {
	a := t.cur.Load()
	for i := maphash.String(t.seed, k) & a.mask; ; i = (i + 1) & a.mask {
		p := a.s[i].Load()
		if p == nil {
			return nil
		}
		if p != t.tomb && t.is(p, k) {
			return p
		}
	}
}

// insert adds n at k, which the table does not hold (writer only).
func (t *nodeTable) insert(k string, n *node) {
	a := t.cur.Load()
	if (t.used+1)*4 > len(a.s)*3 {
		a = t.rebuild(t.n + 1)
	}
	for i := maphash.String(t.seed, k) & a.mask; ; i = (i + 1) & a.mask {
		switch a.s[i].Load() {
		case nil:
			t.used++
			fallthrough
		case t.tomb:
			a.s[i].Store(n)
			t.n++
			return
		}
	}
}

// del removes the node at k (writer only).
func (t *nodeTable) del(k string) {
	a := t.cur.Load()
	for i := maphash.String(t.seed, k) & a.mask; ; i = (i + 1) & a.mask {
		p := a.s[i].Load()
		if p == nil {
			return
		}
		if p == t.tomb || !t.is(p, k) {
			continue
		}
		t.n--
		if a.s[(i+1)&a.mask].Load() != nil {
			a.s[i].Store(t.tomb)
			return
		}
		// The next slot is empty, so no probe needs this one or the
		// tombstones just before it: empty them too.
		for a.s[i].Load() != nil && (a.s[i].Load() == t.tomb || a.s[i].Load() == p) {
			a.s[i].Store(nil)
			t.used--
			i = (i - 1) & a.mask
		}
		return
	}
}

// rebuild publishes a new slot array for need nodes, holding the current
// nodes and no tombstone. Readers still probing the old array see it as
// it was: nothing writes to it any more.
func (t *nodeTable) rebuild(need int) *slotArray {
	size := minSlots
	for size < need*2 {
		size <<= 1
	}
	old := t.cur.Load()
	na := newSlotArray(size)
	for i := range old.s {
		p := old.s[i].Load()
		if p == nil || p == t.tomb {
			continue
		}
		for j := maphash.String(t.seed, t.key(p)) & na.mask; ; j = (j + 1) & na.mask {
			if na.s[j].Load() == nil {
				na.s[j].Store(p)
				break
			}
		}
	}
	t.used = t.n
	t.cur.Store(na)
	return na
}

// each calls fn with the key and node of every entry of a snapshot of the
// table (entries written during the walk may or may not be seen) until fn
// returns false.
func (t *nodeTable) each(fn func(k string, n *node) bool) {
	a := t.cur.Load()
	for i := range a.s {
		p := a.s[i].Load()
		if p == nil || p == t.tomb {
			continue
		}
		if !fn(t.key(p), p) {
			return
		}
	}
}

// len is the number of nodes (writer only).
func (t *nodeTable) len() int { return t.n }

// label is the node's first label ("" for the root).
func (n *node) label() string {
	i := strings.IndexByte(n.name, '.')
	if i <= 0 {
		return ""
	}
	return n.name[:i]
}
