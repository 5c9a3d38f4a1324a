package kubernetes

import (
	"math/rand/v2"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/miekg/dns"
)

// TestIndexTable churns owners through the name table (inserts, removals
// leaving tombstones, growth) and checks every name against a model.
func TestIndexTable(t *testing.T) {
	var serial atomic.Uint32
	ix := newIndex([]string{"cluster.local."}, &serial)
	r := rand.New(rand.NewPCG(1, 2))
	model := make(map[string]int) // owner → names
	rr := &dns.TXT{Hdr: dns.RR_Header{Name: "x.", Rrtype: dns.TypeTXT, Class: dns.ClassINET}, Txt: []string{"x"}}
	name := func(owner, i int) string {
		return "n" + strconv.Itoa(i) + ".o" + strconv.Itoa(owner) + ".cluster.local."
	}
	for range 20000 {
		o := r.IntN(300)
		n := r.IntN(12)
		var cs []contribution
		for i := range n {
			cs = append(cs, contribution{name: name(o, i), rrs: []dns.RR{rr}})
		}
		if n > 0 && o < 30 { // a name several owners hold, with records of their own
			own := &dns.TXT{Hdr: dns.RR_Header{Name: "shared.cluster.local.", Rrtype: dns.TypeTXT, Class: dns.ClassINET}, Txt: []string{strconv.Itoa(o)}}
			cs = append(cs, contribution{name: "shared.cluster.local.", rrs: []dns.RR{own}})
		}
		ix.set(strconv.Itoa(o), cs)
		if n == 0 {
			delete(model, strconv.Itoa(o))
		} else {
			model[strconv.Itoa(o)] = n
		}
	}
	want := 1 // shared.cluster.local.
	owners := 0
	for o := range 300 {
		n := model[strconv.Itoa(o)]
		if n > 0 {
			want += n + 1 // and the empty non-terminal o<N>.cluster.local.
			if o < 30 {
				owners++
			}
		}
		for i := range 12 {
			_, ok := ix.lookup(name(o, i))
			if ok != (i < n) {
				t.Fatalf("%s exists: %v, want %v", name(o, i), ok, i < n)
			}
		}
		if _, ok := ix.lookup("o" + strconv.Itoa(o) + ".cluster.local."); ok != (n > 0) {
			t.Fatalf("o%d exists: %v, want %v", o, ok, n > 0)
		}
	}
	if rrs, _ := ix.lookup("shared.cluster.local."); len(rrs) != owners {
		t.Fatalf("shared name: %d records, want %d", len(rrs), owners)
	}
	if got := ix.count.Load(); got != int64(want) {
		t.Fatalf("count %d, want %d", got, want)
	}
	seen := 0
	ix.each(func(string, *entry) bool { seen++; return true })
	if seen != want {
		t.Fatalf("each saw %d names, want %d", seen, want)
	}
	if l := len(ix.names.Load().slots); ix.used*4 > l*3 {
		t.Errorf("table of %d slots with %d used", l, ix.used)
	}
}
