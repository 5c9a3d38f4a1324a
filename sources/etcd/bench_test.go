package etcd

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/miekg/dns"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/dnsd/dnsd/pipeline"
	"github.com/dnsd/dnsd/sources/etcd/etcdtest"
)

// benchIndex fills an index with n hosts h<i>.s<i%100>.example.internal
// (every name an A record; every s<k> a name with n/100 children).
func benchIndex(tb testing.TB, n int) *index {
	ix := newIndex("/skydns", 300)
	for i := range n {
		key := fmt.Sprintf("/skydns/internal/example/s%d/h%d", i%100, i)
		val := fmt.Appendf(nil, `{"host":"10.%d.%d.%d"}`, i>>16&255, i>>8&255, i&255)
		if _, err := ix.put(key, val, int64(i+1)); err != nil {
			tb.Fatal(err)
		}
	}
	return ix
}

func benchSource(ix *index) *Source {
	b := backendOver(ix)
	b.synced.Store(true)
	return NewSource(b, []string{"example.internal."}, 300*time.Second)
}

func benchLookup(b *testing.B, s *Source, name string, want pipeline.Status) {
	q := &pipeline.Question{Name: name, Type: dns.TypeA, Zone: "example.internal."}
	ctx := context.Background()
	if r := s.Lookup(ctx, q); r.Status != want {
		b.Fatalf("%s: status %d", name, r.Status)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		s.Lookup(ctx, q)
	}
}

// A hit on a name of a 100,000-record index.
func BenchmarkLookupHit(b *testing.B) {
	benchLookup(b, benchSource(benchIndex(b, 100_000)), "h4242.s42.example.internal.", pipeline.Found)
}

// A name whose answer is its 1,000 children's records (cached view).
func BenchmarkLookupChildren(b *testing.B) {
	benchLookup(b, benchSource(benchIndex(b, 100_000)), "s42.example.internal.", pipeline.Found)
}

func BenchmarkLookupMiss(b *testing.B) {
	benchLookup(b, benchSource(benchIndex(b, 100_000)), "nope.s42.example.internal.", pipeline.NotMine)
}

// One put applied to a 100,000-record index: O(the touched name), not
// O(index).
func BenchmarkApplyPut(b *testing.B) {
	ix := benchIndex(b, 100_000)
	rev := int64(1 << 30)
	vals := [][]byte{[]byte(`{"host":"10.1.1.1"}`), []byte(`{"host":"10.1.1.2"}`)}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		rev++
		if _, err := ix.put("/skydns/internal/example/s7/h7", vals[i&1], rev); err != nil {
			b.Fatal(err)
		}
	}
}

// Heap held by an index of 100,000 records (reported as MiB and
// bytes/record).
func BenchmarkMemory100k(b *testing.B) {
	for b.Loop() {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		ix := benchIndex(b, 100_000)
		runtime.GC()
		runtime.ReadMemStats(&after)
		held := float64(after.HeapAlloc - before.HeapAlloc)
		b.ReportMetric(held/(1<<20), "MiB")
		b.ReportMetric(held/100_000, "B/record")
		runtime.KeepAlive(ix)
	}
}

// put → served: the time from an etcd Put returning until the record is
// answered by the Source, through a real embedded etcd.
func BenchmarkPutServed(b *testing.B) {
	srv := etcdtest.Start(b, etcdtest.Options{})
	cli := srv.Client()
	bk, err := Open(Options{Endpoints: []string{srv.Endpoint()}, Prefix: "/skydns", TTL: time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	defer bk.Close()
	ctx := context.Background()
	if err := bk.WaitSynced(ctx); err != nil {
		b.Fatal(err)
	}
	s := NewSource(bk, []string{"example.internal."}, time.Minute)
	q := &pipeline.Question{Name: "db.example.internal.", Type: dns.TypeA, Zone: "example.internal."}
	var worst, total time.Duration
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		ip := fmt.Sprintf("10.0.%d.%d", i>>8&255, i&255)
		if _, err := cli.Put(ctx, "/skydns/internal/example/db", `{"host":"`+ip+`"}`); err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		for {
			r := s.Lookup(ctx, q)
			if len(r.RRs) == 1 && r.RRs[0].(*dns.A).A.String() == ip {
				break
			}
			if time.Since(start) > 5*time.Second {
				b.Fatalf("put %s not served after 5s", ip)
			}
			runtime.Gosched()
		}
		d := time.Since(start)
		worst, total = max(worst, d), total+d
	}
	b.ReportMetric(float64(total.Microseconds())/float64(b.N), "served-µs")
	b.ReportMetric(float64(worst.Microseconds()), "worst-µs")
}

// The first sync of 100,000 keys from a real etcd: time and heap. Run it
// with -benchtime 1x (writing the keys takes a while).
func BenchmarkList100k(b *testing.B) {
	srv := etcdtest.Start(b, etcdtest.Options{})
	cli := srv.Client()
	ctx := context.Background()
	const n = 100_000
	ops := make([]clientv3.Op, 0, 100)
	for i := range n {
		key := fmt.Sprintf("/skydns/internal/example/s%d/h%d", i%100, i)
		ops = append(ops, clientv3.OpPut(key, fmt.Sprintf(`{"host":"10.%d.%d.%d"}`, i>>16&255, i>>8&255, i&255)))
		if len(ops) == cap(ops) {
			if _, err := cli.Txn(ctx).Then(ops...).Commit(); err != nil {
				b.Fatal(err)
			}
			ops = ops[:0]
		}
	}
	b.ResetTimer()
	for b.Loop() {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		start := time.Now()
		bk, err := Open(Options{Endpoints: []string{srv.Endpoint()}, Prefix: "/skydns", TTL: time.Minute})
		if err != nil {
			b.Fatal(err)
		}
		if err := bk.WaitSynced(ctx); err != nil {
			b.Fatal(err)
		}
		took := time.Since(start)
		if bk.Records() != n {
			b.Fatalf("%d records", bk.Records())
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(took.Seconds()*1000, "sync-ms")
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/(1<<20), "MiB")
		bk.Close()
	}
}
