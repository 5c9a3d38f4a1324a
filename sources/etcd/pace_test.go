package etcd

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/dnsd/dnsd/internal/pacing/pacingtest"
	"github.com/dnsd/dnsd/sources/etcd/etcdtest"
)

// putBulk writes n keys h0..h(n-1) below /skydns/internal/example/<dir>,
// 100 to a transaction.
func putBulk(t *testing.T, srv *etcdtest.Server, dir string, n int) {
	t.Helper()
	cli, ctx := srv.Client(), context.Background()
	ops := make([]clientv3.Op, 0, 100)
	for i := range n {
		ops = append(ops, clientv3.OpPut(fmt.Sprintf("/skydns/internal/example/%s/h%d", dir, i),
			fmt.Sprintf(`{"host":"10.%d.%d.%d"}`, i>>16&255, i>>8&255, i&255)))
		if len(ops) == cap(ops) || i == n-1 {
			if _, err := cli.Txn(ctx).Then(ops...).Commit(); err != nil {
				t.Fatal(err)
			}
			ops = ops[:0]
		}
	}
}

// While queries are answered, on one processor, index writes give way to
// them (package pacing): a re-read of the prefix after a compaction passed
// the watch, a watch response carrying a whole prefix's deletion, and the
// first read of a backend opened by a reload (Options.Paced). The first
// read at a start does not, nor anything with two processors.
func TestPacedOnOneProcessor(t *testing.T) {
	const keys = 10000
	srv := etcdtest.Start(t, etcdtest.Options{NoFsync: true})
	for _, procs := range []int{1, 2} {
		t.Run(fmt.Sprint(procs), func(t *testing.T) {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
			dir := fmt.Sprintf("p%d", procs)
			putBulk(t, srv, dir, keys)
			last := fmt.Sprintf("h%d.%s.example.internal", keys-1, dir)
			want := fmt.Sprintf("NOERROR:A 10.%d.%d.%d", (keys-1)>>16&255, (keys-1)>>8&255, (keys-1)&255)

			var slept pacingtest.Sleeps

			hold := make(chan struct{})
			var first sync.Once
			f := openFixture(t, srv, func(o *Options) {
				o.beforeWatch = func() { first.Do(func() { <-hold }) }
				o.sleep = slept.Sleep
			})
			f.waitSynced()
			f.eventually(last, dns.TypeA, want)
			slept.Expect(t, "the first read at a start", false)

			// A compaction past the held watch: the prefix is read again.
			srv.Put("/skydns/internal/example/"+dir+"/added", `{"host":"10.9.9.8"}`)
			srv.Put("/skydns/internal/example/"+dir+"/added", `{"host":"10.9.9.9"}`)
			srv.Compact() // the watch would begin at the first put
			close(hold)
			f.eventually("added."+dir+".example.internal", dns.TypeA, "NOERROR:A 10.9.9.9")
			// The new key is served before the read ends and is counted.
			relists := f.m.relists.WithLabelValues(f.b.opts.Name, "compacted")
			for deadline := time.Now().Add(5 * time.Second); metricValue(relists) < 1 && time.Now().Before(deadline); {
				time.Sleep(time.Millisecond)
			}
			if got := metricValue(relists); got != 1 {
				t.Errorf("compaction re-reads = %v, want 1", got)
			}
			slept.Expect(t, "a re-read of the prefix", true)

			// One watch response with every key's deletion.
			if _, err := srv.Client().Delete(context.Background(), "/skydns/internal/example/"+dir+"/", clientv3.WithPrefix()); err != nil {
				t.Fatal(err)
			}
			f.eventually(last, dns.TypeA, "NXDOMAIN:")
			slept.Expect(t, "a watch response of every key", true)

			// A backend a reload opens paces its first read.
			putBulk(t, srv, dir, keys)
			g := openFixture(t, srv, func(o *Options) {
				o.Paced = true
				o.sleep = slept.Sleep
			})
			g.waitSynced()
			g.eventually(last, dns.TypeA, want)
			slept.Expect(t, "the first read of a backend opened by a reload", true)
		})
	}
}

// A transaction whose events are larger than etcd's request limit comes
// in pieces (the watch asks for fragments, so one large message does not
// hold up the process while it is decoded); every event of it is applied.
func TestLargeTransactionInPieces(t *testing.T) {
	srv := etcdtest.Start(t, etcdtest.Options{NoFsync: true, MaxRequestBytes: 16 << 10})
	srv.Put("/skydns/internal/example/kept", `{"host":"10.0.0.1"}`)
	f := openFixture(t, srv, nil)
	f.waitSynced()
	const keys = 3000            // ~300 KB of events: about twenty pieces
	putBulk(t, srv, "big", keys) // 100 a transaction: each below the limit
	last := fmt.Sprintf("h%d.big.example.internal", keys-1)
	f.eventually(last, dns.TypeA, fmt.Sprintf("NOERROR:A 10.0.%d.%d", (keys-1)>>8&255, (keys-1)&255))
	if _, err := srv.Client().Delete(context.Background(), "/skydns/internal/example/big/", clientv3.WithPrefix()); err != nil {
		t.Fatal(err)
	}
	f.eventually(last, dns.TypeA, "NXDOMAIN:")
	// The count of records follows once the whole response is applied.
	for deadline := time.Now().Add(5 * time.Second); f.b.Records() != 1 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	if n := f.b.Records(); n != 1 {
		t.Errorf("records after the prefix's deletion: %d, want 1", n)
	}
	f.eventually("h0.big.example.internal", dns.TypeA, "NXDOMAIN:")
	f.eventually("kept.example.internal", dns.TypeA, "NOERROR:A 10.0.0.1")
	// The watch goes on.
	srv.Put("/skydns/internal/example/after", `{"host":"10.0.0.2"}`)
	f.eventually("after.example.internal", dns.TypeA, "NOERROR:A 10.0.0.2")
}
