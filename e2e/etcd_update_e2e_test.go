package e2e

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/dnsd/dnsd/internal/dnstest"
	"github.com/dnsd/dnsd/sources/etcd/etcdtest"
)

// TestEtcdUpdateTwoInstances: two dnsd processes on one etcd, each with
// the zone's etcd source open to updates. An update through one is served
// by the other within a second; the same update with "name not in use"
// through the other fails that prerequisite; of two conflicting updates
// sent at once, one to each, exactly one is applied and the other gets
// YXDOMAIN (never SERVFAIL), and both serve the winner's address.
func TestEtcdUpdateTwoInstances(t *testing.T) {
	needTool(t, "nsupdate")
	srv := etcdtest.Start(t, etcdtest.Options{})
	cfg := config{HTTP: true, Log: "{level: debug}", Zones: fmt.Sprintf(`  apps.internal:
    - etcd: {endpoints: ["%s"], prefix: /skydns, updates: true, sync_timeout: 10s}
`, srv.Endpoint()), Extra: `update:
  - zones: [apps.internal]
    tsig: {name: k, algorithm: hmac-sha256, secret_file: k.key}
`}
	files := map[string]string{"k.key": dhcpSecret + "\n"}
	a, b := start(t, cfg, files), start(t, cfg, files)
	for _, d := range []*dnsd{a, b} {
		waitReady(t, d.base, 200)
	}
	key := []string{"-y", "hmac-sha256:k:" + dhcpSecret}
	script := func(d *dnsd, name, addr string) string {
		host, port, _ := strings.Cut(d.addr, ":")
		return fmt.Sprintf(`server %s %s
zone apps.internal
prereq nxdomain %s
update add %s 60 A %s
send
`, host, port, name, name, addr)
	}

	// Through A; served by A at once, by B through its watch.
	out, ok := runClient(t, script(a, "web.apps.internal", "10.0.0.1"), "nsupdate", key...)
	if !ok {
		t.Fatalf("nsupdate via A: %s", out)
	}
	sent := time.Now()
	if r, _ := query(t, "udp", a.addr, "web.apps.internal.", dns.TypeA); dnstest.RData(r) != "NOERROR:10.0.0.1" {
		t.Fatalf("A right after NOERROR: %s", dnstest.RData(r))
	}
	for {
		r, err := query(t, "udp", b.addr, "web.apps.internal.", dns.TypeA)
		if err == nil && dnstest.RData(r) == "NOERROR:10.0.0.1" {
			break
		}
		if time.Since(sent) > time.Second {
			t.Fatalf("B does not serve the update after 1 s: %s %v", dnstest.RData(r), err)
		}
		time.Sleep(time.Millisecond)
	}
	t.Logf("an update through A was served by B %v after A answered NOERROR", time.Since(sent).Round(100*time.Microsecond))
	if resp, err := srv.Client().Get(t.Context(), "/skydns/internal/apps/web/@", clientv3.WithPrefix()); err != nil || len(resp.Kvs) != 1 {
		t.Errorf("record keys of web.apps.internal: %v %v", resp, err)
	} else {
		t.Logf("written: %s = %s", resp.Kvs[0].Key, resp.Kvs[0].Value)
	}

	// The same update through B: the name is in use.
	out, ok = runClient(t, script(b, "web.apps.internal", "10.0.0.1"), "nsupdate", key...)
	if ok || !strings.Contains(out, "YXDOMAIN") {
		t.Fatalf("the same update via B: ok=%v %q, want YXDOMAIN", ok, out)
	}

	// Conflicting updates at once, one through each instance.
	for i := range 5 {
		name := fmt.Sprintf("x%d.apps.internal", i)
		var wg sync.WaitGroup
		outs, oks := make([]string, 2), make([]bool, 2)
		for j, d := range []*dnsd{a, b} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				outs[j], oks[j] = runClient(t, script(d, name, fmt.Sprintf("10.0.1.%d", j+1)), "nsupdate", key...)
			}()
		}
		wg.Wait()
		if oks[0] == oks[1] {
			t.Fatalf("%s: A ok=%v %q, B ok=%v %q; want exactly one NOERROR", name, oks[0], outs[0], oks[1], outs[1])
		}
		winner, loser := 0, 1
		if oks[1] {
			winner, loser = 1, 0
		}
		if !strings.Contains(outs[loser], "YXDOMAIN") {
			t.Fatalf("%s: the loser got %q, want YXDOMAIN", name, outs[loser])
		}
		want := fmt.Sprintf("NOERROR:10.0.1.%d", winner+1)
		for _, d := range []*dnsd{a, b} {
			waitAnswerWithin(t, time.Second, d.addr, name+".", dns.TypeA, want)
		}
		t.Logf("%s: the update through %s won", name, []string{"A", "B"}[winner])
	}
	// How many of the races were decided by the transaction's guard (the
	// others by the prerequisite, the loser having begun after the
	// winner's commit was applied).
	const conflict = "etcd update conflict"
	t.Logf("conflicts found at commit: %d", strings.Count(a.stderr.String(), conflict)+strings.Count(b.stderr.String(), conflict))
}
