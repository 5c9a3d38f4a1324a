package e2e

import (
	"strings"
	"testing"

	"github.com/miekg/dns"
)

// TestHostsReverseZoneKey: a CIDR zone key over the hosts file of a
// forward zone key answers PTR for its addresses (dig -x), the forward key
// its names, and neither is warned of. A key none of whose zones holds a
// name or an address of its hosts file is: `dnsd check` prints a warning
// (and exits 0), and a reload to it logs a WARN line.
func TestHostsReverseZoneKey(t *testing.T) {
	const hostsFile = "10.20.1.5 app.corp.internal\n10.20.1.6 db.corp.internal\n"
	good := config{Zones: `  corp.internal:
    - hosts: {files: [corp.hosts]}
  10.20.0.0/16:
    - hosts: {files: [corp.hosts]}
`}
	d := start(t, good, map[string]string{"corp.hosts": hostsFile})
	rev, err := dns.ReverseAddr("10.20.1.5")
	if err != nil {
		t.Fatal(err)
	}
	r := d.ask("udp", rev, dns.TypePTR)
	if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 || r.Answer[0].(*dns.PTR).Ptr != "app.corp.internal." || !r.Authoritative {
		t.Fatalf("PTR %s: %v", rev, r)
	}
	if r := d.ask("udp", "db.corp.internal.", dns.TypeA); len(r.Answer) != 1 || r.Answer[0].(*dns.A).A.String() != "10.20.1.6" {
		t.Fatalf("A db.corp.internal: %v", r)
	}
	if r := d.ask("udp", "9.1.20.10.in-addr.arpa.", dns.TypePTR); r.Rcode != dns.RcodeNameError {
		t.Errorf("PTR of an address not in the file: %s, want NXDOMAIN", dns.RcodeToString[r.Rcode])
	}
	stdout, stderr, code := runDnsd(t, d.dir, "check", "-config", "dnsd.yaml")
	if code != 0 || strings.Contains(stderr, "warning") || !strings.Contains(stdout, "ok") {
		t.Errorf("check of the good config: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if strings.Contains(d.stderr.String(), "outside") {
		t.Errorf("logged names outside:\n%s", grep(d.stderr.String(), "outside"))
	}

	// 10.30.0.0/16 holds no address of the file, and none of its names.
	bad := config{Zones: good.Zones + `  10.30.0.0/16:
    - hosts: {files: [corp.hosts]}
`}
	writeFile(t, d.cfg, d.expand(bad.yaml()))
	stdout, stderr, code = runDnsd(t, d.dir, "check", "-config", "dnsd.yaml")
	if code != 0 || !strings.Contains(stdout, "dnsd.yaml: ok") {
		t.Errorf("check: exit %d, stdout %q; want 0 and ok", code, stdout)
	}
	if !strings.Contains(stderr, "dnsd.yaml: warning: hosts entries are all outside the zone key") ||
		!strings.Contains(stderr, "zone=10.30.0.0/16") || strings.Count(stderr, "warning") != 1 {
		t.Errorf("check warnings: %q", stderr)
	}
	d.reload(t, bad.yaml(), true, 1)
	if !strings.Contains(d.stderr.String(), `level=WARN msg="hosts entries are all outside the zone key`) {
		t.Errorf("no WARN at the reload:\n%s", grep(d.stderr.String(), "outside"))
	}
	if r := d.ask("udp", rev, dns.TypePTR); len(r.Answer) != 1 {
		t.Errorf("PTR %s after the reload: %v", rev, r)
	}
}
