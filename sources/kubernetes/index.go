package kubernetes

import (
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
// name costs no allocation beyond the entry.
type entry struct {
	rrs atomic.Pointer[[]dns.RR] // nil: the name exists without records

	first ownerRRs    // the first owner (owner nil: none)
	more  *[]ownerRRs // further owners, rare (a PTR shared by services)
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

// index maps names to records. Lookups are lock-free (sync.Map reads
// never block) and allocation-free; one writer at a time (mu) replaces
// an owner's contributions in O(size of that owner). Names that exist
// only because names below them do (empty non-terminals) are kept by
// counting children, up to the closest root (a zone apex, in-addr.arpa.
// or ip6.arpa.), exclusive.
type index struct {
	names sync.Map // string → *entry

	mu     sync.Mutex
	owners map[string]*owner
	roots  []string
	serial *atomic.Uint32 // shared by every index of a backend
	clock  *pipeline.SerialClock
	count  atomic.Int64 // names
}

func newIndex(roots []string, serial *atomic.Uint32) *index {
	return &index{owners: make(map[string]*owner), roots: roots, serial: serial}
}

// lookup returns the records at name and whether the name exists.
func (ix *index) lookup(name string) ([]dns.RR, bool) {
	v, ok := ix.names.Load(name)
	if !ok {
		return nil, false
	}
	if p := v.(*entry).rrs.Load(); p != nil {
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

func (ix *index) load(name string) *entry {
	if v, ok := ix.names.Load(name); ok {
		return v.(*entry)
	}
	return nil
}

// put sets o's records at name, creating the name (and its missing
// ancestors) when needed.
func (ix *index) put(name string, o *owner, rrs *[]dns.RR) {
	e := ix.load(name)
	if e == nil {
		e = &entry{first: ownerRRs{o, rrs}}
		e.publish()
		ix.names.Store(name, e)
		ix.count.Add(1)
		ix.link(name)
		return
	}
	switch {
	case e.first.owner == o || e.first.owner == nil:
		e.first = ownerRRs{o, rrs}
	default:
		more := e.others()
		found := false
		for i := range more {
			if more[i].owner == o {
				more[i].rrs = rrs
				found = true
				break
			}
		}
		if !found {
			e.setOthers(append(more, ownerRRs{o, rrs}))
		}
	}
	e.publish()
}

// drop removes o's records at name, and the name when nothing holds it.
func (ix *index) drop(name string, o *owner) {
	e := ix.load(name)
	if e == nil {
		return
	}
	more := e.others()
	if e.first.owner == o {
		e.first = ownerRRs{}
		if len(more) > 0 {
			e.first = more[len(more)-1]
			more = more[:len(more)-1]
		}
	} else {
		for i := range more {
			if more[i].owner == o {
				more = append(more[:i], more[i+1:]...)
				break
			}
		}
	}
	e.setOthers(more)
	if e.first.owner == nil && e.kids == 0 {
		ix.remove(name)
		return
	}
	e.publish()
}

func (ix *index) remove(name string) {
	ix.names.Delete(name)
	ix.count.Add(-1)
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
		pe = &entry{kids: 1}
		ix.names.Store(parent, pe)
		ix.count.Add(1)
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
		if pe.kids > 0 || pe.first.owner != nil {
			return
		}
		ix.names.Delete(parent)
		ix.count.Add(-1)
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
		if dns.IsSubDomain(r, name) {
			return true
		}
	}
	return false
}

// publish makes the merged records of every owner visible to readers:
// one owner's slice as it is, several owners' concatenated without
// duplicates.
func (e *entry) publish() {
	switch {
	case e.first.owner == nil:
		e.rrs.Store(nil)
	case e.more == nil:
		if len(*e.first.rrs) == 0 {
			e.rrs.Store(nil)
		} else {
			e.rrs.Store(e.first.rrs)
		}
	default:
		n := len(*e.first.rrs)
		for _, b := range *e.more {
			n += len(*b.rrs)
		}
		rrs := make([]dns.RR, 0, n)
		rrs = append(rrs, *e.first.rrs...)
		for _, b := range *e.more {
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
}

func (e *entry) others() []ownerRRs {
	if e.more == nil {
		return nil
	}
	return *e.more
}

func (e *entry) setOthers(l []ownerRRs) {
	if len(l) == 0 {
		e.more = nil
		return
	}
	e.more = &l
}

func containsRR(rrs []dns.RR, rr dns.RR) bool {
	for _, x := range rrs {
		if dns.IsDuplicate(x, rr) {
			return true
		}
	}
	return false
}
