package e2e

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dnsd/dnsd/internal/dnstest"
	"github.com/miekg/dns"
)

const e2eZone = `$TTL 300
@       IN SOA ns1.example.internal. hostmaster.example.internal. 2024010101 7200 3600 1209600 60
@       IN NS  ns1
ns1     IN A   10.0.0.1
web     IN A   10.0.0.10
www     600 IN CNAME web
@       IN MX  10 mail
mail    IN A   10.0.0.25
_http._tcp IN SRV 10 5 80 web
txt     IN TXT "hello world"
$INCLUDE extra/more.zone
`

// TestFileSourceEndToEnd: a zone file with $INCLUDE and inline records
// through the built binary: the file's SOA and NS at the apex, CNAME, MX,
// SRV (+ additional), TXT, an inline wildcard; a hosts source after it
// answers the names the file does not have; an edit is served at once, a broken edit keeps the
// last good zone, and the file's own errors name FILE:LINE in dnsd check.
func TestFileSourceEndToEnd(t *testing.T) {
	s := startYAML(t, `listen: ["LISTEN"]
zones:
  example.internal:
    - file:
        path: zones/example.internal.zone
        records: ["*.apps 60 IN A 10.0.0.80", "web IN TXT \"inline\""]
    - hosts: {entries: ["10.9.9.9 web", "10.9.9.10 other"]}
  solo.internal:
    - file: {path: zones/solo.zone}
`, map[string]string{"zones/extra/more.zone": "extra IN A 10.0.0.50\n", "zones/example.internal.zone": e2eZone,
		"zones/solo.zone": "@ 300 IN SOA ns1.solo.internal. admin.solo.internal. 2024060101 7200 3600 1209600 120\n@ 300 IN NS ns1\nns1 300 IN A 10.0.3.1\n"})

	// A zone served by the file alone has the file's SOA (its serial as
	// written), in answers and negative answers; a zone it shares with
	// another source has the file's SOA with dnsd's serial, which rises
	// with either.
	soa := dnstest.Ask(t, s.addr, "solo.internal.", dns.TypeSOA)
	if len(soa.Answer) != 1 || soa.Answer[0].(*dns.SOA).Serial != 2024060101 || soa.Answer[0].(*dns.SOA).Ns != "ns1.solo.internal." || !soa.Authoritative {
		t.Fatalf("apex SOA of a file-only zone: %v", soa)
	}
	// ... and that SOA's TTL in a negative answer is the smaller of its
	// TTL (300) and its minimum field (120), RFC 2308.
	if neg := dnstest.SOA(dnstest.Ask(t, s.addr, "nope.solo.internal.", dns.TypeA)); neg == nil || neg.Serial != 2024060101 || neg.Hdr.Ttl != 120 {
		t.Errorf("negative answer of a file-only zone: SOA %v, want the file's with TTL 120", neg)
	}
	// An edit that leaves the file's SOA serial as it was is served as
	// soon as any other: answers already given (and kept packed by the
	// server) do not outlive it.
	for range 3 {
		if got := dnstest.RData(dnstest.Ask(t, s.addr, "ns1.solo.internal.", dns.TypeA)); got != "NOERROR:10.0.3.1" {
			t.Fatalf("ns1.solo.internal: %s", got)
		}
	}
	replaceFile(t, filepath.Join(s.dir, "zones", "solo.zone"), "@ 300 IN SOA ns1.solo.internal. admin.solo.internal. 2024060101 7200 3600 1209600 120\n@ 300 IN NS ns1\nns1 300 IN A 10.0.3.2\n")
	start := time.Now()
	waitAnswer(t, s.addr, "ns1.solo.internal.", dns.TypeA, "NOERROR:10.0.3.2")
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("an edit without a new serial was served after %v (the file's debounce is 100 ms)", took)
	}
	soa = dnstest.Ask(t, s.addr, "example.internal.", dns.TypeSOA)
	if len(soa.Answer) != 1 || !soa.Authoritative {
		t.Fatalf("apex SOA of a zone merged from file and hosts: %v", soa)
	}
	if got := soa.Answer[0].(*dns.SOA); got.Ns != "ns1.example.internal." || got.Mbox != "hostmaster.example.internal." ||
		got.Refresh != 7200 || got.Expire != 1209600 || got.Minttl != 60 || got.Serial == 2024010101 {
		t.Fatalf("apex SOA of a zone merged from file and hosts: %v, want the file's with dnsd's serial", got)
	}
	if got := dnstest.RData(dnstest.Ask(t, s.addr, "example.internal.", dns.TypeNS)); got != "NOERROR:ns1.example.internal." {
		t.Errorf("apex NS: %s", got)
	}
	cases := []struct {
		name  string
		qtype uint16
		want  string
	}{
		{"web.example.internal.", dns.TypeA, "NOERROR:10.0.0.10"}, // the file first
		{"web.example.internal.", dns.TypeTXT, `NOERROR:"inline"`},
		{"other.example.internal.", dns.TypeA, "NOERROR:10.9.9.10"}, // then hosts
		{"www.example.internal.", dns.TypeA, "NOERROR:web.example.internal.,10.0.0.10"},
		{"example.internal.", dns.TypeMX, "NOERROR:10 mail.example.internal."},
		{"_http._tcp.example.internal.", dns.TypeSRV, "NOERROR:10 5 80 web.example.internal."},
		{"txt.example.internal.", dns.TypeTXT, `NOERROR:"hello world"`},
		{"extra.example.internal.", dns.TypeA, "NOERROR:10.0.0.50"},
		{"x.apps.example.internal.", dns.TypeA, "NOERROR:10.0.0.80"},
		{"a.b.apps.example.internal.", dns.TypeA, "NOERROR:10.0.0.80"},
		{"nope.example.internal.", dns.TypeA, "NXDOMAIN:"},
		{"mail.example.internal.", dns.TypeAAAA, "NOERROR:"},
	}
	for _, c := range cases {
		if got := dnstest.RData(dnstest.Ask(t, s.addr, c.name, c.qtype)); got != c.want {
			t.Errorf("%s %s: %s, want %s", c.name, dns.TypeToString[c.qtype], got, c.want)
		}
	}
	mx := dnstest.Ask(t, s.addr, "example.internal.", dns.TypeMX)
	if len(mx.Extra) == 0 || !strings.Contains(mx.Extra[0].String(), "10.0.0.25") {
		t.Errorf("MX without the target's address in additional: %v", mx.Extra)
	}

	// An edit is served within the debounce; a broken edit is not.
	zone := filepath.Join(s.dir, "zones", "example.internal.zone")
	replaceFile(t, zone, strings.Replace(e2eZone, "mail    IN A   10.0.0.25", "mail    IN A   10.0.0.26", 1))
	waitAnswer(t, s.addr, "mail.example.internal.", dns.TypeA, "NOERROR:10.0.0.26")
	replaceFile(t, zone, strings.Replace(e2eZone, "mail    IN A   10.0.0.25", "mail    IN A   10.0.0.999", 1))
	s.waitLog("zone file not applied", 1)
	if got := dnstest.RData(dnstest.Ask(t, s.addr, "mail.example.internal.", dns.TypeA)); got != "NOERROR:10.0.0.26" {
		t.Errorf("after a broken edit: %s, want the last good zone", got)
	}
	if !strings.Contains(s.stderr.String(), "example.internal.zone:8:") {
		t.Errorf("the broken edit's log line does not name the file and line:\n%s", grep(s.stderr.String(), "zone file not applied"))
	}

	// dnsd check names the zone file's line.
	_, stderr, code := runCheck(t, s.dir, "-config", "dnsd.yaml")
	if code != 1 || !strings.Contains(stderr, "example.internal.zone:8:") {
		t.Errorf("check with a broken zone file: exit %d, want 1 and FILE:8:\n%s", code, stderr)
	}
}

// replaceFile writes content to a temporary file and renames it over
// path, as editors and config management do.
func replaceFile(t *testing.T, path, content string) {
	t.Helper()
	writeFile(t, path+".tmp", content)
	if err := os.Rename(path+".tmp", path); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Millisecond)
}

// TestFileDelegation: a zone file that delegates a subdomain (NS records
// below the apex) answers questions at and below the cut with a referral:
// NOERROR, not authoritative, the cut's NS records in authority and their
// addresses (glue) in additional - the glue is not answered as the
// zone's own data. DS at the cut is the parent's: answered. Names beside
// the cut are answered as before.
func TestFileDelegation(t *testing.T) {
	s := startYAML(t, `listen: ["LISTEN"]
zones:
  example.internal:
    - file: {path: example.internal.zone}
`, map[string]string{"example.internal.zone": `$TTL 300
@        IN SOA ns1 hostmaster 1 7200 3600 1209600 60
@        IN NS  ns1
ns1      IN A   10.0.0.53
www      IN A   10.0.0.80
sub      IN NS  ns.sub
sub      IN NS  ns1
sub      IN DS  12345 13 2 0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF
ns.sub   IN A   10.0.5.53
tosub    IN CNAME host.sub
`})
	for _, name := range []string{"host.sub.example.internal.", "sub.example.internal.", "ns.sub.example.internal.", "a.b.sub.example.internal."} {
		for _, qt := range []uint16{dns.TypeA, dns.TypeNS} {
			r := dnstest.Ask(t, s.addr, name, qt)
			var ns, glue []string
			for _, rr := range r.Ns {
				if n, ok := rr.(*dns.NS); ok && n.Hdr.Name == "sub.example.internal." {
					ns = append(ns, n.Ns)
				}
			}
			for _, rr := range r.Extra {
				if a, ok := rr.(*dns.A); ok {
					glue = append(glue, a.Hdr.Name+"="+a.A.String())
				}
			}
			slices.Sort(ns)
			slices.Sort(glue)
			if r.Rcode != dns.RcodeSuccess || r.Authoritative || len(r.Answer) != 0 ||
				!slices.Equal(ns, []string{"ns.sub.example.internal.", "ns1.example.internal."}) ||
				!slices.Equal(glue, []string{"ns.sub.example.internal.=10.0.5.53", "ns1.example.internal.=10.0.0.53"}) {
				t.Errorf("%s %s: want a referral to sub.example.internal with glue, got\n%v", name, dns.TypeToString[qt], r)
			}
		}
	}
	// A CNAME into the delegation: the CNAME, then the same referral.
	r := dnstest.Ask(t, s.addr, "tosub.example.internal.", dns.TypeA)
	var glue []string
	for _, rr := range r.Extra {
		if a, ok := rr.(*dns.A); ok {
			glue = append(glue, a.Hdr.Name+"="+a.A.String())
		}
	}
	slices.Sort(glue)
	if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 || len(r.Ns) != 2 ||
		!slices.Equal(glue, []string{"ns.sub.example.internal.=10.0.5.53", "ns1.example.internal.=10.0.0.53"}) {
		t.Errorf("a CNAME into the delegation: want the CNAME, then the referral with its glue, got\n%v", r)
	}
	if r := dnstest.Ask(t, s.addr, "sub.example.internal.", dns.TypeDS); len(r.Answer) != 1 || !r.Authoritative {
		t.Errorf("DS at the cut: want the parent's authoritative answer, got %v", r)
	}
	if got := dnstest.RData(dnstest.Ask(t, s.addr, "www.example.internal.", dns.TypeA)); got != "NOERROR:10.0.0.80" {
		t.Errorf("a name beside the cut: %s", got)
	}
	if r := dnstest.Ask(t, s.addr, "nope.example.internal.", dns.TypeA); r.Rcode != dns.RcodeNameError || !r.Authoritative {
		t.Errorf("a missing name beside the cut: %v", r)
	}
}
