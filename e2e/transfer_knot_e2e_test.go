package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/dnsd/dnsd/internal/dnstest"
	"github.com/dnsd/dnsd/sources/etcd/etcdtest"
)

// TestTransferToKnot: a real secondary (Knot DNS's knotd) copies a zone
// that dnsd merges from a hosts file, a zone file and etcd, with TSIG; when both
// sources change, dnsd's serial rises, its NOTIFY makes knotd transfer the
// zone again, and knotd serves the change.
func TestTransferToKnot(t *testing.T) {
	needTool(t, "knotd")
	etcd := etcdtest.Start(t, etcdtest.Options{})
	etcd.Put("/skydns/internal/example/web", `{"host":"10.0.1.1"}`)

	dir := t.TempDir()
	dnsdPort, knotPort, hport := freePort(t), freePort(t), freePort(t)
	writeFile(t, filepath.Join(dir, "example.hosts"), "10.0.0.10 db.example.internal\n")
	writeFile(t, filepath.Join(dir, "example.zone"), knotZone("10.0.2.1"))
	writeFile(t, filepath.Join(dir, "xfr.key"), xfrSecret+"\n")
	writeFile(t, filepath.Join(dir, "dnsd.yaml"), fmt.Sprintf(`listen: ["127.0.0.1:%d"]
http: "127.0.0.1:%d"
zones:
  example.internal:
    - hosts: {files: [example.hosts]}
    - file: {path: example.zone}
    - etcd: {endpoints: [%q], ttl: 60s}
transfer:
  - zones: [example.internal]
    allow: [127.0.0.1]
    tsig: {name: xfr-key, algorithm: hmac-sha256, secret_file: xfr.key}
    notify: ["127.0.0.1:%d"]
`, dnsdPort, hport, etcd.Endpoint(), knotPort))
	d := startDnsd(t, dir, "-config", "dnsd.yaml")
	d.waitLog("dnsd started", 1)

	// The secondary, as docs/operations.md configures one.
	knot, k := startKnot(t, knotPort, dnsdPort, []string{"example.internal"}, true)
	dnsdAddr := fmt.Sprintf("127.0.0.1:%d", dnsdPort)

	serial := func(addr string) uint32 {
		r, err := query(t, "udp", addr, "example.internal.", dns.TypeSOA)
		if err != nil || len(r.Answer) != 1 {
			return 0
		}
		return r.Answer[0].(*dns.SOA).Serial
	}
	waitKnot := func(name, want string, within time.Duration) {
		t.Helper()
		if got, ok := secondaryAnswers(t, knot, name, want, within); !ok {
			t.Fatalf("knotd answers %s with %q, want %q (dnsd serial %d, knotd serial %d)", name, got, want, serial(dnsdAddr), serial(knot))
		}
	}

	// Bootstrap: knotd copies the zone (it asks at start).
	waitKnot("db.example.internal.", "NOERROR:10.0.0.10", 20*time.Second)
	waitKnot("web.example.internal.", "NOERROR:10.0.1.1", time.Second)
	waitKnot("mail.example.internal.", "NOERROR:10.0.2.1", time.Second)
	waitKnot("anything.apps.example.internal.", "NOERROR:10.0.2.80", time.Second) // a wildcard, copied as "*" and expanded by knotd
	if r, err := query(t, "udp", knot, "example.internal.", dns.TypeMX); err != nil || dnstest.RData(r) != "NOERROR:10 mail.example.internal." {
		t.Errorf("knotd MX from the zone file: %v %v", r, err)
	}
	before := serial(knot)
	if before == 0 || before != serial(dnsdAddr) {
		t.Fatalf("knotd serial %d, dnsd serial %d", before, serial(dnsdAddr))
	}

	// Let the start-up NOTIFY round end (acked once knotd listens), so the
	// change below is carried by a NOTIFY of its own.
	metric := func(want string) bool {
		_, body := httpGet(t, fmt.Sprintf("http://127.0.0.1:%d/metrics", hport))
		return strings.Contains(body, want)
	}
	dnstest.Eventually(t, "the start-up NOTIFY acked", 10*time.Second, func() bool {
		return metric(`dnsd_notify_total{result="acked",zone="example.internal."}`)
	})

	// Every source changes: NOTIFY, transfer, served within 10 s.
	writeFile(t, filepath.Join(dir, "example.hosts"), "10.0.0.10 db.example.internal\n10.0.0.11 db2.example.internal\n")
	etcd.Put("/skydns/internal/example/web", `{"host":"10.0.1.2"}`)
	writeFile(t, filepath.Join(dir, "example.zone.tmp"), knotZone("10.0.2.2"))
	if err := os.Rename(filepath.Join(dir, "example.zone.tmp"), filepath.Join(dir, "example.zone")); err != nil {
		t.Fatal(err)
	}
	waitKnot("db2.example.internal.", "NOERROR:10.0.0.11", 10*time.Second)
	waitKnot("web.example.internal.", "NOERROR:10.0.1.2", 10*time.Second)
	waitKnot("mail.example.internal.", "NOERROR:10.0.2.2", 10*time.Second)
	if after := serial(knot); !(after > before) {
		t.Errorf("knotd serial went from %d to %d, want it risen", before, after)
	}
	if out := k.stderr.String(); !strings.Contains(out, "notify") && !strings.Contains(out, "NOTIFY") {
		t.Errorf("knotd never logged a NOTIFY:\n%s", out)
	}
	// knotd holds the version dnsd sent it: its IXFR gets the difference,
	// not the whole zone again.
	if out := k.stderr.String(); !strings.Contains(out, "IXFR, incoming") || strings.Contains(out, "AXFR-style") {
		t.Errorf("knotd did not apply an incremental IXFR:\n%s", grep(out, "XFR"))
	}
	_, body := httpGet(t, fmt.Sprintf("http://127.0.0.1:%d/metrics", hport))
	for _, want := range []string{`dnsd_notify_total{result="acked",zone="example.internal."}`, `dnsd_transfers_total{result="success",zone="example.internal."}`} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s\n%s", want, grep(body, "dnsd_notify_total"))
		}
	}
	if t.Failed() || testing.Verbose() {
		t.Logf("knotd output:\n%s", k.stderr.String())
	}
}

// knotZone is the zone file of TestTransferToKnot with mail's address.
func knotZone(mail string) string {
	return "$TTL 300\n" +
		"@ IN MX 10 mail\n" +
		"mail IN A " + mail + "\n" +
		"txt IN TXT \"from a zone file\"\n" +
		"*.apps IN A 10.0.2.80\n"
}

// startKnot runs knotd on port as a secondary of zones, fetching them
// from dnsd at dnsdPort (with the TSIG key xfr-key when keyed) and taking
// its NOTIFYs, as docs/operations.md configures one. It returns knotd's
// DNS address and process.
func startKnot(t *testing.T, port, dnsdPort int, zones []string, keyed bool) (string, *proc) {
	t.Helper()
	return startKnotOf(t, port, "127.0.0.1", dnsdPort, zones, keyed)
}

// startKnotOf starts knotd as startKnot does, with dnsd at primary (an
// IP: its transfer source and the only address its NOTIFYs are taken from).
func startKnotOf(t *testing.T, port int, primary string, dnsdPort int, zones []string, keyed bool) (string, *proc) {
	t.Helper()
	needTool(t, "knotd")
	knotd, _ := exec.LookPath("knotd")
	kdir := filepath.Join(t.TempDir(), "knot")
	for _, sub := range []string{"run", "db", "zones"} {
		if err := os.MkdirAll(filepath.Join(kdir, sub), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	key, keyRef := "", ""
	if keyed {
		key = fmt.Sprintf("key:\n  - id: xfr-key\n    algorithm: hmac-sha256\n    secret: %s\n", xfrSecret)
		keyRef = "    key: xfr-key\n"
	}
	var zoneList strings.Builder
	for _, z := range zones {
		fmt.Fprintf(&zoneList, "  - domain: %s\n    master: dnsd\n    acl: notify-from-dnsd\n", z)
	}
	writeFile(t, filepath.Join(kdir, "knot.conf"), fmt.Sprintf(`server:
    rundir: "%[1]s/run"
    listen: 127.0.0.1@%[2]d
database:
    storage: "%[1]s/db"
log:
  - target: stderr
    any: info
%[3]sremote:
  - id: dnsd
    address: %[7]s@%[4]d
%[5]sacl:
  - id: notify-from-dnsd
    address: %[7]s
%[5]s    action: notify
template:
  - id: default
    storage: "%[1]s/zones"
    zonefile-sync: -1
    zonefile-load: none
    journal-content: none
zone:
%[6]s`, kdir, port, key, dnsdPort, keyRef, zoneList.String(), primary))
	k := startBinary(t, knotd, nil, kdir, "-c", filepath.Join(kdir, "knot.conf"))
	return fmt.Sprintf("127.0.0.1:%d", port), k
}

// TestNotifyFromListenAddress: dnsd listens on 127.0.0.10 only, the
// address its Knot secondary lists as the primary. Its NOTIFYs leave from
// that address (the kernel would pick 127.0.0.1 for a 127.0.0.1 target,
// which knotd's ACL denies), so a change reaches the secondary at once,
// not at its next SOA refresh (4 h).
func TestNotifyFromListenAddress(t *testing.T) {
	needTool(t, "knotd")
	dir := t.TempDir()
	dnsdPort, knotPort, hport := freePort(t), freePort(t), freePort(t)
	hosts := filepath.Join(dir, "example.hosts")
	writeFile(t, hosts, "10.0.0.10 db.example.internal\n")
	writeFile(t, filepath.Join(dir, "dnsd.yaml"), fmt.Sprintf(`listen: ["127.0.0.10:%d"]
http: "127.0.0.1:%d"
zones:
  example.internal:
    - hosts: {files: [example.hosts]}
transfer:
  - zones: [example.internal]
    allow: [127.0.0.0/8]
    notify: ["127.0.0.1:%d"]
`, dnsdPort, hport, knotPort))
	d := startDnsd(t, dir, "-config", "dnsd.yaml")
	d.waitLog("dnsd started", 1)
	knot, _ := startKnotOf(t, knotPort, "127.0.0.10", dnsdPort, []string{"example.internal"}, false)
	waitKnotAnswer := func(name, want string, within time.Duration) {
		t.Helper()
		if got, ok := secondaryAnswers(t, knot, name, want, within); !ok {
			t.Fatalf("knotd answers %s with %q, want %q", name, got, want)
		}
	}
	waitKnotAnswer("db.example.internal.", "NOERROR:10.0.0.10", 20*time.Second)
	// knotd has the zone; the next change reaches it only by NOTIFY.
	time.Sleep(time.Second)
	writeFile(t, hosts, "10.0.0.10 db.example.internal\n10.0.0.11 new.example.internal\n")
	waitKnotAnswer("new.example.internal.", "NOERROR:10.0.0.11", 15*time.Second)
	if got := d.stderr.String(); strings.Contains(got, "did not answer our NOTIFY") || strings.Contains(got, "refused our NOTIFY") {
		t.Errorf("a NOTIFY failed:\n%s", got)
	}
}

// secondaryAnswers asks the secondary at addr for name's A records until
// it answers want (as dnstest.RData writes it) or within has passed, and
// returns the last answer and whether it was want.
func secondaryAnswers(t *testing.T, addr, name, want string, within time.Duration) (string, bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	got := ""
	for time.Now().Before(deadline) {
		if r, err := query(t, "udp", addr, name, dns.TypeA); err == nil {
			if got = dnstest.RData(r); got == want {
				return got, true
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return got, false
}
