package etcd

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/dnsd/dnsd/pipeline"
)

// testIndex is an index with a put/del helper that fails the test on
// malformed input unless told otherwise.
type testIndex struct {
	t   *testing.T
	ix  *index
	rev int64
}

func newTestIndex(t *testing.T) *testIndex {
	return &testIndex{t: t, ix: newIndex("/skydns", 300)}
}

func (ti *testIndex) put(key, val string) {
	ti.t.Helper()
	ti.rev++
	if _, err := ti.ix.put(key, []byte(val), ti.rev); err != nil {
		ti.t.Fatalf("put %s %s: %v", key, val, err)
	}
}

func (ti *testIndex) del(key string) {
	ti.t.Helper()
	if !ti.ix.del(key) {
		ti.t.Fatalf("del %s: no such key", key)
	}
}

// get renders name's answer: "-" for no node, else the sorted records.
func (ti *testIndex) get(name string) string {
	n := ti.ix.lookup(name)
	if n == nil {
		return "-"
	}
	return strings.Join(rrStrings(n.records()), "; ")
}

func TestIndexNamesAndChildren(t *testing.T) {
	ti := newTestIndex(t)
	ti.put("/skydns/internal/example/db", `{"host":"10.0.0.5"}`)
	ti.put("/skydns/internal/example/svc/x1", `{"host":"10.0.0.1"}`)
	ti.put("/skydns/internal/example/svc/x2", `{"host":"fd00::2"}`)
	ti.put("/skydns/internal/example/deep/a/b", `{"host":"10.0.0.9"}`)

	for name, want := range map[string]string{
		"db.example.internal.":       "A 10.0.0.5",
		"x1.svc.example.internal.":   "A 10.0.0.1",
		"svc.example.internal.":      "A 10.0.0.1; AAAA fd00::2", // keys below a name are its records
		"b.a.deep.example.internal.": "A 10.0.0.9",
		"a.deep.example.internal.":   "A 10.0.0.9",
		"deep.example.internal.":     "", // empty non-terminal: two levels above a key
		"internal.":                  "",
		"nope.example.internal.":     "-",
	} {
		if got := ti.get(name); got != want {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}

	// An update replaces the key's records; the parent's view follows.
	ti.put("/skydns/internal/example/svc/x1", `{"host":"10.0.0.11"}`)
	if got := ti.get("svc.example.internal."); got != "A 10.0.0.11; AAAA fd00::2" {
		t.Errorf("after update: svc = %q", got)
	}
	// The name's own key and its children's both count.
	ti.put("/skydns/internal/example/svc", `{"text":"own"}`)
	if got := ti.get("svc.example.internal."); got != `A 10.0.0.11; AAAA fd00::2; TXT "own"` {
		t.Errorf("own + children: svc = %q", got)
	}
	ti.del("/skydns/internal/example/svc/x1")
	ti.del("/skydns/internal/example/svc")
	if got := ti.get("svc.example.internal."); got != "AAAA fd00::2" {
		t.Errorf("after deletes: svc = %q", got)
	}
	if got := ti.get("x1.svc.example.internal."); got != "-" {
		t.Errorf("deleted x1 = %q", got)
	}
	// Deleting the last key below a name removes the whole branch.
	ti.del("/skydns/internal/example/deep/a/b")
	for _, n := range []string{"b.a.deep.example.internal.", "a.deep.example.internal.", "deep.example.internal."} {
		if got := ti.get(n); got != "-" {
			t.Errorf("after delete, %s = %q, want gone", n, got)
		}
	}
	ti.del("/skydns/internal/example/db")
	ti.del("/skydns/internal/example/svc/x2")
	if ti.ix.names.len() != 0 || ti.ix.keyCount() != 0 || ti.ix.records != 0 {
		t.Errorf("empty index still has %d names, %d keys, %d records", ti.ix.names.len(), ti.ix.keyCount(), ti.ix.records)
	}
}

func TestIndexSameNameTwoKeys(t *testing.T) {
	ti := newTestIndex(t)
	ti.put("/skydns/internal/example", `{"host":"10.0.0.1"}`)
	ti.put("/skydns/internal/example/", `{"host":"10.0.0.2"}`)
	if got := ti.get("example.internal."); got != "A 10.0.0.1; A 10.0.0.2" {
		t.Errorf("example = %q", got)
	}
	ti.del("/skydns/internal/example")
	if got := ti.get("example.internal."); got != "A 10.0.0.2" {
		t.Errorf("example = %q", got)
	}
}

// Records of one type gathered from several keys of a name are one
// RRset: they get one TTL, the lowest (RFC 2181 §5.2); each key's own
// name keeps its TTL, and other types theirs.
func TestIndexOneTTLPerRRset(t *testing.T) {
	ti := newTestIndex(t)
	ti.put("/skydns/internal/example/multi/x1", `{"host":"10.0.1.2"}`)
	ti.put("/skydns/internal/example/multi/x2", `{"host":"10.0.1.3","ttl":60}`)
	ti.put("/skydns/internal/example/multi/x3", `{"text":"hello","ttl":90}`)
	ttls := func(name string) string {
		var out []string
		for _, rr := range ti.ix.lookup(name).records() {
			out = append(out, fmt.Sprintf("%s/%d", dns.TypeToString[rr.Header().Rrtype], rr.Header().Ttl))
		}
		return strings.Join(out, " ")
	}
	if got := ttls("multi.example.internal."); got != "A/60 A/60 TXT/90" {
		t.Errorf("multi: %s, want A/60 A/60 TXT/90", got)
	}
	if got := ttls("x1.multi.example.internal."); got != "A/300" {
		t.Errorf("x1: %s, want its own A/300", got)
	}
	ti.del("/skydns/internal/example/multi/x2")
	if got := ttls("multi.example.internal."); got != "A/300 TXT/90" {
		t.Errorf("multi after x2 is gone: %s, want A/300 TXT/90", got)
	}
}

func TestIndexGroups(t *testing.T) {
	ti := newTestIndex(t)
	ti.put("/skydns/internal/example/g/a", `{"host":"10.0.0.1","group":"blue"}`)
	ti.put("/skydns/internal/example/g/b", `{"host":"10.0.0.2","group":"blue"}`)
	ti.put("/skydns/internal/example/g/c", `{"host":"10.0.0.3"}`)
	if got := ti.get("g.example.internal."); got != "A 10.0.0.1; A 10.0.0.2; A 10.0.0.3" {
		t.Errorf("one group and an ungrouped key: %q", got)
	}
	ti.put("/skydns/internal/example/g/d", `{"host":"10.0.0.4","group":"green"}`)
	if got := ti.get("g.example.internal."); got != "A 10.0.0.1; A 10.0.0.2; A 10.0.0.3; A 10.0.0.4" {
		t.Errorf("groups disagree at one depth: no filter, got %q", got)
	}
	// The name's own key is shallower: its group decides.
	ti.put("/skydns/internal/example/g", `{"host":"10.0.0.9","group":"green"}`)
	if got := ti.get("g.example.internal."); got != "A 10.0.0.3; A 10.0.0.4; A 10.0.0.9" {
		t.Errorf("own group green: %q", got)
	}
}

func TestIndexWildcards(t *testing.T) {
	ti := newTestIndex(t)
	ti.put("/skydns/internal/example/*", `{"host":"10.0.0.99"}`)
	ti.put("/skydns/internal/example/db", `{"host":"10.0.0.5"}`)
	ti.put("/skydns/internal/example/svc/a/x", `{"host":"10.1.0.1"}`)
	ti.put("/skydns/internal/example/svc/b/x", `{"host":"10.1.0.2"}`)
	ti.put("/skydns/internal/example/svc/c/y", `{"host":"10.1.0.3"}`)
	const zone = "example.internal."
	wild := func(name string) string {
		if n := ti.ix.lookup(name); n != nil {
			return "exists"
		}
		w := ti.ix.wildcard(name, zone)
		if w == nil {
			return "-"
		}
		return strings.Join(rrStrings(w.records()), "; ")
	}
	for name, want := range map[string]string{
		"anything.example.internal.":     "A 10.0.0.99",
		"a.b.example.internal.":          "A 10.0.0.99", // closest encloser is the apex
		"db.example.internal.":           "exists",
		"x.db.example.internal.":         "-", // closest encloser db has no wildcard
		"z.svc.example.internal.":        "-",
		"other.internal.":                "-", // above the zone
		"deep.x.a.svc.example.internal.": "-",
	} {
		if got := wild(name); got != want {
			t.Errorf("wildcard for %s = %q, want %q", name, got, want)
		}
	}
	expand := func(name string) string {
		rrs, ok := ti.ix.expand(name)
		if !ok {
			return "-"
		}
		for _, rr := range rrs {
			if rr.Header().Name != name {
				t.Errorf("expand %s: owner %s", name, rr.Header().Name)
			}
		}
		return strings.Join(rrStrings(rrs), "; ")
	}
	for name, want := range map[string]string{
		"x.*.svc.example.internal.": "A 10.1.0.1; A 10.1.0.2",
		"*.*.svc.example.internal.": "A 10.1.0.1; A 10.1.0.2; A 10.1.0.3",
		"*.svc.example.internal.":   "A 10.1.0.1; A 10.1.0.2; A 10.1.0.3",
		"z.*.svc.example.internal.": "-",
		"*.nope.example.internal.":  "-",
		"y.*.*.example.internal.":   "A 10.1.0.3",
	} {
		if got := expand(name); got != want {
			t.Errorf("expand %s = %q, want %q", name, got, want)
		}
	}
	// The wildcard's records are not its parent's (RFC 4592), while a
	// plain child's are (SkyDNS): the apex has db's A, not the wildcard's.
	if got := ti.get("example.internal."); got != "A 10.0.0.5" {
		t.Errorf("the wildcard's parent: %q, want db's record only", got)
	}
	ti.del("/skydns/internal/example/*")
	if got := wild("anything.example.internal."); got != "-" {
		t.Errorf("after deleting the wildcard: %q", got)
	}
	for _, s := range []string{"*.a.", "a.*.b.", "*."} {
		if !hasStarLabel(s) {
			t.Errorf("hasStarLabel(%q) = false", s)
		}
	}
	for _, s := range []string{"a*.b.", "a.*b.", "a.b.", "*a.", "**."} {
		if hasStarLabel(s) {
			t.Errorf("hasStarLabel(%q) = true", s)
		}
	}
}

func TestIndexMalformedKeepsOthers(t *testing.T) {
	ix := newIndex("/skydns", 300)
	if _, err := ix.put("/skydns/internal/example/db/x1", []byte(`{"host":"10.0.0.1"}`), 1); err != nil {
		t.Fatal(err)
	}
	if _, err := ix.put("/skydns/internal/example/db/x2", []byte(`{"host":"10.0.0.300"}`), 2); err == nil {
		t.Fatal("bad IP accepted")
	}
	if _, err := ix.put("/skydns/internal/example/db/x3", []byte(`not json`), 3); err == nil {
		t.Fatal("bad JSON accepted")
	}
	if _, err := ix.put("/skydns/internal/example/bad.key", []byte(`{"host":"10.0.0.1"}`), 4); err == nil {
		t.Fatal("bad key accepted")
	}
	// The same revision again (a re-list) is not reported twice.
	if ch, err := ix.put("/skydns/internal/example/db/x2", []byte(`{"host":"10.0.0.300"}`), 2); ch || err != nil {
		t.Fatalf("re-applying a revision: changed=%v err=%v", ch, err)
	}
	if got := strings.Join(rrStrings(ix.lookup("db.example.internal.").records()), "; "); got != "A 10.0.0.1" {
		t.Errorf("db = %q", got)
	}
	if n := ix.lookup("x2.db.example.internal."); n == nil || len(n.records()) != 0 {
		t.Errorf("a key with a malformed value: its name exists without records")
	}
	// Fixing the value makes it count.
	if _, err := ix.put("/skydns/internal/example/db/x2", []byte(`{"host":"10.0.0.2"}`), 5); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(rrStrings(ix.lookup("db.example.internal.").records()), "; "); got != "A 10.0.0.1; A 10.0.0.2" {
		t.Errorf("db = %q", got)
	}
	for _, k := range []string{"/skydns/internal/example/db/x1", "/skydns/internal/example/db/x2", "/skydns/internal/example/db/x3", "/skydns/internal/example/bad.key"} {
		ix.del(k)
	}
	if ix.names.len() != 0 || ix.keyCount() != 0 || ix.records != 0 {
		t.Errorf("left %d names, %d keys, %d records", ix.names.len(), ix.keyCount(), ix.records)
	}
}

// A/AAAA hits allocate nothing, for a leaf and for a name whose answer
// combines its children (after the first read of it).
func TestLookupAllocs(t *testing.T) {
	ti := newTestIndex(t)
	ti.put("/skydns/internal/example/db", `{"host":"10.0.0.5"}`)
	ti.put("/skydns/internal/example/svc/x1", `{"host":"10.0.0.1"}`)
	ti.put("/skydns/internal/example/svc/x2", `{"host":"10.0.0.2"}`)
	b := backendOver(ti.ix)
	b.synced.Store(true)
	src := NewSource(b, []string{"example.internal."}, time.Minute)
	for _, name := range []string{"db.example.internal.", "svc.example.internal."} {
		q := &pipeline.Question{Name: name, Type: dns.TypeA, Zone: "example.internal."}
		src.Lookup(context.Background(), q)
		allocs := testing.AllocsPerRun(1000, func() {
			if r := src.Lookup(context.Background(), q); r.Status != pipeline.Found || len(r.RRs) == 0 {
				t.Fatal("miss")
			}
		})
		if allocs != 0 {
			t.Errorf("%s: %v allocations per lookup, want 0", name, allocs)
		}
	}
}

// Readers run while the writer puts and deletes (run with -race): every
// read sees a whole record set of the name, never a torn one.
func TestIndexConcurrentReaders(t *testing.T) {
	ix := newIndex("/skydns", 300)
	var stop atomic.Bool
	var wg sync.WaitGroup
	for r := 0; r < 4; r++ {
		wg.Go(func() {
			for !stop.Load() {
				for i := 0; i < 50; i++ {
					n := ix.lookup(fmt.Sprintf("h%d.svc.example.internal.", i))
					if n == nil {
						continue
					}
					rrs := n.records()
					if len(rrs) > 1 {
						t.Errorf("h%d: %d records, want at most 1", i, len(rrs))
						return
					}
				}
				if n := ix.lookup("svc.example.internal."); n != nil {
					_ = n.records()
				}
			}
		})
	}
	rev := int64(0)
	for round := 0; round < 20; round++ {
		for i := 0; i < 50; i++ {
			rev++
			key := fmt.Sprintf("/skydns/internal/example/svc/h%d", i)
			if round%3 == 2 {
				ix.del(key)
				continue
			}
			if _, err := ix.put(key, fmt.Appendf(nil, `{"host":"10.0.%d.%d"}`, round, i), rev); err != nil {
				t.Fatal(err)
			}
		}
	}
	stop.Store(true)
	wg.Wait()
	// Growing the name table keeps every name reachable.
	for i := 0; i < 2000; i++ {
		rev++
		if _, err := ix.put(fmt.Sprintf("/skydns/internal/example/many/m%d", i), []byte(`{"host":"10.9.0.1"}`), rev); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 2000; i++ {
		if ix.lookup(fmt.Sprintf("m%d.many.example.internal.", i)) == nil {
			t.Fatalf("m%d lost", i)
		}
	}
	if got := len(ix.lookup("many.example.internal.").records()); got != 2000 {
		t.Errorf("many has %d records, want 2000", got)
	}
}

// backendOver is a Backend whose only index is ix, for tests of lookups
// without etcd.
func backendOver(ix *index) *Backend {
	return &Backend{
		opts:  Options{TTL: time.Duration(ix.ttl) * time.Second},
		views: map[uint32]*view{ix.ttl: newView(ix)},
		m:     NewMetrics(),
	}
}
