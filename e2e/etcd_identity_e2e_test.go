package e2e

// End-to-end tests of an etcd that comes back as another: a new cluster on
// a fresh data directory, or the state of an earlier snapshot (the same
// cluster ID, a revision below the one dnsd holds, or above it with other
// data). dnsd reads the prefix again and serves what the new etcd holds.

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/dnsd/dnsd/internal/dnstest"
	"github.com/dnsd/dnsd/sources/etcd/etcdtest"
)

func TestEtcdComesBackAsAnother(t *testing.T) {
	put := func(t *testing.T, c *clientv3.Client, key, val string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := c.Put(ctx, key, val); err != nil {
			t.Fatalf("put %s: %v", key, err)
		}
	}
	const (
		keyA    = "/skydns/internal/example/a"
		keyGone = "/skydns/internal/example/gone"
		keyNew  = "/skydns/internal/example/new"
		keyPad  = "/skydns/internal/example/pad"
	)
	for _, tc := range []struct {
		name   string
		token  string // the new cluster's initial-cluster-token ("": the same cluster ID)
		pads   int    // puts of pad in the new cluster, after a and new
		reason string // dnsd_etcd_relists_total's reason
		log    string // in the WARN line
	}{
		// A new cluster on a fresh data directory (a new cluster ID).
		{name: "new cluster", token: "another-cluster", reason: "cluster_changed", log: "etcd cluster changed (id "},
		// A snapshot restored with the same flags: the same cluster ID, a
		// revision far below the one dnsd holds.
		{name: "revision went back", reason: "revision_back", log: "etcd revision went back (from "},
		// The same, but written to past dnsd's revision before dnsd sees it.
		{name: "other history above", pads: 80, reason: "history_changed", log: "etcd history changed at revision "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := etcdtest.Start(t, etcdtest.Options{})
			srv.Put(keyA, `{"host":"10.0.0.1"}`)
			srv.Put(keyGone, `{"host":"10.0.0.2"}`)
			for i := range 50 {
				srv.Put(keyPad, fmt.Sprintf(`{"host":"10.0.1.%d"}`, i))
			}
			dir := t.TempDir()
			port, hport := freePort(t), freePort(t)
			addr := fmt.Sprintf("127.0.0.1:%d", port)
			writeFile(t, filepath.Join(dir, "dnsd.yaml"), fmt.Sprintf(`listen: ["%s"]
http: "127.0.0.1:%d"
zones:
  example.internal:
    - etcd:
        endpoints: ["%s"]
        prefix: /skydns
        ttl: 30s
`, addr, hport, srv.Endpoint()))
			p := startDnsd(t, dir, "-config", "dnsd.yaml")
			p.waitLog("dnsd started", 1)
			p.waitLog("etcd prefix read", 1)
			base := fmt.Sprintf("http://127.0.0.1:%d", hport)
			waitReady(t, base, 200)
			waitAnswer(t, addr, "a.example.internal", dns.TypeA, "NOERROR:10.0.0.1")
			waitAnswer(t, addr, "gone.example.internal", dns.TypeA, "NOERROR:10.0.0.2")
			waitAnswer(t, addr, "pad.example.internal", dns.TypeA, "NOERROR:10.0.1.49")

			srv.Replace(tc.token, func(c *clientv3.Client) {
				put(t, c, keyA, `{"host":"10.0.0.99"}`)
				put(t, c, keyNew, `{"host":"10.0.0.7"}`)
				for i := range tc.pads {
					put(t, c, keyPad, fmt.Sprintf(`{"host":"10.0.2.%d"}`, i))
				}
			})
			start := time.Now()
			// Generous: the new etcd is noticed at the reconnection, and at
			// the latest by the backend's periodic check.
			waitAnswerWithin(t, 30*time.Second, addr, "new.example.internal", dns.TypeA, "NOERROR:10.0.0.7")
			recovery := time.Since(start)
			waitAnswer(t, addr, "a.example.internal", dns.TypeA, "NOERROR:10.0.0.99")
			waitAnswer(t, addr, "gone.example.internal", dns.TypeA, "NXDOMAIN:")
			if tc.pads == 0 {
				waitAnswer(t, addr, "pad.example.internal", dns.TypeA, "NXDOMAIN:")
			} else {
				waitAnswer(t, addr, "pad.example.internal", dns.TypeA, fmt.Sprintf("NOERROR:10.0.2.%d", tc.pads-1))
			}
			t.Logf("FAULT etcd %s recovery=%v", tc.name, recovery.Round(time.Millisecond))
			p.waitLog(tc.log, 1)
			if n := logCount(p, "level=WARN", "etcd is not as read", tc.log); n != 1 {
				t.Errorf("WARN %q logged %d times, want once", tc.log, n)
			}
			if n := logCount(p, "level=INFO", "etcd prefix read again", tc.log); n != 1 {
				t.Errorf("INFO at the end of the re-read logged %d times, want once", n)
			}

			// The watch goes on against the new etcd.
			srv.Put("/skydns/internal/example/after", `{"host":"10.0.0.8"}`)
			waitAnswer(t, addr, "after.example.internal", dns.TypeA, "NOERROR:10.0.0.8")
			waitReady(t, base, 200)
			if _, body := httpGet(t, base+"/ready"); strings.Contains(body, "etcd") {
				t.Errorf("/ready still names etcd after the re-read: %q", body)
			}
			metrics := scrape(t, base)
			backend := `backend="` + srv.Endpoint() + ` /skydns"`
			if got := metricValue(metrics, "dnsd_etcd_relists_total", backend+`,reason="`+tc.reason+`"`); got != 1 {
				t.Errorf("dnsd_etcd_relists_total{reason=%q} = %v, want 1:\n%s", tc.reason, got, grep(metrics, "dnsd_etcd_relists"))
			}
			if got := metricValue(metrics, "dnsd_etcd_up", backend); got != 1 {
				t.Errorf("dnsd_etcd_up = %v, want 1", got)
			}
			p.stop(syscall.SIGTERM)
		})
	}
}

// waitAnswerWithin is waitAnswer with a deadline of d.
func waitAnswerWithin(t *testing.T, d time.Duration, addr, name string, qtype uint16, want string) {
	t.Helper()
	dnstest.EventuallyNil(t, d, func() error {
		r, err := query(t, "udp", addr, name, qtype)
		if err != nil {
			return fmt.Errorf("%s %s: %w", name, dns.TypeToString[qtype], err)
		}
		if got := dnstest.RData(r); got != want {
			return fmt.Errorf("%s %s: got %q, want %q", name, dns.TypeToString[qtype], got, want)
		}
		return nil
	})
}
