package etcd

import (
	"hash/maphash"
	"sync/atomic"
)

// table is a string-keyed hash table with lock-free reads and a single
// writer. Readers load the bucket array and a bucket with atomic loads;
// buckets are immutable, so a write copies only the one bucket it changes
// (O(entries in that bucket), about one) and publishes it with an atomic
// store. Growing rebuilds the array, amortised O(1) per insert. Writes
// must be serialised by the caller (the backend's one watch goroutine).
type table[V any] struct {
	seed maphash.Seed
	cur  atomic.Pointer[bucketArray[V]]
	n    int // entries (writer only)
}

type bucketArray[V any] struct {
	mask uint64
	b    []atomic.Pointer[bucket[V]]
}

type bucket[V any] struct {
	e []tableEntry[V]
}

// bucket1 is a bucket with room for one entry in the same allocation.
type bucket1[V any] struct {
	b   bucket[V]
	arr [1]tableEntry[V]
}

type tableEntry[V any] struct {
	k string
	v V
}

const minBuckets = 8

func newTable[V any](seed maphash.Seed, sizeHint int) *table[V] {
	t := &table[V]{seed: seed}
	n := minBuckets
	for n < sizeHint {
		n <<= 1
	}
	t.cur.Store(&bucketArray[V]{mask: uint64(n - 1), b: make([]atomic.Pointer[bucket[V]], n)})
	return t
}

// get returns the value at k. It never blocks and does not allocate.
func (t *table[V]) get(k string) (V, bool) {
	a := t.cur.Load()
	if bk := a.b[maphash.String(t.seed, k)&a.mask].Load(); bk != nil {
		for i := range bk.e {
			if bk.e[i].k == k {
				return bk.e[i].v, true
			}
		}
	}
	var zero V
	return zero, false
}

// set stores v at k (writer only).
func (t *table[V]) set(k string, v V) {
	a := t.cur.Load()
	slot := &a.b[maphash.String(t.seed, k)&a.mask]
	old := slot.Load()
	if old != nil {
		for i := range old.e {
			if old.e[i].k == k {
				nb := &bucket[V]{e: make([]tableEntry[V], len(old.e))}
				copy(nb.e, old.e)
				nb.e[i].v = v
				slot.Store(nb)
				return
			}
		}
	}
	slot.Store(withEntry(old, tableEntry[V]{k, v}))
	t.n++
	if t.n > len(a.b) {
		t.grow(a)
	}
}

// withEntry returns a new bucket holding old's entries and e.
func withEntry[V any](old *bucket[V], e tableEntry[V]) *bucket[V] {
	if old == nil || len(old.e) == 0 {
		b1 := &bucket1[V]{arr: [1]tableEntry[V]{e}}
		b1.b.e = b1.arr[:]
		return &b1.b
	}
	nb := &bucket[V]{e: make([]tableEntry[V], len(old.e)+1)}
	copy(nb.e, old.e)
	nb.e[len(old.e)] = e
	return nb
}

// del removes k (writer only).
func (t *table[V]) del(k string) {
	a := t.cur.Load()
	slot := &a.b[maphash.String(t.seed, k)&a.mask]
	old := slot.Load()
	if old == nil {
		return
	}
	for i := range old.e {
		if old.e[i].k != k {
			continue
		}
		t.n--
		if len(old.e) == 1 {
			slot.Store(nil)
			return
		}
		nb := &bucket[V]{e: make([]tableEntry[V], 0, len(old.e)-1)}
		nb.e = append(nb.e, old.e[:i]...)
		nb.e = append(nb.e, old.e[i+1:]...)
		slot.Store(nb)
		return
	}
}

// grow doubles the bucket array. Readers keep using the old array until
// the new one is published; its buckets are the same immutable values.
func (t *table[V]) grow(a *bucketArray[V]) {
	n := len(a.b) * 2
	na := &bucketArray[V]{mask: uint64(n - 1), b: make([]atomic.Pointer[bucket[V]], n)}
	for i := range a.b {
		bk := a.b[i].Load()
		if bk == nil {
			continue
		}
		for _, e := range bk.e {
			slot := &na.b[maphash.String(t.seed, e.k)&na.mask]
			slot.Store(withEntry(slot.Load(), e))
		}
	}
	t.cur.Store(na)
}

// each calls fn for every entry of a snapshot of the table (each bucket is
// consistent; entries written during the walk may or may not be seen)
// until fn returns false.
func (t *table[V]) each(fn func(k string, v V) bool) {
	a := t.cur.Load()
	for i := range a.b {
		bk := a.b[i].Load()
		if bk == nil {
			continue
		}
		for _, e := range bk.e {
			if !fn(e.k, e.v) {
				return
			}
		}
	}
}

// len is the number of entries (writer only).
func (t *table[V]) len() int { return t.n }
