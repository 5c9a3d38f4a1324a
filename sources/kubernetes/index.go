package kubernetes

import (
	"hash/maphash"
	"sync"
	"sync/atomic"

	"github.com/miekg/dns"

	"github.com/dnsd/dnsd/pipeline"
)

// contribution is the records one owner (a service, a namespace, a pod)
// holds at one name. Empty rrs still make the name exist (NODATA).
type contribution struct {
	name string // lower-case FQDN
	rrs  []dns.RR
}

// entry is one name of the index. Readers only load rrs; the other
// fields belong to the writer (under index.mu). Most names have one
// owner, kept inline; rrs then points at that owner's contribution, so a
// name costs no allocation beyond the entry (48 bytes).
type entry struct {
	// rrs: nil or empty, the name exists without records.
	rrs  atomic.Pointer[[]dns.RR]
	name string // the key, never modified

	owner *owner      // the only owner (nil: none, or several)
	all   *[]ownerRRs // every owner when there are several, rare (a PTR shared by services)
	kids  int32       // names directly below this one that exist
}

// ownerRRs is one owner's records at a name: a pointer into the owner's
// contribution slice, which is never modified once handed to the index.
type ownerRRs struct {
	owner *owner
	rrs   *[]dns.RR
}

// owner is what one object contributes, so its next version can be
// diffed against it and its deletion undone. Writer-only.
type owner struct {
	key   string
	names []contribution
}

// index maps names to records. Lookups are lock-free (a table of atomic
// pointers, see table) and allocation-free; one writer at a time (mu) replaces
// an owner's contributions in O(size of that owner). Names that exist
// only because names below them do (empty non-terminals) are kept by
// counting children, up to the closest root (a zone apex, in-addr.arpa.
// or ip6.arpa.), exclusive.
type index struct {
	names atomic.Pointer[table]
	seed  maphash.Seed
	used  int // slots of names holding an entry or a tombstone (writer only)

	mu     sync.Mutex
	owners map[string]*owner
	roots  []string
	serial *atomic.Uint32 // shared by every index of a backend
	clock  *pipeline.SerialClock
	count  atomic.Int64 // names
}

func newIndex(roots []string, serial *atomic.Uint32) *index {
	ix := &index{owners: make(map[string]*owner), roots: roots, serial: serial, seed: maphash.MakeSeed()}
	ix.names.Store(newTable(tableMin))
	return ix
}

// lookup returns the records at name and whether the name exists.
func (ix *index) lookup(name string) ([]dns.RR, bool) {
	e := ix.load(name)
	if e == nil {
		return nil, false
	}
	if p := e.rrs.Load(); p != nil && len(*p) > 0 {
		return *p, true
	}
	return nil, true
}

// set replaces everything owner key contributes with contribs (names
// unique within contribs). nil removes the owner. It reports whether
// anything changed.
func (ix *index) set(key string, contribs []contribution) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	o := ix.owners[key]
	if o == nil {
		if len(contribs) == 0 {
			return
		}
		o = &owner{key: key}
		ix.owners[key] = o
	}
	old := o.names
	if len(old) > 0 {
		keep := newNameSet(contribs)
		for _, c := range old {
			if !keep.has(c.name, contribs) {
				ix.drop(c.name, o)
			}
		}
	}
	for i := range contribs {
		ix.put(contribs[i].name, o, &contribs[i].rrs)
	}
	o.names = contribs
	if len(contribs) == 0 {
		delete(ix.owners, key)
	}
}

// bump advances the serial after a batch of changes: to a new serial of
// the process's clock, so the zone's serial (the largest of its sources')
// rises with this change whatever the other sources' serials are.
func (ix *index) bump() {
	for {
		old := ix.serial.Load()
		if ix.serial.CompareAndSwap(old, max(ix.clock.Next(), old+1)) {
			return
		}
	}
}

// nameSet answers "is name among contribs" in O(1) for big owners and by
// a scan for small ones (no map allocation).
type nameSet map[string]struct{}

const nameSetMin = 16

func newNameSet(contribs []contribution) nameSet {
	if len(contribs) < nameSetMin {
		return nil
	}
	s := make(nameSet, len(contribs))
	for _, c := range contribs {
		s[c.name] = struct{}{}
	}
	return s
}

func (s nameSet) has(name string, contribs []contribution) bool {
	if s != nil {
		_, ok := s[name]
		return ok
	}
	for _, c := range contribs {
		if c.name == name {
			return true
		}
	}
	return false
}

// table is an open-addressing hash table (linear probing) of the
// index's names, read without locks: the writer publishes an entry by an
// atomic store into a free slot, removes one by storing the tombstone,
// and, when slots run short, builds a new table and swaps the index's
// pointer (a reader still on the old one sees the state before the swap).
// It costs a slot (8 bytes) per name at most twice over, where a sync.Map
// spent over 100 bytes per name on its trie nodes and boxed keys.
type table struct {
	slots []atomic.Pointer[entry]
	mask  uint64
}

const tableMin = 64

// tombstone marks a removed name's slot: probes go on past it.
var tombstone = &entry{}

func newTable(size int) *table {
	return &table{slots: make([]atomic.Pointer[entry], size), mask: uint64(size - 1)}
}

func (ix *index) load(name string) *entry {
	t := ix.names.Load()
	for i := maphash.String(ix.seed, name) & t.mask; ; i = (i + 1) & t.mask {
		e := t.slots[i].Load()
		if e == nil {
			return nil
		}
		if e != tombstone && e.name == name {
			return e
		}
	}
}

// store adds e, whose name is not in the index. Writer only.
func (ix *index) store(e *entry) {
	t := ix.names.Load()
	if (ix.used+1)*4 > len(t.slots)*3 {
		t = ix.grow(t)
	}
	for i := maphash.String(ix.seed, e.name) & t.mask; ; i = (i + 1) & t.mask {
		old := t.slots[i].Load()
		if old == nil || old == tombstone {
			if old == nil {
				ix.used++
			}
			t.slots[i].Store(e)
			ix.count.Add(1)
			return
		}
	}
}

// delete removes name. Writer only.
func (ix *index) delete(name string) {
	t := ix.names.Load()
	for i := maphash.String(ix.seed, name) & t.mask; ; i = (i + 1) & t.mask {
		e := t.slots[i].Load()
		if e == nil {
			return
		}
		if e != tombstone && e.name == name {
			t.slots[i].Store(tombstone)
			ix.count.Add(-1)
			return
		}
	}
}

// grow replaces t by a table twice the size of its names (at least),
// without tombstones, and publishes it.
func (ix *index) grow(t *table) *table {
	live := int(ix.count.Load()) + 1
	size := tableMin
	for size < 2*live {
		size *= 2
	}
	nt := newTable(size)
	for i := range t.slots {
		e := t.slots[i].Load()
		if e == nil || e == tombstone {
			continue
		}
		for j := maphash.String(ix.seed, e.name) & nt.mask; ; j = (j + 1) & nt.mask {
			if nt.slots[j].Load() == nil {
				nt.slots[j].Store(e)
				break
			}
		}
	}
	ix.used = int(ix.count.Load())
	ix.names.Store(nt)
	return nt
}

// each calls f with every name and its entry until f returns false.
func (ix *index) each(f func(name string, e *entry) bool) {
	t := ix.names.Load()
	for i := range t.slots {
		e := t.slots[i].Load()
		if e == nil || e == tombstone {
			continue
		}
		if !f(e.name, e) {
			return
		}
	}
}

// put sets o's records at name, creating the name (and its missing
// ancestors) when needed.
func (ix *index) put(name string, o *owner, rrs *[]dns.RR) {
	e := ix.load(name)
	if e == nil {
		e = &entry{name: name, owner: o}
		e.rrs.Store(rrs)
		ix.store(e)
		ix.link(name)
		return
	}
	if e.all == nil {
		if e.owner == o || e.owner == nil {
			e.owner = o
			e.rrs.Store(rrs)
			return
		}
		all := []ownerRRs{{e.owner, e.rrs.Load()}, {o, rrs}}
		e.owner, e.all = nil, &all
		e.publish()
		return
	}
	all := *e.all
	found := false
	for i := range all {
		if all[i].owner == o {
			all[i].rrs = rrs
			found = true
			break
		}
	}
	if !found {
		all = append(all, ownerRRs{o, rrs})
		e.all = &all
	}
	e.publish()
}

// drop removes o's records at name, and the name when nothing holds it.
func (ix *index) drop(name string, o *owner) {
	e := ix.load(name)
	if e == nil {
		return
	}
	if e.all == nil {
		if e.owner == o {
			e.owner = nil
			e.rrs.Store(nil)
		}
	} else {
		all := *e.all
		if all[0].owner == o {
			all[0] = all[len(all)-1] // the last owner becomes the first
			all = all[:len(all)-1]
		} else {
			for i := range all {
				if all[i].owner == o {
					all = append(all[:i], all[i+1:]...)
					break
				}
			}
		}
		if len(all) == 1 {
			e.owner, e.all = all[0].owner, nil
			e.rrs.Store(all[0].rrs)
		} else {
			e.all = &all
			e.publish()
		}
	}
	if e.owner == nil && e.all == nil && e.kids == 0 {
		ix.remove(name)
	}
}

func (ix *index) remove(name string) {
	ix.delete(name)
	ix.unlink(name)
}

// link counts name as a child of its parent, creating the parent as an
// empty non-terminal when it does not exist.
func (ix *index) link(name string) {
	for {
		parent, ok := ix.parent(name)
		if !ok {
			return
		}
		pe := ix.load(parent)
		if pe != nil {
			pe.kids++
			return
		}
		pe = &entry{name: parent, kids: 1}
		ix.store(pe)
		name = parent
	}
}

// unlink undoes link, removing empty non-terminals left without
// children.
func (ix *index) unlink(name string) {
	for {
		parent, ok := ix.parent(name)
		if !ok {
			return
		}
		pe := ix.load(parent)
		if pe == nil {
			return
		}
		pe.kids--
		if pe.kids > 0 || pe.owner != nil || pe.all != nil {
			return
		}
		ix.delete(parent)
		name = parent
	}
}

// parent returns name without its first label, unless name is a root or
// its parent is one (roots are never stored: the pipeline owns apexes).
func (ix *index) parent(name string) (string, bool) {
	for _, r := range ix.roots {
		if name == r {
			return "", false
		}
	}
	i := 0
	for ; i < len(name); i++ {
		if name[i] == '\\' {
			i++
			continue
		}
		if name[i] == '.' {
			break
		}
	}
	if i >= len(name)-1 {
		return "", false
	}
	p := name[i+1:]
	for _, r := range ix.roots {
		if p == r {
			return "", false
		}
	}
	if !ix.underRoot(p) {
		return "", false
	}
	return p, true
}

func (ix *index) underRoot(name string) bool {
	for _, r := range ix.roots {
		if pipeline.InZone(name, r) {
			return true
		}
	}
	return false
}

// publish makes the merged records of several owners visible to
// readers, concatenated in the owners' order without duplicates.
func (e *entry) publish() {
	n := 0
	for _, b := range *e.all {
		n += len(*b.rrs)
	}
	rrs := make([]dns.RR, 0, n)
	for _, b := range *e.all {
		for _, rr := range *b.rrs {
			if !containsRR(rrs, rr) {
				rrs = append(rrs, rr)
			}
		}
	}
	if len(rrs) == 0 {
		e.rrs.Store(nil)
		return
	}
	e.rrs.Store(&rrs)
}

func containsRR(rrs []dns.RR, rr dns.RR) bool {
	for _, x := range rrs {
		if dns.IsDuplicate(x, rr) {
			return true
		}
	}
	return false
}
