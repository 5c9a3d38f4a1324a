package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/dnsd/dnsd/internal/dnstest"
)

// secondaryZone is a zone file of partner.example. with serial and www's
// address; refresh, retry and expire as given.
func secondaryZone(serial uint32, www string, refresh, retry, expire int) string {
	return fmt.Sprintf(`$TTL 300
@ IN SOA ns1.partner.example. hostmaster.partner.example. %d %d %d %d 60
@ IN NS ns1
ns1 IN A 192.0.2.1
www IN A %s
*.apps IN A 192.0.2.80
`, serial, refresh, retry, expire, www)
}

// notifyMsg is a NOTIFY for zone, signed with key/secret when key is set.
func notifyMsg(zone string) *dns.Msg {
	m := new(dns.Msg)
	m.SetNotify(zone)
	return m
}

// sendNotify sends m over UDP to addr from 127.0.0.1, signed with
// secret under key when key is set, and returns the answer.
func sendNotify(t *testing.T, addr string, m *dns.Msg, key, secret string) *dns.Msg {
	t.Helper()
	c := &dns.Client{Net: "udp", Timeout: 2 * time.Second}
	if key != "" {
		m.SetTsig(key, dns.HmacSHA256, 300, time.Now().Unix())
		c.TsigSecret = map[string]string{key: secret}
	}
	r, _, err := c.Exchange(m, addr) // a TSIG error comes with the answer
	if r == nil {
		t.Fatalf("NOTIFY: no answer (%v)", err)
	}
	return r
}

func tsigErrorOf(m *dns.Msg) uint16 {
	if ts := m.IsTsig(); ts != nil {
		return ts.Error
	}
	return 0
}

// secondaryEDE returns the EDE codes of r.
func secondaryEDE(r *dns.Msg) []uint16 {
	var out []uint16
	if opt := r.IsEdns0(); opt != nil {
		for _, o := range opt.Option {
			if e, ok := o.(*dns.EDNS0_EDE); ok {
				out = append(out, e.InfoCode)
			}
		}
	}
	return out
}

// askEDNS asks addr for name A with EDNS0.
func askEDNS(t *testing.T, addr, name string) *dns.Msg {
	t.Helper()
	m := new(dns.Msg)
	m.SetQuestion(name, dns.TypeA)
	m.SetEdns0(1232, false)
	r, _, err := (&dns.Client{Timeout: 2 * time.Second}).Exchange(m, addr)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return r
}

// TestSecondaryFromDnsd: one dnsd (the primary: a zone file, transfer
// with TSIG and NOTIFY) and another that keeps a copy of the zone (the
// secondary). The secondary copies it at start, takes NOTIFYs only from
// its primary and signed with the key, applies changes by IXFR on the
// primary's NOTIFY, keeps the copy in state_dir and serves it after a
// restart with the primary down.
func TestSecondaryFromDnsd(t *testing.T) {
	pdir, sdir := t.TempDir(), t.TempDir()
	pport, sport, phttp, shttp := freePort(t), freePort(t), freePort(t), freePort(t)
	writeFile(t, filepath.Join(pdir, "xfr.key"), xfrSecret+"\n")
	writeFile(t, filepath.Join(sdir, "xfr.key"), xfrSecret+"\n")
	zoneFile := filepath.Join(pdir, "partner.zone")
	writeFile(t, zoneFile, secondaryZone(100, "192.0.2.10", 3600, 600, 86400))
	writeFile(t, filepath.Join(pdir, "dnsd.yaml"), fmt.Sprintf(`listen: ["127.0.0.1:%d"]
http: "127.0.0.1:%d"
zones:
  partner.example:
    - file: {path: partner.zone}
  merged.example:
    - file: {path: merged.zone}
transfer:
  - zones: [partner.example, merged.example]
    allow: [127.0.0.0/8]
    tsig: {name: xfr-key, algorithm: hmac-sha256, secret_file: xfr.key}
    notify: ["127.0.0.1:%d"]
`, pport, phttp, sport))
	writeFile(t, filepath.Join(pdir, "merged.zone"), strings.ReplaceAll(secondaryZone(7, "192.0.2.70", 3600, 600, 86400), "partner.example.", "merged.example."))
	primary := startDnsd(t, pdir, "-config", "dnsd.yaml")
	primary.waitLog("dnsd started", 1)

	secondaryConf := fmt.Sprintf(`listen: ["127.0.0.1:%d"]
http: "127.0.0.1:%d"
state_dir: state
zones:
  partner.example:
    - secondary:
        primaries: ["127.0.0.1:%d"]
        tsig: {name: xfr-key, algorithm: hmac-sha256, secret_file: xfr.key}
  lab.example:
    - secondary: {primaries: ["127.0.0.2:%d"]}
  other.example:
    - hosts: {entries: ["192.0.2.99 x"]}
  merged.example:
    - secondary:
        primaries: ["127.0.0.1:%d"]
        tsig: {name: xfr-key, algorithm: hmac-sha256, secret_file: xfr.key}
        fallthrough: true
    - hosts: {entries: ["192.0.2.71 extra"]}
transfer:
  - zones: [partner.example]
    allow: [127.0.0.1]
`, sport, shttp, pport, freePort(t), pport)
	writeFile(t, filepath.Join(sdir, "dnsd.yaml"), secondaryConf)
	sec := startDnsd(t, sdir, "-config", "dnsd.yaml")
	sec.waitLog("dnsd started", 1)
	saddr := fmt.Sprintf("127.0.0.1:%d", sport)
	waitAnswer(t, saddr, "www.partner.example.", dns.TypeA, "NOERROR:192.0.2.10")
	waitAnswer(t, saddr, "x.apps.partner.example.", dns.TypeA, "NOERROR:192.0.2.80")
	r, err := query(t, "udp", saddr, "partner.example.", dns.TypeSOA)
	if err != nil || len(r.Answer) != 1 || r.Answer[0].(*dns.SOA).Serial != 100 || !r.Authoritative {
		t.Fatalf("SOA: %v %v; want the primary's serial 100, authoritative", r, err)
	}
	if r, _ := query(t, "udp", saddr, "nope.partner.example.", dns.TypeA); r == nil || r.Rcode != dns.RcodeNameError {
		t.Errorf("a name the copy lacks: %v, want NXDOMAIN", r)
	}
	// Merged with a hosts source: the copy's names and the hosts names,
	// dnsd's serial with the primary's other SOA fields.
	waitAnswer(t, saddr, "www.merged.example.", dns.TypeA, "NOERROR:192.0.2.70")
	waitAnswer(t, saddr, "extra.merged.example.", dns.TypeA, "NOERROR:192.0.2.71")
	if r, err := query(t, "udp", saddr, "merged.example.", dns.TypeSOA); err != nil || len(r.Answer) != 1 {
		t.Errorf("merged SOA: %v %v", r, err)
	} else if soa := r.Answer[0].(*dns.SOA); soa.Serial == 7 || soa.Ns != "ns1.merged.example." || soa.Mbox != "hostmaster.merged.example." || soa.Expire != 86400 {
		t.Errorf("merged SOA %v: want dnsd's serial, the primary's other fields", soa)
	}
	// dnsd re-serves the copy to its own secondaries.
	tr := &dns.Transfer{}
	axfr := new(dns.Msg)
	axfr.SetAxfr("partner.example.")
	env, err := tr.In(axfr, saddr)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for e := range env {
		if e.Error != nil {
			t.Fatalf("AXFR from the secondary: %v", e.Error)
		}
		for _, rr := range e.RR {
			names = append(names, rr.Header().Name+" "+dns.TypeToString[rr.Header().Rrtype])
		}
	}
	if got := strings.Join(names, ","); !strings.Contains(got, "www.partner.example. A") || !strings.Contains(got, "*.apps.partner.example. A") || !strings.HasPrefix(got, "partner.example. SOA") {
		t.Errorf("AXFR of the copy: %s", got)
	}
	// A zone never loaded (its primary does not answer): SERVFAIL, EDE 14.
	if r := askEDNS(t, saddr, "www.lab.example."); r.Rcode != dns.RcodeServerFailure || fmt.Sprint(secondaryEDE(r)) != "[14]" {
		t.Errorf("never loaded: %s EDE %v, want SERVFAIL EDE 14", dns.RcodeToString[r.Rcode], secondaryEDE(r))
	}

	// NOTIFY rules.
	zone := "partner.example."
	if r := sendNotify(t, saddr, notifyMsg("other.example."), "", ""); r.Rcode != dns.RcodeNotAuth {
		t.Errorf("NOTIFY for a zone dnsd is no secondary of: %s, want NOTAUTH", dns.RcodeToString[r.Rcode])
	}
	if r := sendNotify(t, saddr, notifyMsg("lab.example."), "", ""); r.Rcode != dns.RcodeRefused {
		t.Errorf("NOTIFY not from a listed primary: %s, want REFUSED", dns.RcodeToString[r.Rcode])
	}
	if r := sendNotify(t, saddr, notifyMsg(zone), "", ""); r.Rcode != dns.RcodeRefused {
		t.Errorf("unsigned NOTIFY where tsig is set: %s, want REFUSED", dns.RcodeToString[r.Rcode])
	}
	if r := sendNotify(t, saddr, notifyMsg(zone), "xfr-key.", "b3RoZXJzZWNyZXRvdGhlcnNlY3JldA=="); r.Rcode != dns.RcodeNotAuth || tsigErrorOf(r) != dns.RcodeBadSig || r.IsTsig().MAC != "" {
		t.Errorf("wrongly signed NOTIFY: %s tsig error %d, want NOTAUTH BADSIG, unsigned", dns.RcodeToString[r.Rcode], tsigErrorOf(r))
	}
	if r := sendNotify(t, saddr, notifyMsg(zone), "other-key.", xfrSecret); r.Rcode != dns.RcodeNotAuth || tsigErrorOf(r) != dns.RcodeBadKey {
		t.Errorf("NOTIFY signed with an unknown key: %s tsig error %d, want NOTAUTH BADKEY", dns.RcodeToString[r.Rcode], tsigErrorOf(r))
	}
	m := notifyMsg(zone)
	id := m.Id
	if r := sendNotify(t, saddr, m, "xfr-key.", xfrSecret); r.Rcode != dns.RcodeSuccess || r.Id != id || !r.Response || r.Opcode != dns.OpcodeNotify || r.IsTsig() == nil {
		t.Errorf("accepted NOTIFY: %s id %d (want %d) QR %v opcode %d signed %v", dns.RcodeToString[r.Rcode], r.Id, id, r.Response, r.Opcode, r.IsTsig() != nil)
	}

	// A change on the primary: its NOTIFY, the secondary's IXFR.
	writeFile(t, zoneFile, secondaryZone(101, "192.0.2.20", 3600, 600, 86400))
	waitAnswer(t, saddr, "www.partner.example.", dns.TypeA, "NOERROR:192.0.2.20")
	base := fmt.Sprintf("http://127.0.0.1:%d", shttp)
	dnstest.Eventually(t, "the IXFR counted", 5*time.Second, func() bool {
		return metricValue(scrape(t, base), "dnsd_secondary_transfers_total", `result="ok",type="ixfr",zone="partner.example."`) >= 1
	})
	metrics := scrape(t, base)
	if v := metricValue(metrics, "dnsd_secondary_transfers_total", `result="ok",type="axfr",zone="partner.example."`); v != 1 {
		t.Errorf("AXFRs ok = %v, want 1", v)
	}
	if v := metricValue(metrics, "dnsd_secondary_serial", `zone="partner.example."`); v != 101 {
		t.Errorf("dnsd_secondary_serial = %v, want 101", v)
	}
	if code, body := httpGet(t, base+"/ready"); code != 503 || !strings.Contains(body, "secondary lab.example.") {
		t.Errorf("/ready: %d %q; want 503 naming the zone never loaded", code, body)
	}
	for _, f := range []string{"partner.example.zone", "partner.example.meta"} {
		fi, err := os.Stat(filepath.Join(sdir, "state", "secondary", f))
		if err != nil || fi.Mode().Perm() != 0o640 {
			t.Errorf("state file %s: %v %v", f, fi, err)
		}
	}

	// A restart with the primary down serves the copy at once.
	primary.stop(syscall.SIGTERM)
	sec.stop(syscall.SIGTERM)
	start := time.Now()
	startDnsd(t, sdir, "-config", "dnsd.yaml")
	var got string
	for time.Since(start) < 2*time.Second {
		if r, err := query(t, "udp", saddr, "www.partner.example.", dns.TypeA); err == nil {
			if got = dnstest.RData(r); got == "NOERROR:192.0.2.20" {
				break
			}
			if r.Rcode == dns.RcodeNameError {
				t.Fatal("NXDOMAIN after a restart")
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got != "NOERROR:192.0.2.20" {
		t.Fatalf("after a restart with the primary down: %q within 2 s, want the saved copy", got)
	}
	t.Logf("restart with the primary down: the copy served %v after the start", time.Since(start).Round(time.Millisecond))
}

// startBindPrimary starts BIND's named as the primary of zones (name →
// zone file content) on port: NOTIFY to dnsd at once (notify-delay 0)
// for the zones in notify, signed with xfr-key like every request to
// 127.0.0.1; IXFR from the differences of a reloaded zone file;
// transfers to xfr-key for keyed zones, to anyone for the others. It
// returns the process and the zone files' directory.
func startBindPrimary(t *testing.T, port, dnsdPort int, zones map[string]string, notify, keyed []string) (*proc, string) {
	t.Helper()
	needTool(t, "named")
	named, _ := exec.LookPath("named")
	dir := filepath.Join(t.TempDir(), "bind")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var zs strings.Builder
	for name, content := range zones {
		writeFile(t, filepath.Join(dir, name+".zone"), content)
		n := "notify no;"
		if slices.Contains(notify, name) {
			n = fmt.Sprintf("notify explicit; also-notify { 127.0.0.1 port %d; };", dnsdPort)
		}
		allow := "any;"
		if slices.Contains(keyed, name) {
			allow = "key xfr-key;"
		}
		fmt.Fprintf(&zs, "zone %q { type primary; file \"%s/%s.zone\"; %s allow-transfer { %s }; ixfr-from-differences yes; };\n", name, dir, name, n, allow)
	}
	writeFile(t, filepath.Join(dir, "named.conf"), fmt.Sprintf(`options {
    directory "%[1]s";
    pid-file "%[1]s/named.pid";
    session-keyfile "%[1]s/session.key";
    managed-keys-directory "%[1]s";
    listen-on port %[2]d { 127.0.0.1; };
    listen-on-v6 { none; };
    recursion no;
    dnssec-validation no;
    notify-delay 0;
};
key "xfr-key" {
    algorithm hmac-sha256;
    secret "%[3]s";
};
server 127.0.0.1 { keys { xfr-key; }; };
%[4]s`, dir, port, xfrSecret, zs.String()))
	p := startBinary(t, named, nil, dir, "-g", "-4", "-n", "1", "-c", filepath.Join(dir, "named.conf"))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("named output:\n%s", p.stderr.String())
		}
	})
	return p, dir
}

// servedWithin polls dnsd at addr for name until its A answer is want,
// and returns how long that took (or fails after limit).
func servedWithin(t *testing.T, addr, name, want string, limit time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	got := ""
	for time.Since(start) < limit {
		if r, err := query(t, "udp", addr, name, dns.TypeA); err == nil {
			if got = dnstest.RData(r); got == want {
				return time.Since(start)
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("%s: %q after %v, want %q", name, got, limit, want)
	return 0
}

// TestSecondaryOfBind: dnsd keeps copies of zones whose primary is a real
// BIND 9: the first AXFR; IXFR on BIND's signed NOTIFY (a change on the
// primary is served within 1 s); a zone without NOTIFY refreshed every
// SOA refresh, from the second primary when the first is down; past
// its SOA expire with BIND stopped, SERVFAIL with EDE 22 and /ready says
// so; a restart with BIND down serves the saved copies.
func TestSecondaryOfBind(t *testing.T) {
	needTool(t, "named")
	dir := t.TempDir()
	bport, dport, hport, dead := freePort(t), freePort(t), freePort(t), freePort(t)
	writeFile(t, filepath.Join(dir, "xfr.key"), xfrSecret+"\n")
	quiet := func(serial uint32, www string) string {
		return strings.ReplaceAll(secondaryZone(serial, www, 1, 1, 86400), "partner.example.", "quiet.example.")
	}
	brief := strings.ReplaceAll(secondaryZone(1, "192.0.2.30", 1, 1, 4), "partner.example.", "brief.example.")
	named, zdir := startBindPrimary(t, bport, dport, map[string]string{
		"partner.example": secondaryZone(2026120401, "192.0.2.10", 3600, 600, 86400),
		"quiet.example":   quiet(1, "192.0.2.40"),
		"brief.example":   brief,
	}, []string{"partner.example"}, []string{"partner.example"})
	waitBindUp(t, fmt.Sprintf("127.0.0.1:%d", bport), "www.partner.example.")

	writeFile(t, filepath.Join(dir, "dnsd.yaml"), fmt.Sprintf(`listen: ["127.0.0.1:%d"]
http: "127.0.0.1:%d"
state_dir: state
zones:
  partner.example:
    - secondary:
        primaries: ["127.0.0.1:%d"]
        tsig: {name: xfr-key, algorithm: hmac-sha256, secret_file: xfr.key}
  quiet.example:
    - secondary: {primaries: ["127.0.0.1:%d", "127.0.0.1:%d"]}
  brief.example:
    - secondary: {primaries: ["127.0.0.1:%d"]}
`, dport, hport, bport, dead, bport, bport))
	d := startDnsd(t, dir, "-config", "dnsd.yaml")
	d.waitLog("dnsd started", 1)
	addr := fmt.Sprintf("127.0.0.1:%d", dport)
	base := fmt.Sprintf("http://127.0.0.1:%d", hport)
	servedWithin(t, addr, "www.partner.example.", "NOERROR:192.0.2.10", 10*time.Second)
	servedWithin(t, addr, "www.quiet.example.", "NOERROR:192.0.2.40", 10*time.Second) // from the second primary
	servedWithin(t, addr, "www.brief.example.", "NOERROR:192.0.2.30", 10*time.Second)
	d.waitLog(`msg="zone transferred" source=secondary zone=partner.example. type=axfr`, 1)

	// A change on BIND: its NOTIFY, dnsd's IXFR. Timed from the reload.
	writeFile(t, filepath.Join(zdir, "partner.example.zone"), secondaryZone(2026120402, "192.0.2.20", 3600, 600, 86400))
	named.signal(syscall.SIGHUP)
	took := servedWithin(t, addr, "www.partner.example.", "NOERROR:192.0.2.20", 5*time.Second)
	t.Logf("BIND: change (SIGHUP reload) to served by dnsd after its NOTIFY: %v", took.Round(time.Millisecond))
	if took > time.Second {
		t.Errorf("a change on BIND was served %v after its reload, want within 1 s", took)
	}
	d.waitLog(`msg="zone transferred" source=secondary zone=partner.example. type=ixfr`, 1)

	// Without NOTIFY: dnsd's refresh (SOA refresh 1 s) finds the change.
	writeFile(t, filepath.Join(zdir, "quiet.example.zone"), quiet(2, "192.0.2.41"))
	named.signal(syscall.SIGHUP)
	servedWithin(t, addr, "www.quiet.example.", "NOERROR:192.0.2.41", 10*time.Second)
	metrics := scrape(t, base)
	if v := metricValue(metrics, "dnsd_secondary_transfers_total", `result="ok",type="ixfr",zone="partner.example."`); v < 1 {
		t.Errorf("partner.example IXFRs ok = %v, want at least 1", v)
	}
	if v := metricValue(metrics, "dnsd_secondary_serial", `zone="partner.example."`); v != 2026120402 {
		t.Errorf("dnsd_secondary_serial = %v", v)
	}

	// BIND stops: brief.example expires 4 s after its last refresh.
	named.stop(syscall.SIGTERM)
	dnstest.Eventually(t, "the expire of brief.example", 10*time.Second, func() bool {
		r := askEDNS(t, addr, "www.brief.example.")
		return r.Rcode == dns.RcodeServerFailure && fmt.Sprint(secondaryEDE(r)) == "[22]"
	})
	if code, body := httpGet(t, base+"/ready"); code != 503 || !strings.Contains(body, "brief.example.") || !strings.Contains(body, "zone expired") {
		t.Errorf("/ready after the expire: %d %q", code, body)
	}
	// The others still serve their copies.
	servedWithin(t, addr, "www.partner.example.", "NOERROR:192.0.2.20", time.Second)

	// A restart with BIND down serves the saved copies at once.
	d.stop(syscall.SIGTERM)
	startDnsd(t, dir, "-config", "dnsd.yaml")
	took = servedWithin(t, addr, "www.partner.example.", "NOERROR:192.0.2.20", 2*time.Second)
	t.Logf("restart with BIND down: the copy served %v after the start", took.Round(time.Millisecond))
	if r := askEDNS(t, addr, "www.brief.example."); r.Rcode != dns.RcodeServerFailure || fmt.Sprint(secondaryEDE(r)) != "[22]" {
		t.Errorf("an expired copy after a restart: %s EDE %v, want SERVFAIL EDE 22", dns.RcodeToString[r.Rcode], secondaryEDE(r))
	}
}

// waitBindUp waits until the primary at addr answers name.
func waitBindUp(t *testing.T, addr, name string) {
	t.Helper()
	dnstest.Eventually(t, "the primary to answer", 20*time.Second, func() bool {
		r, err := query(t, "udp", addr, name, dns.TypeA)
		return err == nil && r.Rcode == dns.RcodeSuccess && len(r.Answer) > 0
	})
}

// startKnotPrimary starts knotd as the primary of partner.example. (zone
// file content) on port: NOTIFY to dnsd and transfers to xfr-key, IXFR
// from the differences of a reloaded zone file. It returns the process,
// the zone file and the knotc command that reloads the zone.
func startKnotPrimary(t *testing.T, port, dnsdPort int, content string) (*proc, string, func()) {
	t.Helper()
	needTool(t, "knotd", "knotc")
	knotd, _ := exec.LookPath("knotd")
	kdir := filepath.Join(t.TempDir(), "knot")
	for _, sub := range []string{"run", "db", "zones"} {
		if err := os.MkdirAll(filepath.Join(kdir, sub), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	zf := filepath.Join(kdir, "zones", "partner.example.zone")
	writeFile(t, zf, content)
	conf := filepath.Join(kdir, "knot.conf")
	writeFile(t, conf, fmt.Sprintf(`server:
    rundir: "%[1]s/run"
    listen: 127.0.0.1@%[2]d
database:
    storage: "%[1]s/db"
log:
  - target: stderr
    any: info
key:
  - id: xfr-key
    algorithm: hmac-sha256
    secret: %[3]s
remote:
  - id: dnsd
    address: 127.0.0.1@%[4]d
    key: xfr-key
acl:
  - id: xfr
    address: 127.0.0.1
    key: xfr-key
    action: transfer
template:
  - id: default
    storage: "%[1]s/zones"
    zonefile-sync: -1
    zonefile-load: difference
    journal-content: changes
zone:
  - domain: partner.example
    file: partner.example.zone
    notify: dnsd
    acl: xfr
`, kdir, port, xfrSecret, dnsdPort))
	k := startBinary(t, knotd, nil, kdir, "-c", conf)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("knotd output:\n%s", k.stderr.String())
		}
	})
	reload := func() {
		t.Helper()
		if out, err := exec.Command("knotc", "-c", conf, "zone-reload", "partner.example").CombinedOutput(); err != nil {
			t.Fatalf("knotc zone-reload: %v\n%s", err, out)
		}
	}
	return k, zf, reload
}

// TestSecondaryOfKnot: dnsd keeps a copy of a zone whose primary is a
// real Knot DNS, signed with TSIG: the first AXFR, then IXFR on Knot's
// NOTIFY (a change is served within 1 s of the reload); with Knot
// stopped, a restart serves the saved copy.
func TestSecondaryOfKnot(t *testing.T) {
	needTool(t, "knotd", "knotc")
	dir := t.TempDir()
	kport, dport, hport := freePort(t), freePort(t), freePort(t)
	writeFile(t, filepath.Join(dir, "xfr.key"), xfrSecret+"\n")
	knot, zf, reload := startKnotPrimary(t, kport, dport, secondaryZone(2026120401, "192.0.2.10", 3600, 600, 86400))
	waitBindUp(t, fmt.Sprintf("127.0.0.1:%d", kport), "www.partner.example.")
	writeFile(t, filepath.Join(dir, "dnsd.yaml"), fmt.Sprintf(`listen: ["127.0.0.1:%d"]
http: "127.0.0.1:%d"
state_dir: state
zones:
  partner.example:
    - secondary:
        primaries: ["127.0.0.1:%d"]
        tsig: {name: xfr-key, algorithm: hmac-sha256, secret_file: xfr.key}
`, dport, hport, kport))
	d := startDnsd(t, dir, "-config", "dnsd.yaml")
	d.waitLog("dnsd started", 1)
	addr := fmt.Sprintf("127.0.0.1:%d", dport)
	servedWithin(t, addr, "www.partner.example.", "NOERROR:192.0.2.10", 10*time.Second)
	servedWithin(t, addr, "x.apps.partner.example.", "NOERROR:192.0.2.80", time.Second)

	writeFile(t, zf, secondaryZone(2026120402, "192.0.2.20", 3600, 600, 86400))
	start := time.Now()
	reload()
	servedWithin(t, addr, "www.partner.example.", "NOERROR:192.0.2.20", 5*time.Second)
	took := time.Since(start)
	t.Logf("Knot: change (knotc zone-reload) to served by dnsd after its NOTIFY: %v", took.Round(time.Millisecond))
	if took > time.Second {
		t.Errorf("a change on Knot was served %v after its reload, want within 1 s", took)
	}
	d.waitLog(`msg="zone transferred" source=secondary zone=partner.example. type=ixfr`, 1)
	if out := knot.stderr.String(); !strings.Contains(out, "IXFR") {
		t.Errorf("knotd logged no IXFR out:\n%s", grep(out, "XFR"))
	}
	base := fmt.Sprintf("http://127.0.0.1:%d", hport)
	if v := metricValue(scrape(t, base), "dnsd_secondary_serial", `zone="partner.example."`); v != 2026120402 {
		t.Errorf("dnsd_secondary_serial = %v", v)
	}

	knot.stop(syscall.SIGTERM)
	d.stop(syscall.SIGTERM)
	startDnsd(t, dir, "-config", "dnsd.yaml")
	servedWithin(t, addr, "www.partner.example.", "NOERROR:192.0.2.20", 2*time.Second)
}
