package etcd

import (
	"fmt"
	"hash/maphash"
	"math/rand/v2"
	"testing"
)

// The node table against a map: random inserts and deletes of names and
// of labels, with rebuilds and tombstones; every key held is found,
// every other one is not, and each visits exactly the nodes held.
func TestNodeTable(t *testing.T) {
	for _, byLabel := range []bool{false, true} {
		tomb := &node{}
		tb := newNodeTable(maphash.MakeSeed(), byLabel, tomb)
		held := map[string]*node{}
		rng := rand.New(rand.NewPCG(1, 2))
		key := func(i int) string { return fmt.Sprintf("k%d", i) }
		for step := range 20_000 {
			i := rng.IntN(3000)
			if step > 15_000 {
				i = rng.IntN(100) // shrink: mostly deletes of a few keys
			}
			k := key(i)
			if n, ok := held[k]; ok {
				if rng.IntN(3) > 0 || step > 15_000 {
					tb.del(k)
					delete(held, k)
				} else if tb.get(k) != n {
					t.Fatalf("step %d: get(%s) lost the node", step, k)
				}
				continue
			}
			n := &node{name: k + "."}
			if !byLabel {
				n.name = k
			}
			tb.insert(k, n)
			held[k] = n
		}
		for i := range 3000 {
			k := key(i)
			if got := tb.get(k); got != held[k] {
				t.Fatalf("byLabel %v: get(%s) = %v, want %v", byLabel, k, got, held[k])
			}
		}
		seen := 0
		tb.each(func(k string, n *node) bool {
			if held[k] != n {
				t.Fatalf("each: %s -> %v, want %v", k, n, held[k])
			}
			seen++
			return true
		})
		if seen != len(held) || tb.len() != len(held) {
			t.Fatalf("byLabel %v: each saw %d, len %d, want %d", byLabel, seen, tb.len(), len(held))
		}
		a := tb.cur.Load()
		used := 0
		for i := range a.s {
			if a.s[i].Load() != nil {
				used++
			}
		}
		if used != tb.used || used >= len(a.s) {
			t.Fatalf("byLabel %v: %d slots used (%d counted) of %d", byLabel, used, tb.used, len(a.s))
		}
	}
}
