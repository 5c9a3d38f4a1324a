package e2e

// End-to-end tests of the etcd source: a real etcd runs inside the test
// process; the built dnsd binary is pointed at it by its dnsd.yaml.

import (
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/dnsd/dnsd/internal/dnstest"
	"github.com/dnsd/dnsd/sources/etcd/etcdtest"
)

// TestEtcdEndToEnd is the story: a put is answered at once, keeps
// being answered with etcd stopped, and puts are served again once etcd
// is back; a reload with unchanged settings keeps the watch.
func TestEtcdEndToEnd(t *testing.T) {
	srv := etcdtest.Start(t, etcdtest.Options{})
	srv.Put("/skydns/internal/example/web/x1", `{"host":"10.0.1.1"}`)
	srv.Put("/skydns/internal/example/web/x2", `{"host":"10.0.1.2"}`)
	srv.Put("/skydns/internal/example/_tcp/_pg", `{"host":"10.0.2.1","port":5432}`)
	p := start(t, config{HTTP: true, Zones: fmt.Sprintf(`  example.internal:
    - etcd:
        endpoints: ["%s"]
        prefix: /skydns
        ttl: 30s
        sync_timeout: 10s
`, srv.Endpoint())}, nil)
	p.waitLog("etcd prefix read", 1)
	addr, base := p.addr, p.base
	waitReady(t, base, 200)

	waitAnswer(t, addr, "web.example.internal", dns.TypeA, "NOERROR:10.0.1.1,10.0.1.2")
	r, err := query(t, "tcp", addr, "_pg._tcp.example.internal", dns.TypeSRV)
	if err != nil || dnstest.RData(r) != "NOERROR:10 100 5432 _pg._tcp.example.internal." || len(r.Extra) != 1 || !r.Authoritative {
		t.Fatalf("SRV: %v %v", r, err)
	}

	// etcdctl put ... is answered within 100 ms (checked here with a
	// generous bound; docs/performance.md has the measured figure).
	start := time.Now()
	srv.Put("/skydns/internal/example/db", `{"host":"10.0.0.5"}`)
	waitAnswer(t, addr, "db.example.internal", dns.TypeA, "NOERROR:10.0.0.5")
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("put -> served took %v", d)
	}

	// Reload with the same settings: the backend and its watch are kept.
	p.signal(syscall.SIGHUP)
	p.waitLog("reloaded", 1)
	if n := strings.Count(p.stderr.String(), "etcd prefix read"); n != 1 {
		t.Errorf("a reload with unchanged etcd settings re-read the prefix (%d reads)", n)
	}

	// etcd stops: the last data is served; the metric says etcd is down.
	srv.Stop()
	p.waitLog("etcd unreachable; serving the last data", 1)
	for range 5 {
		r, err := query(t, "udp", addr, "db.example.internal", dns.TypeA)
		if err != nil || dnstest.RData(r) != "NOERROR:10.0.0.5" {
			t.Fatalf("during the outage: %v %v", r, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	_, metrics := httpGet(t, base+"/metrics")
	if !strings.Contains(metrics, `dnsd_etcd_up{backend="`+srv.Endpoint()+` /skydns"} 0`) {
		t.Errorf("dnsd_etcd_up is not 0 during the outage:\n%s", grep(metrics, "dnsd_etcd"))
	}
	if code, _ := httpGet(t, base+"/ready"); code != 200 {
		t.Errorf("/ready = %d during an outage after the first sync; want 200 (synced, serving)", code)
	}

	// etcd is back: new puts and deletes are served.
	srv.Restart()
	srv.Put("/skydns/internal/example/new", `{"host":"10.0.0.6"}`)
	srv.Delete("/skydns/internal/example/web/x2")
	waitAnswer(t, addr, "new.example.internal", dns.TypeA, "NOERROR:10.0.0.6")
	waitAnswer(t, addr, "web.example.internal", dns.TypeA, "NOERROR:10.0.1.1")
	p.waitLog("etcd reachable again", 1)
	_, metrics = httpGet(t, base+"/metrics")
	for _, want := range []string{`dnsd_etcd_up{backend="` + srv.Endpoint() + ` /skydns"} 1`, "dnsd_etcd_events_total{", "dnsd_etcd_records{", `dnsd_source_synced{source="etcd endpoints=`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s:\n%s", want, grep(metrics, "etcd"))
		}
	}

	p.stop(syscall.SIGTERM)
}

// Nothing listens at the etcd endpoint: the zone's names are SERVFAIL
// (never NXDOMAIN, never answered by the next source), /ready is 503, and
// dnsd still starts and serves its other zones.
func TestEtcdNotSyncedEndToEnd(t *testing.T) {
	dir := t.TempDir()
	port, hport, dead := freePort(t), freePort(t), freePort(t)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	writeFile(t, filepath.Join(dir, "dnsd.yaml"), fmt.Sprintf(`listen: ["%s"]
http: "127.0.0.1:%d"
zones:
  example.internal:
    - etcd:
        endpoints: ["http://127.0.0.1:%d"]
        sync_timeout: 500ms
    - hosts:
        entries: ["10.9.9.9 db"]
  other.internal:
    - hosts:
        entries: ["10.8.8.8 up"]
`, addr, hport, dead))
	p := startDnsd(t, dir, "-config", "dnsd.yaml")
	p.waitLog("dnsd started", 1)
	waitAnswer(t, addr, "up.other.internal", dns.TypeA, "NOERROR:10.8.8.8")
	for _, name := range []string{"db.example.internal", "nope.example.internal", "example.internal"} {
		r, err := query(t, "udp", addr, name, dns.TypeA)
		if err != nil || r.Rcode != dns.RcodeServerFailure || len(r.Answer) != 0 {
			t.Errorf("%s before the first sync: %v %v; want SERVFAIL", name, r, err)
		}
	}
	base := fmt.Sprintf("http://127.0.0.1:%d", hport)
	code, body := httpGet(t, base+"/ready")
	if code != 503 || !strings.Contains(body, "etcd") {
		t.Errorf("/ready = %d %q; want 503 naming etcd", code, body)
	}
	p.waitLog("not synced within its sync_timeout", 1)
	// The warning names the backend as dnsd_source_synced does.
	if line := grep(p.stderr.String(), "not synced within its sync_timeout"); !strings.Contains(line, `source="etcd endpoints=http://127.0.0.1:`) || strings.Contains(line, "secrets=") {
		t.Errorf("the warning does not name the source as dnsd_source_synced does: %s", line)
	}
	_, metrics := httpGet(t, base+"/metrics")
	if !strings.Contains(metrics, `dnsd_source_synced{source="etcd endpoints=http://127.0.0.1:`) || !strings.Contains(grep(metrics, `dnsd_source_synced{source="etcd`), "} 0") {
		t.Errorf("dnsd_source_synced for etcd is not 0:\n%s", grep(metrics, "dnsd_source_synced"))
	}

	// etcd comes up at that address: the zone syncs and serves.
	srv := etcdtest.Start(t, etcdtest.Options{ClientPort: dead})
	srv.Put("/skydns/internal/example/db", `{"host":"10.0.0.5"}`)
	waitAnswer(t, addr, "db.example.internal", dns.TypeA, "NOERROR:10.0.0.5")
	waitReady(t, base, 200)
}

func waitReady(t *testing.T, base string, want int) {
	t.Helper()
	dnstest.EventuallyNil(t, 20*time.Second, func() error {
		if code, body := httpGet(t, base+"/ready"); code != want {
			return fmt.Errorf("/ready = %d %q, want %d", code, body, want)
		}
		return nil
	})
}
