package main

import (
	"fmt"
	"os"
	"path/filepath"
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
transfer:
  - zones: [partner.example]
    allow: [127.0.0.0/8]
    tsig: {name: xfr-key, algorithm: hmac-sha256, secret_file: xfr.key}
    notify: ["127.0.0.1:%d"]
`, pport, phttp, sport))
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
`, sport, shttp, pport, freePort(t))
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
	sec = startDnsd(t, sdir, "-config", "dnsd.yaml")
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
