package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/dnsd/dnsd/internal/dnstest"
	"github.com/miekg/dns"
)

// TestWildcardEndToEnd: hosts wildcards through the built binary. A name
// whose first label is "*" answers the names below it that do not exist
// (one label or several), never an existing name or a name below one,
// makes no PTR, follows the file as it changes, and under "." answers
// before the query would be forwarded.
func TestWildcardEndToEnd(t *testing.T) {
	up := dnstest.StartUpstream(t, nil)
	hosts := "10.0.0.80 *.apps.example.internal\n" +
		"10.0.0.81 db.apps.example.internal\n" +
		"10.0.0.82 web.example.internal\n"
	s := startYAML(t, fmt.Sprintf(`listen: ["LISTEN"]
http: "HTTP"
zones:
  example.internal 10.in-addr.arpa:
    - hosts: {files: [hosts]}
  .:
    - hosts: {entries: ["10.0.0.90 *.lab.internal"]}
    - forward:
        upstreams: ["%s"]
        timeout: 500ms
`, up.Addr), map[string]string{"hosts": hosts})

	check := func(name string, qtype uint16, want string, nsSOA bool) *dns.Msg {
		t.Helper()
		r := dnstest.Ask(t, s.addr, name, qtype)
		if got := dnstest.RData(r); got != want {
			t.Errorf("%s %s: got %q, want %q", name, dns.TypeToString[qtype], got, want)
		}
		if (dnstest.SOA(r) != nil) != nsSOA {
			t.Errorf("%s %s: authority %v, want SOA %v", name, dns.TypeToString[qtype], r.Ns, nsSOA)
		}
		for _, rr := range r.Answer {
			if rr.Header().Name != name {
				t.Errorf("%s %s: answer owner %q, want the name as asked", name, dns.TypeToString[qtype], rr.Header().Name)
			}
		}
		return r
	}

	// Synthesized: one label, several labels, any case; AA set.
	if r := check("x.apps.example.internal.", dns.TypeA, "NOERROR:10.0.0.80", false); !r.Authoritative {
		t.Error("wildcard answer without AA")
	}
	check("a.b.apps.example.internal.", dns.TypeA, "NOERROR:10.0.0.80", false)
	check("Web.APPS.example.internal.", dns.TypeA, "NOERROR:10.0.0.80", false)
	check("*.apps.example.internal.", dns.TypeA, "NOERROR:10.0.0.80", false)
	check("x.apps.example.internal.", dns.TypeAAAA, "NOERROR:", true)          // NODATA at the wildcard
	check("x.apps.example.internal.", dns.TypeANY, "NOERROR:10.0.0.80", false) // minimal ANY

	// Not synthesized: an existing name, a name below it, the wildcard's
	// parent (an empty non-terminal), a name outside the wildcard.
	check("db.apps.example.internal.", dns.TypeA, "NOERROR:10.0.0.81", false)
	check("x.db.apps.example.internal.", dns.TypeA, "NXDOMAIN:", true)
	check("apps.example.internal.", dns.TypeA, "NOERROR:", true)
	check("x.example.internal.", dns.TypeA, "NXDOMAIN:", true)

	// No PTR for the wildcard's address; the other names have theirs.
	check("80.0.0.10.in-addr.arpa.", dns.TypePTR, "NXDOMAIN:", true)
	check("81.0.0.10.in-addr.arpa.", dns.TypePTR, "NOERROR:db.apps.example.internal.", false)

	// Under ".": the inline wildcard answers before forward; other names
	// are forwarded.
	check("host.lab.internal.", dns.TypeA, "NOERROR:10.0.0.90", false)
	if n := up.Queries(); n != 0 {
		t.Errorf("upstream asked %d times for names a wildcard answers", n)
	}
	if r := dnstest.Ask(t, s.addr, "www.example.com.", dns.TypeA); dnstest.RData(r) != "NOERROR:192.0.2.1" || up.Queries() != 1 {
		t.Errorf("www.example.com.: %q, upstream asked %d times; want it forwarded once", dnstest.RData(r), up.Queries())
	}

	// The file changes: the new wildcards are served, then their removal.
	path := filepath.Join(s.dir, "hosts")
	replace := func(content string) {
		t.Helper()
		writeFile(t, path+".tmp", content)
		if err := os.Rename(path+".tmp", path); err != nil {
			t.Fatal(err)
		}
	}
	replace("10.0.0.88 *.apps.example.internal\n10.0.0.83 *.svc.example.internal\n10.0.0.81 db.apps.example.internal\n")
	waitAnswer(t, s.addr, "x.apps.example.internal", dns.TypeA, "NOERROR:10.0.0.88")
	waitAnswer(t, s.addr, "y.svc.example.internal", dns.TypeA, "NOERROR:10.0.0.83")
	check("x.db.apps.example.internal.", dns.TypeA, "NXDOMAIN:", true)
	replace("10.0.0.81 db.apps.example.internal\n")
	waitAnswer(t, s.addr, "x.apps.example.internal", dns.TypeA, "NXDOMAIN:")
	waitAnswer(t, s.addr, "db.apps.example.internal", dns.TypeA, "NOERROR:10.0.0.81")
}
