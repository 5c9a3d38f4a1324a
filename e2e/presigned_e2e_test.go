package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/dnsd/dnsd/internal/dnstest"
)

// presignedZone is the zone both pre-signed tests sign: a CNAME, a
// wildcard, an empty non-terminal (deep).
const presignedZone = `$TTL 300
@        IN SOA ns1 hostmaster 2024010101 7200 3600 1209600 60
@        IN NS  ns1
ns1      IN A   10.0.0.1
www      IN A   10.0.0.10
alias    IN CNAME www
*.apps   IN A   10.0.0.80
sub.deep IN A   10.0.0.30
mail     IN A   10.0.0.25
`

// signZone signs content as zone with a new KSK and ZSK (dnssec-keygen,
// dnssec-signzone; NSEC3 with a salt and 2 iterations when nsec3) into
// dir/zones/ZONE.signed (ZONE without its final dot), and writes
// dir/ZONE.anchor, a delv trust anchor holding the KSK.
func signZone(t *testing.T, dir, zone, content string, nsec3 bool) {
	t.Helper()
	needTool(t, "dnssec-keygen", "dnssec-signzone")
	keys := filepath.Join(dir, "keys")
	if err := os.MkdirAll(filepath.Join(dir, "zones"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(keys, 0o700); err != nil {
		t.Fatal(err)
	}
	run := func(name string, args ...string) string {
		t.Helper()
		out, err := exec.Command(name, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out))
	}
	ksk := run("dnssec-keygen", "-q", "-K", keys, "-a", "ECDSAP256SHA256", "-f", "KSK", "-n", "ZONE", zone)
	run("dnssec-keygen", "-q", "-K", keys, "-a", "ECDSAP256SHA256", "-n", "ZONE", zone)
	base := strings.TrimSuffix(zone, ".")
	plain := filepath.Join(dir, base+".zone")
	writeFile(t, plain, content)
	args := []string{"-q", "-S", "-K", keys, "-d", keys, "-o", zone, "-f", filepath.Join(dir, "zones", base+".signed")}
	if nsec3 {
		args = append(args, "-3", "ab12", "-H", "2")
	}
	run("dnssec-signzone", append(args, plain)...)
	key, err := os.ReadFile(filepath.Join(keys, strings.Fields(ksk)[0]+".key"))
	if err != nil {
		t.Fatal(err)
	}
	var anchor string
	for _, line := range strings.Split(string(key), "\n") {
		if rr, err := dns.NewRR(line); err == nil && rr != nil {
			k := rr.(*dns.DNSKEY)
			anchor = fmt.Sprintf("trust-anchors { %s static-key %d %d %d %q; };\n", zone, k.Flags, k.Protocol, k.Algorithm, k.PublicKey)
		}
	}
	if anchor == "" {
		t.Fatalf("no DNSKEY in %s", key)
	}
	writeFile(t, filepath.Join(dir, zone+".anchor"), anchor)
}

// delv asks dnsd at addr through delv, validating from the zone's trust
// anchor, and returns what it printed.
func delv(t *testing.T, dir, addr, zone, name, qtype string) string {
	t.Helper()
	host, port, _ := strings.Cut(addr, ":")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, _ := exec.CommandContext(ctx, "delv", "@"+host, "-p", port, "-a", filepath.Join(dir, zone+".anchor"), "+root="+zone, "+tcp", name, qtype).CombinedOutput()
	return string(out)
}

// TestPresignedZoneValidates: a zone file signed beforehand by BIND's
// dnssec-signzone, NSEC and NSEC3, is served as a signed zone: delv,
// validating from the zone's KSK, fully validates a positive answer, a
// CNAME, a wildcard answer, NXDOMAIN, NODATA, an empty non-terminal's
// NODATA and a wildcard NODATA. DO=0 answers carry no DNSSEC record; AD
// is never set.
func TestPresignedZoneValidates(t *testing.T) {
	needTool(t, "delv")
	dir := t.TempDir()
	signZone(t, dir, "signed.example.", presignedZone, false)
	signZone(t, dir, "nsec3.example.", presignedZone, true)
	s := startIn(t, dir, `listen: ["LISTEN"]
zones:
  signed.example:
    - file: {path: zones/signed.example.signed}
  nsec3.example:
    - file: {path: zones/nsec3.example.signed}
`)
	cases := []struct {
		name, qtype string
		negative    bool
		want        string // in delv's answer
	}{
		{"www", "A", false, "10.0.0.10"},
		{"alias", "A", false, "CNAME"},
		{"x.apps", "A", false, "10.0.0.80"},
		{"a.b.apps", "A", false, "10.0.0.80"},
		{"@", "SOA", false, "2024010101"},
		{"nope", "A", true, "NXDOMAIN"},
		{"a.nope", "A", true, "NXDOMAIN"},
		{"mail", "AAAA", true, "NXRRSET"},
		{"deep", "A", true, "NXRRSET"},
		{"x.apps", "TXT", true, "NXRRSET"},
	}
	for _, zone := range []string{"signed.example.", "nsec3.example."} {
		for _, c := range cases {
			name := c.name + "." + zone
			if c.name == "@" {
				name = zone
			}
			out := delv(t, dir, s.addr, zone, name, c.qtype)
			validated := strings.Contains(out, "; fully validated") && !strings.Contains(out, "negative response")
			if c.negative {
				validated = strings.Contains(out, "; negative response, fully validated")
			}
			if !validated || !strings.Contains(out, c.want) {
				t.Errorf("delv %s %s: not validated (want %q):\n%s", name, c.qtype, c.want, out)
			}
		}
	}

	// Without DO, no DNSSEC record but those asked for; never AD.
	for _, q := range []struct {
		name  string
		qtype uint16
	}{{"www.signed.example.", dns.TypeA}, {"nope.signed.example.", dns.TypeA}, {"x.apps.signed.example.", dns.TypeA}} {
		for _, do := range []bool{false, true} {
			m := new(dns.Msg)
			m.SetQuestion(q.name, q.qtype)
			m.SetEdns0(1232, do)
			r, err := dns.Exchange(m, s.addr)
			if err != nil {
				t.Fatal(err)
			}
			sigs := 0
			for _, rr := range append(append([]dns.RR(nil), r.Answer...), r.Ns...) {
				if tp := rr.Header().Rrtype; tp == dns.TypeRRSIG || tp == dns.TypeNSEC {
					sigs++
				}
			}
			if r.AuthenticatedData || !r.Authoritative || (sigs > 0) != do {
				t.Errorf("%s DO=%v: AD %v AA %v, %d RRSIG/NSEC records", q.name, do, r.AuthenticatedData, r.Authoritative, sigs)
			}
		}
	}
}

// TestPresignedZoneTransfer: the AXFR of a pre-signed zone holds its
// CNAME with the CNAME's RRSIG and NSEC, and dnssec-verify accepts it as
// a fully signed zone.
func TestPresignedZoneTransfer(t *testing.T) {
	needTool(t, "dnssec-verify")
	dir := t.TempDir()
	signZone(t, dir, "signed.example.", presignedZone, false)
	s := startIn(t, dir, `listen: ["LISTEN"]
zones:
  signed.example:
    - file: {path: zones/signed.example.signed}
transfer:
  - zones: [signed.example]
    allow: [127.0.0.0/8]
`)
	rrs, _, err := axfr(t, s.addr, "signed.example.", dns.TypeAXFR, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	var alias []string
	var zone strings.Builder
	for i, rr := range rrs {
		if h := rr.Header(); h.Name == "alias.signed.example." {
			typ := dns.TypeToString[h.Rrtype]
			if sig, ok := rr.(*dns.RRSIG); ok {
				typ += ":" + dns.TypeToString[sig.TypeCovered]
			}
			alias = append(alias, typ)
		}
		if i < len(rrs)-1 { // the closing SOA
			zone.WriteString(rr.String() + "\n")
		}
	}
	if got := strings.Join(alias, " "); got != "CNAME RRSIG:CNAME NSEC RRSIG:NSEC" {
		t.Errorf("alias.signed.example. in the transfer: %q, want its CNAME, NSEC and their RRSIGs", got)
	}
	if strings.Contains(s.stderr.String(), "leaves out CNAME") {
		t.Error("the transfer logged a CNAME left out")
	}
	path := filepath.Join(dir, "axfr.zone")
	writeFile(t, path, zone.String())
	if out, err := exec.Command("dnssec-verify", "-o", "signed.example.", path).CombinedOutput(); err != nil {
		t.Errorf("dnssec-verify of the transfer: %v\n%s", err, out)
	}
}

// startIn starts dnsd in dir with the config tmpl (LISTEN replaced by a
// free address) and waits until it serves.
func startIn(t *testing.T, dir, tmpl string) *dnsd {
	t.Helper()
	s := &dnsd{dir: dir, addr: fmt.Sprintf("127.0.0.1:%d", freePort(t)), hport: freePort(t)}
	s.cfg = filepath.Join(dir, "dnsd.yaml")
	writeFile(t, s.cfg, s.expand(tmpl))
	s.proc = startDnsd(t, dir, "-config", "dnsd.yaml")
	s.waitLog("dnsd started", 1)
	return s
}

// TestPresignedZoneThroughUnbound: unbound, a validating resolver that
// stub-forwards the zones to dnsd and trusts their KSKs, validates dnsd's
// answers from a pre-signed zone (NSEC and NSEC3): positive answers, a
// CNAME, a wildcard and the denials come back with AD set, not SERVFAIL.
func TestPresignedZoneThroughUnbound(t *testing.T) {
	needTool(t, "unbound", "delv")
	dir := t.TempDir()
	zones := []string{"signed.example.", "nsec3.example."}
	signZone(t, dir, zones[0], presignedZone, false)
	signZone(t, dir, zones[1], presignedZone, true)
	s := startIn(t, dir, `listen: ["LISTEN"]
zones:
  signed.example:
    - file: {path: zones/signed.example.signed}
  nsec3.example:
    - file: {path: zones/nsec3.example.signed}
`)
	uport := freePort(t)
	var conf strings.Builder
	fmt.Fprintf(&conf, `server:
    interface: 127.0.0.1
    port: %d
    do-ip6: no
    do-daemonize: no
    username: ""
    chroot: ""
    directory: %q
    pidfile: ""
    use-syslog: no
    logfile: ""
    verbosity: 1
    val-log-level: 2
    do-not-query-localhost: no
    module-config: "validator iterator"
`, uport, dir)
	host, port, _ := strings.Cut(s.addr, ":")
	for _, zone := range zones {
		anchor, err := os.ReadFile(filepath.Join(dir, zone+".anchor"))
		if err != nil {
			t.Fatal(err)
		}
		// trust-anchors { ZONE static-key FLAGS PROTO ALG "KEY"; };
		f := strings.Fields(strings.NewReplacer("{", " ", "}", " ", ";", " ", `"`, " ").Replace(string(anchor)))
		if len(f) < 7 {
			t.Fatalf("anchor %q", anchor)
		}
		fmt.Fprintf(&conf, "    trust-anchor: \"%s DNSKEY %s %s %s %s\"\n", zone, f[3], f[4], f[5], strings.Join(f[6:], ""))
	}
	for _, zone := range zones {
		fmt.Fprintf(&conf, "stub-zone:\n    name: %q\n    stub-addr: %s@%s\n", zone, host, port)
	}
	cfg := filepath.Join(dir, "unbound.conf")
	writeFile(t, cfg, conf.String())
	if out, err := exec.Command("unbound-checkconf", cfg).CombinedOutput(); err != nil {
		t.Fatalf("unbound-checkconf: %v\n%s", err, out)
	}
	u := startBinary(t, "unbound", nil, dir, "-d", "-c", cfg)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("unbound output:\n%s", u.stderr.String())
		}
	})
	uaddr := fmt.Sprintf("127.0.0.1:%d", uport)
	ask := func(name string, qtype uint16) (*dns.Msg, error) {
		m := new(dns.Msg)
		m.SetQuestion(name, qtype)
		m.SetEdns0(1232, true)
		c := &dns.Client{Timeout: 5 * time.Second}
		r, _, err := c.Exchange(m, uaddr)
		return r, err
	}
	dnstest.EventuallyNil(t, 10*time.Second, func() error {
		if _, err := ask("www."+zones[0], dns.TypeA); err != nil {
			return fmt.Errorf("unbound does not answer: %w", err)
		}
		return nil
	})
	for _, zone := range zones {
		for _, c := range []struct {
			name  string
			qtype uint16
			rcode int
		}{
			{"www", dns.TypeA, dns.RcodeSuccess},
			{"alias", dns.TypeA, dns.RcodeSuccess},
			{"x.apps", dns.TypeA, dns.RcodeSuccess},
			{"nope", dns.TypeA, dns.RcodeNameError},
			{"mail", dns.TypeAAAA, dns.RcodeSuccess},
			{"deep", dns.TypeA, dns.RcodeSuccess},
		} {
			r, err := ask(c.name+"."+zone, c.qtype)
			if err != nil {
				t.Errorf("%s.%s %s through unbound: %v", c.name, zone, dns.TypeToString[c.qtype], err)
				continue
			}
			if r.Rcode != c.rcode || !r.AuthenticatedData {
				t.Errorf("%s.%s %s through unbound: %s AD=%v, want %s with AD (validated)", c.name, zone, dns.TypeToString[c.qtype], dns.RcodeToString[r.Rcode], r.AuthenticatedData, dns.RcodeToString[c.rcode])
			}
		}
	}
}
