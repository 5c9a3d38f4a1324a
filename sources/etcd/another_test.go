package etcd

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/dnsd/dnsd/internal/dnstest"
	"github.com/dnsd/dnsd/pipeline"
	"github.com/dnsd/dnsd/sources/etcd/etcdtest"
)

// etcd replaced by another cluster at the same address: while the prefix
// is read again, the data read before answers and the source says it is
// not synced, with the cause; then every view's index is the new data at
// once.
func TestAnotherEtcdIsReadAgain(t *testing.T) {
	srv := etcdtest.Start(t, etcdtest.Options{})
	srv.Put("/skydns/internal/example/a", `{"host":"10.0.0.1"}`)
	srv.Put("/skydns/internal/example/gone", `{"host":"10.0.0.2"}`)
	for i := range 20 {
		srv.Put("/skydns/internal/example/pad", fmt.Sprintf(`{"host":"10.0.1.%d"}`, i))
	}
	held, hold := make(chan struct{}), make(chan struct{})
	f := openFixture(t, srv, func(o *Options) {
		o.beforeReread = func() {
			held <- struct{}{}
			<-hold
		}
	})
	f.waitSynced()
	src := NewSource(f.b, testZones, time.Minute)
	// The fixture's index (300 s) is kept while a View holds it.
	own := f.b.View(300 * time.Second)
	defer own.Close()
	view := f.b.View(60 * time.Second)
	defer view.Close()
	other := NewViewSource(view, testZones, time.Minute)
	if !src.Synced() || src.Problem() != "" {
		t.Fatalf("before: synced %v, problem %q", src.Synced(), src.Problem())
	}

	srv.Replace("another-cluster", func(c *clientv3.Client) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for k, v := range map[string]string{"a": `{"host":"10.0.0.99"}`, "new": `{"host":"10.0.0.7"}`} {
			if _, err := c.Put(ctx, "/skydns/internal/example/"+k, v); err != nil {
				t.Fatal(err)
			}
		}
	})
	select {
	case <-held:
	case <-time.After(20 * time.Second):
		t.Fatal("no re-read within 20 s of etcd being replaced")
	}
	if src.Synced() {
		t.Error("the source says it is synced while the prefix is read again")
	}
	if p := src.Problem(); !strings.HasPrefix(p, "etcd cluster changed (id ") || !strings.HasSuffix(p, ": re-reading") {
		t.Errorf("Problem() = %q during the re-read", p)
	}
	if got := answer(f.ask("a.example.internal", dns.TypeA)); got != "NOERROR:A 10.0.0.1" {
		t.Errorf("during the re-read: a = %q, want the data read before", got)
	}
	close(hold)

	f.eventually("new.example.internal", dns.TypeA, "NOERROR:A 10.0.0.7")
	f.eventually("a.example.internal", dns.TypeA, "NOERROR:A 10.0.0.99")
	f.eventually("gone.example.internal", dns.TypeA, "NXDOMAIN:")
	f.eventually("pad.example.internal", dns.TypeA, "NXDOMAIN:")
	dnstest.Eventually(t, "synced again", 5*time.Second, func() bool { return src.Synced() && src.Problem() == "" })
	q := &pipeline.Question{Name: "a.example.internal.", Type: dns.TypeA, Zone: "example.internal."}
	if r := other.Lookup(context.Background(), q); r.Status != pipeline.Found || len(r.RRs) != 1 ||
		r.RRs[0].(*dns.A).A.String() != "10.0.0.99" || r.RRs[0].Header().Ttl != 60 {
		t.Errorf("the 60 s view after the re-read: %v", r.RRs)
	}
	if n := strings.Count(f.log.String(), "etcd is not as read"); n != 1 {
		t.Errorf("the re-read was logged %d times, want once:\n%s", n, f.log.String())
	}
	if got := metricValue(f.m.relists.WithLabelValues(f.b.opts.Name, "cluster_changed")); got != 1 {
		t.Errorf("re-reads for a changed cluster = %v, want 1", got)
	}
	// The watch follows the new etcd.
	srv.Put("/skydns/internal/example/after", `{"host":"10.0.0.8"}`)
	f.eventually("after.example.internal", dns.TypeA, "NOERROR:A 10.0.0.8")
}
