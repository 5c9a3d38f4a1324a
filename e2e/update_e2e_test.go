package e2e

import (
	"crypto/tls"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/dnsd/dnsd/internal/dnstest"
)

// The dynamic update tests drive the built binary with the clients
// operators script: BIND's nsupdate and Knot's knsupdate.

const (
	dhcpSecret = "ZGhjcC1rZXktc2VjcmV0LWZvci1kbnNkLXRlc3RzLTEyMzQ="
	acmeSecret = "YWNtZS1rZXktc2VjcmV0LWZvci1kbnNkLXRlc3RzLTU2Nzg="
)

// updateZone is a zone a dynamic store and a zone file serve, open to
// updates with two keys: the DHCP key for A, AAAA, PTR, DHCID, TXT below
// dhcp.corp.internal and in the reverse zone, the ACME key for TXT at
// _acme-challenge names.
func updateZone(t *testing.T) (dir string, port, hport int) {
	t.Helper()
	dir = t.TempDir()
	port, hport = freePort(t), freePort(t)
	writeFile(t, filepath.Join(dir, "dhcp.key"), dhcpSecret+"\n")
	writeFile(t, filepath.Join(dir, "acme.key"), acmeSecret+"\n")
	writeFile(t, filepath.Join(dir, "corp.zone"), `$ORIGIN corp.internal.
$TTL 300
@    IN SOA ns1 hostmaster 2026120401 3600 600 86400 300
     IN NS  ns1
ns1  IN A   10.0.0.53
www  IN A   10.0.0.80
`)
	writeFile(t, filepath.Join(dir, "dnsd.yaml"), fmt.Sprintf(`listen: ["127.0.0.1:%d"]
http: "127.0.0.1:%d"
state_dir: state
zones:
  corp.internal 10.in-addr.arpa:
    - dynamic: {}
    - file: {path: corp.zone}
update:
  - zones: [corp.internal, 10.in-addr.arpa]
    tsig: {name: dhcp-key, algorithm: hmac-sha256, secret_file: dhcp.key}
    allow: [127.0.0.0/8]
    names: ["*.dhcp.corp.internal", "*.10.in-addr.arpa"]
    types: [A, AAAA, PTR, DHCID, TXT]
  - zones: [corp.internal]
    tsig: {name: acme-key, algorithm: hmac-sha256, secret_file: acme.key}
    names: ["_acme-challenge.*"]
    types: [TXT]
`, port, hport))
	return dir, port, hport
}

// runClient feeds script to an update client (nsupdate, knsupdate) and
// returns its combined output and whether it exited 0.
func runClient(t *testing.T, script string, name string, args ...string) (string, bool) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Stdin = strings.NewReader(script)
	out, err := cmd.CombinedOutput()
	if err != nil {
		if _, ok := err.(*exec.ExitError); !ok {
			t.Fatalf("%s: %v", name, err)
		}
	}
	return string(out), err == nil
}

func TestUpdateNsupdate(t *testing.T) {
	needTool(t, "nsupdate")
	dir, port, hport := updateZone(t)
	d := startDnsd(t, dir, "-config", "dnsd.yaml")
	d.waitLog("dnsd started", 1)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	dhcp := []string{"-y", "hmac-sha256:dhcp-key:" + dhcpSecret}
	acme := []string{"-y", "hmac-sha256:acme-key:" + acmeSecret}
	server := fmt.Sprintf("server 127.0.0.1 %d\n", port)
	soa := func() uint32 {
		r, err := query(t, "udp", addr, "corp.internal.", dns.TypeSOA)
		if err != nil || len(r.Answer) != 1 {
			t.Fatalf("SOA: %v %v", r, err)
		}
		return r.Answer[0].(*dns.SOA).Serial
	}
	before := soa()

	// A lease: forward and reverse records, guarded by "name not in use".
	out, ok := runClient(t, server+`zone corp.internal
prereq nxdomain host1.dhcp.corp.internal
update add host1.dhcp.corp.internal 300 A 10.1.2.3
update add host1.dhcp.corp.internal 300 DHCID AAIBY2/AuCccgoJbsaxcQc9TUapptP69lOjxfNuVAA2kjEA=
send
zone 10.in-addr.arpa
update add 3.2.1.10.in-addr.arpa 300 PTR host1.dhcp.corp.internal
send
`, "nsupdate", dhcp...)
	if !ok {
		t.Fatalf("nsupdate lease: %s", out)
	}
	if r, _ := query(t, "udp", addr, "host1.dhcp.corp.internal.", dns.TypeA); dnstest.RData(r) != "NOERROR:10.1.2.3" {
		t.Fatalf("after NOERROR, host1 A = %s (must be served at once)", dnstest.RData(r))
	}
	if r, _ := query(t, "udp", addr, "3.2.1.10.in-addr.arpa.", dns.TypePTR); dnstest.RData(r) != "NOERROR:host1.dhcp.corp.internal." {
		t.Errorf("PTR = %s", dnstest.RData(r))
	}
	if r, _ := query(t, "udp", addr, "www.corp.internal.", dns.TypeA); dnstest.RData(r) != "NOERROR:10.0.0.80" {
		t.Errorf("the zone file's www = %s", dnstest.RData(r))
	}
	if after := soa(); after == before {
		t.Errorf("serial stayed %d after an update", after)
	}

	// The same lease again: the prerequisite fails, nothing changes.
	out, ok = runClient(t, server+`zone corp.internal
prereq nxdomain host1.dhcp.corp.internal
update add host1.dhcp.corp.internal 300 A 10.9.9.9
send
`, "nsupdate", dhcp...)
	if ok || !strings.Contains(out, "YXDOMAIN") {
		t.Errorf("a failed prerequisite: ok=%v %q, want YXDOMAIN", ok, out)
	}
	// Renewal: only when the DHCID is ours; replace the address.
	out, ok = runClient(t, server+`zone corp.internal
prereq yxrrset host1.dhcp.corp.internal DHCID AAIBY2/AuCccgoJbsaxcQc9TUapptP69lOjxfNuVAA2kjEA=
update delete host1.dhcp.corp.internal A
update add host1.dhcp.corp.internal 300 A 10.1.2.4
send
`, "nsupdate", dhcp...)
	if !ok {
		t.Fatalf("renewal: %s", out)
	}
	if r, _ := query(t, "udp", addr, "host1.dhcp.corp.internal.", dns.TypeA); dnstest.RData(r) != "NOERROR:10.1.2.4" {
		t.Errorf("after renewal host1 A = %s", dnstest.RData(r))
	}

	// Policy: the DHCP key may not write TXT at the apex's names, nor a
	// name outside its patterns; the zone file's names are read-only.
	for _, c := range []struct{ script, want string }{
		{"update add www2.corp.internal 60 A 10.0.0.81\n", "REFUSED"},
		{"update add x.dhcp.corp.internal 60 MX 10 mail.corp.internal\n", "REFUSED"},
		{"update delete www.corp.internal A\n", "REFUSED"},
	} {
		out, ok := runClient(t, server+"zone corp.internal\n"+c.script+"send\n", "nsupdate", dhcp...)
		if ok || !strings.Contains(out, c.want) {
			t.Errorf("%q: ok=%v %q, want %s", c.script, ok, out, c.want)
		}
	}
	if r, _ := query(t, "udp", addr, "www.corp.internal.", dns.TypeA); dnstest.RData(r) != "NOERROR:10.0.0.80" {
		t.Errorf("the zone file's www after refused updates = %s", dnstest.RData(r))
	}
	// A wrong key.
	out, ok = runClient(t, server+"zone corp.internal\nupdate add h.dhcp.corp.internal 60 A 10.1.1.1\nsend\n", "nsupdate", "-y", "hmac-sha256:dhcp-key:"+acmeSecret)
	if ok {
		t.Errorf("an update signed with the wrong secret was accepted: %s", out)
	}

	// ACME: a challenge TXT record in, then out.
	out, ok = runClient(t, server+"zone corp.internal\nupdate add _acme-challenge.www.corp.internal 60 TXT \"tok-123\"\nsend\n", "nsupdate", acme...)
	if !ok {
		t.Fatalf("ACME add: %s", out)
	}
	if r, _ := query(t, "udp", addr, "_acme-challenge.www.corp.internal.", dns.TypeTXT); dnstest.RData(r) != `NOERROR:"tok-123"` {
		t.Errorf("challenge TXT = %s", dnstest.RData(r))
	}
	out, ok = runClient(t, server+"zone corp.internal\nupdate delete _acme-challenge.www.corp.internal TXT\nsend\n", "nsupdate", acme...)
	if !ok {
		t.Fatalf("ACME delete: %s", out)
	}
	if r, _ := query(t, "udp", addr, "_acme-challenge.www.corp.internal.", dns.TypeTXT); r == nil || r.Rcode != dns.RcodeNameError {
		t.Errorf("after the delete, the challenge name: %s, want NXDOMAIN", dnstest.RData(r))
	}

	// Over TCP as well (nsupdate -v).
	out, ok = runClient(t, server+"zone corp.internal\nupdate add tcp.dhcp.corp.internal 60 A 10.1.2.9\nsend\n", "nsupdate", append([]string{"-v"}, dhcp...)...)
	if !ok {
		t.Fatalf("nsupdate -v: %s", out)
	}

	_, m := httpGet(t, fmt.Sprintf("http://127.0.0.1:%d/metrics", hport))
	for _, want := range []string{
		`dnsd_updates_total{result="ok",zone="corp.internal."}`,
		`dnsd_updates_total{result="prereq",zone="corp.internal."} 1`,
		`dnsd_updates_total{result="refused",zone="corp.internal."} 3`,
		`dnsd_update_duration_seconds_count`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %s:\n%s", want, grep(m, "dnsd_update"))
		}
	}

	// The records survive a reload and a restart.
	d.signal(syscall.SIGHUP)
	d.waitLog("msg=reloaded", 1)
	if r, _ := query(t, "udp", addr, "host1.dhcp.corp.internal.", dns.TypeA); dnstest.RData(r) != "NOERROR:10.1.2.4" {
		t.Errorf("after SIGHUP host1 A = %s", dnstest.RData(r))
	}
	d.stop(syscall.SIGTERM)
	d = startDnsd(t, dir, "-config", "dnsd.yaml")
	d.waitLog("dnsd started", 1)
	if r, _ := query(t, "udp", addr, "host1.dhcp.corp.internal.", dns.TypeA); dnstest.RData(r) != "NOERROR:10.1.2.4" {
		t.Errorf("after a restart host1 A = %s", dnstest.RData(r))
	}
	if r, _ := query(t, "tcp", addr, "tcp.dhcp.corp.internal.", dns.TypeA); dnstest.RData(r) != "NOERROR:10.1.2.9" {
		t.Errorf("after a restart tcp A = %s", dnstest.RData(r))
	}
}

func TestUpdateKnsupdate(t *testing.T) {
	needTool(t, "knsupdate")
	dir, port, _ := updateZone(t)
	d := startDnsd(t, dir, "-config", "dnsd.yaml")
	d.waitLog("dnsd started", 1)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	dhcp := []string{"-y", "hmac-sha256:dhcp-key:" + dhcpSecret}
	server := fmt.Sprintf("server 127.0.0.1 %d\n", port)

	// Asked before it exists: the NXDOMAIN must not outlive the update.
	for range 3 {
		if r, _ := query(t, "udp", addr, "k1.dhcp.corp.internal.", dns.TypeAAAA); r == nil || r.Rcode != dns.RcodeNameError {
			t.Fatalf("k1 before the update: %s", dnstest.RData(r))
		}
	}
	out, ok := runClient(t, server+`zone corp.internal.
prereq nxdomain k1.dhcp.corp.internal.
update add k1.dhcp.corp.internal. 300 A 10.2.0.1
update add k1.dhcp.corp.internal. 300 AAAA fd00::1
send
`, "knsupdate", dhcp...)
	if !ok || strings.Contains(out, "error") {
		t.Fatalf("knsupdate add: %s", out)
	}
	if r, _ := query(t, "udp", addr, "k1.dhcp.corp.internal.", dns.TypeAAAA); dnstest.RData(r) != "NOERROR:fd00::1" {
		t.Errorf("k1 AAAA = %s", dnstest.RData(r))
	}
	// A prerequisite that fails: the RRset must not exist, it does.
	out, _ = runClient(t, server+`zone corp.internal.
prereq nxrrset k1.dhcp.corp.internal. A
update add k1.dhcp.corp.internal. 300 A 10.2.0.2
send
`, "knsupdate", dhcp...)
	if !strings.Contains(out, "YXRRSET") {
		t.Errorf("knsupdate with a failing prerequisite: %q, want YXRRSET", out)
	}
	// Delete the name: it is gone.
	out, ok = runClient(t, server+"zone corp.internal.\nupdate delete k1.dhcp.corp.internal.\nsend\n", "knsupdate", dhcp...)
	if !ok || strings.Contains(out, "error") {
		t.Fatalf("knsupdate delete: %s", out)
	}
	if r, _ := query(t, "udp", addr, "k1.dhcp.corp.internal.", dns.TypeA); r == nil || r.Rcode != dns.RcodeNameError {
		t.Errorf("after deleting k1: %s, want NXDOMAIN", dnstest.RData(r))
	}
}

// TestUpdateRefusedSaysWhy: a client that sends an OPT gets the rule that
// refused it as Extended DNS Error 18; every answer to a signed update is
// signed, the refusal included.
func TestUpdateRefusedSaysWhy(t *testing.T) {
	dir, port, _ := updateZone(t)
	d := startDnsd(t, dir, "-config", "dnsd.yaml")
	d.waitLog("dnsd started", 1)
	addr := fmt.Sprintf("127.0.0.1:%d", port)

	m := new(dns.Msg)
	m.SetUpdate("corp.internal.")
	rr, _ := dns.NewRR("h.dhcp.corp.internal. 60 IN MX 10 mail.corp.internal.")
	m.Insert([]dns.RR{rr})
	m.SetEdns0(1232, false)
	m.SetTsig("dhcp-key.", dns.HmacSHA256, 300, time.Now().Unix())
	c := &dns.Client{Net: "udp", Timeout: 2 * time.Second, TsigSecret: map[string]string{"dhcp-key.": dhcpSecret}}
	r, _, err := c.Exchange(m, addr)
	if err != nil {
		t.Fatalf("signed update: %v (the answer must verify with the key)", err)
	}
	if r.Rcode != dns.RcodeRefused || r.Opcode != dns.OpcodeUpdate {
		t.Fatalf("answer %s opcode %d, want REFUSED with opcode UPDATE", dns.RcodeToString[r.Rcode], r.Opcode)
	}
	var ede *dns.EDNS0_EDE
	if opt := r.IsEdns0(); opt != nil {
		for _, o := range opt.Option {
			if e, ok := o.(*dns.EDNS0_EDE); ok {
				ede = e
			}
		}
	}
	if ede == nil || ede.InfoCode != dns.ExtendedErrorCodeProhibited || ede.ExtraText != "update[0]: type MX not allowed" {
		t.Errorf("EDE = %+v, want 18 %q", ede, "update[0]: type MX not allowed")
	}

	// No update block at all: UPDATE stays not implemented.
	q := new(dns.Msg)
	q.SetUpdate("example.internal.")
	if r := dnstest.Exchange(t, "udp", fmt.Sprintf("127.0.0.1:%d", startPlain(t)), q); r.Rcode != dns.RcodeNotImplemented {
		t.Errorf("UPDATE without an update block: %s, want NOTIMP", dns.RcodeToString[r.Rcode])
	}
}

// startPlain starts dnsd with a zone and no update block, returning its
// port.
func startPlain(t *testing.T) int {
	t.Helper()
	dir := t.TempDir()
	port := freePort(t)
	writeFile(t, filepath.Join(dir, "a.hosts"), "10.0.0.1 a.example.internal\n")
	writeFile(t, filepath.Join(dir, "dnsd.yaml"), fmt.Sprintf("listen: [\"127.0.0.1:%d\"]\nzones:\n  example.internal:\n    - hosts: {files: [a.hosts]}\n", port))
	d := startDnsd(t, dir, "-config", "dnsd.yaml")
	d.waitLog("dnsd started", 1)
	return port
}

// TestUpdateCheckStores: dnsd check never waits for the running dnsd's
// store, and names a store whose zone key is no longer listed, as a
// warning (exit 0).
func TestUpdateCheckStores(t *testing.T) {
	dir, _, _ := updateZone(t)
	d := startDnsd(t, dir, "-config", "dnsd.yaml")
	d.waitLog("dnsd started", 1)
	check := func() (string, string, error) {
		cmd := exec.Command(dnsdBin, "check", "-config", "dnsd.yaml")
		cmd.Dir = dir
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		start := time.Now()
		err := cmd.Run()
		if took := time.Since(start); took > 4*time.Second {
			t.Errorf("dnsd check took %v beside a running dnsd (it must not wait for the store's lock)", took)
		}
		return stdout.String(), stderr.String(), err
	}
	if out, errOut, err := check(); err != nil || !strings.Contains(out, "ok") || errOut != "" {
		t.Fatalf("check beside the running dnsd: %v %q %q", err, out, errOut)
	}
	d.stop(syscall.SIGTERM)
	// The zone key loses its reverse zone: its store is another file.
	conf := filepath.Join(dir, "dnsd.yaml")
	b, err := os.ReadFile(conf)
	if err != nil {
		t.Fatal(err)
	}
	c := strings.Replace(string(b), "corp.internal 10.in-addr.arpa:", "corp.internal:", 1)
	c = strings.Replace(c, "zones: [corp.internal, 10.in-addr.arpa]", "zones: [corp.internal]", 1)
	c = strings.Replace(c, `names: ["*.dhcp.corp.internal", "*.10.in-addr.arpa"]`, `names: ["*.dhcp.corp.internal"]`, 1)
	writeFile(t, conf, c)
	out, errOut, err := check()
	if err != nil || !strings.Contains(out, "ok") {
		t.Fatalf("check: %v %q %q", err, out, errOut)
	}
	if !strings.Contains(errOut, "warning: dynamic store state/dynamic/10.in-addr.arpa,corp.internal.db belongs to no zone key") {
		t.Errorf("check does not name the store left behind: %q", errOut)
	}
}

// TestUpdateReachesSecondary: a Knot secondary of an updated zone is told
// by NOTIFY and copies each update as an IXFR (the differences), serving
// the new records within seconds.
func TestUpdateReachesSecondary(t *testing.T) {
	needTool(t, "knotd", "nsupdate")
	dir, port, _ := updateZone(t)
	knotPort := freePort(t)
	writeFile(t, filepath.Join(dir, "xfr.key"), xfrSecret+"\n")
	conf := filepath.Join(dir, "dnsd.yaml")
	b, err := os.ReadFile(conf)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, conf, string(b)+fmt.Sprintf(`transfer:
  - zones: [corp.internal]
    allow: [127.0.0.1]
    tsig: {name: xfr-key, algorithm: hmac-sha256, secret_file: xfr.key}
    notify: ["127.0.0.1:%d"]
`, knotPort))
	d := startDnsd(t, dir, "-config", "dnsd.yaml")
	d.waitLog("dnsd started", 1)
	knot, k := startKnot(t, knotPort, port, []string{"corp.internal"}, true)
	if got, ok := secondaryAnswers(t, knot, "www.corp.internal.", "NOERROR:10.0.0.80", 20*time.Second); !ok {
		t.Fatalf("knotd www = %q before any update", got)
	}
	server := fmt.Sprintf("server 127.0.0.1 %d\nzone corp.internal\n", port)
	dhcp := []string{"-y", "hmac-sha256:dhcp-key:" + dhcpSecret}
	for i, ip := range []string{"10.1.0.1", "10.1.0.2"} {
		out, ok := runClient(t, server+fmt.Sprintf("update add s%d.dhcp.corp.internal 300 A %s\nsend\n", i, ip), "nsupdate", dhcp...)
		if !ok {
			t.Fatalf("nsupdate: %s", out)
		}
		start := time.Now()
		name := fmt.Sprintf("s%d.dhcp.corp.internal.", i)
		if got, ok := secondaryAnswers(t, knot, name, "NOERROR:"+ip, 15*time.Second); !ok {
			t.Fatalf("knotd %s = %q after the update", name, got)
		}
		t.Logf("update %d served by knotd %v after NOERROR", i, time.Since(start).Round(time.Millisecond))
	}
	if log := k.stderr.String(); !strings.Contains(log, "IXFR") || strings.Contains(log, "fallback to AXFR") {
		t.Errorf("knotd did not copy the updates by IXFR:\n%s", grep(log, "XFR"))
	}
}

// TestUpdateOverTLSAndBadTime: an UPDATE over DNS over TLS is applied like
// one over UDP; one signed an hour off is NOTAUTH with BADTIME, signed,
// the server's time in Other Data, and changes nothing.
func TestUpdateOverTLSAndBadTime(t *testing.T) {
	dir, port, _ := updateZone(t)
	certPEM, keyPEM := selfSigned(t)
	writeFile(t, filepath.Join(dir, "tls.crt"), string(certPEM))
	writeFile(t, filepath.Join(dir, "tls.key"), string(keyPEM))
	tlsPort := freePort(t)
	conf := filepath.Join(dir, "dnsd.yaml")
	b, err := os.ReadFile(conf)
	if err != nil {
		t.Fatal(err)
	}
	c := strings.Replace(string(b), fmt.Sprintf(`listen: ["127.0.0.1:%d"]`, port), fmt.Sprintf("listen: [\"127.0.0.1:%d\", \"tls://127.0.0.1:%d\"]\ntls: {cert: tls.crt, key: tls.key}", port, tlsPort), 1)
	writeFile(t, conf, c)
	d := startDnsd(t, dir, "-config", "dnsd.yaml")
	d.waitLog("dnsd started", 1)

	update := func(name string, signedAt time.Time) *dns.Msg {
		m := new(dns.Msg)
		m.SetUpdate("corp.internal.")
		m.Insert([]dns.RR{dnstest.MustRR(t, name+" 60 IN A 10.4.0.1")})
		m.SetTsig("dhcp-key.", dns.HmacSHA256, 300, signedAt.Unix())
		return m
	}
	dot := &dns.Client{Net: "tcp-tls", Timeout: 5 * time.Second, TLSConfig: &tls.Config{InsecureSkipVerify: true},
		TsigSecret: map[string]string{"dhcp-key.": dhcpSecret}}
	r, _, err := dot.Exchange(update("tls.dhcp.corp.internal.", time.Now()), fmt.Sprintf("127.0.0.1:%d", tlsPort))
	if err != nil || r.Rcode != dns.RcodeSuccess {
		t.Fatalf("update over DoT: %v %v", r, err)
	}
	if r, _ := query(t, "udp", fmt.Sprintf("127.0.0.1:%d", port), "tls.dhcp.corp.internal.", dns.TypeA); dnstest.RData(r) != "NOERROR:10.4.0.1" {
		t.Errorf("after the DoT update: %s", dnstest.RData(r))
	}

	// An hour off: BADTIME. The client's own check of the answer's
	// signature reports the time error; the message is still there.
	udp := &dns.Client{Net: "udp", Timeout: 2 * time.Second, TsigSecret: map[string]string{"dhcp-key.": dhcpSecret}}
	r, _, _ = udp.Exchange(update("late.dhcp.corp.internal.", time.Now().Add(-time.Hour)), fmt.Sprintf("127.0.0.1:%d", port))
	if r == nil || r.Rcode != dns.RcodeNotAuth {
		t.Fatalf("update signed an hour ago: %v, want NOTAUTH", r)
	}
	ts := r.IsTsig()
	if ts == nil || ts.Error != dns.RcodeBadTime || ts.MAC == "" || ts.OtherLen != 6 {
		t.Errorf("TSIG of the BADTIME answer: %v (want error BADTIME, a MAC, the server's time in Other Data)", ts)
	}
	if r, _ := query(t, "udp", fmt.Sprintf("127.0.0.1:%d", port), "late.dhcp.corp.internal.", dns.TypeA); r == nil || r.Rcode != dns.RcodeNameError {
		t.Errorf("a BADTIME update was applied: %s", dnstest.RData(r))
	}
}
