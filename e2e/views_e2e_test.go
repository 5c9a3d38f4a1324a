package e2e

import (
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dnsd/dnsd/internal/dnstest"
	"github.com/miekg/dns"
)

// Split horizon through the binary: views by client network, by listen
// entry and by both; first match wins; a name no zone of the view has is
// resolved by the top-level zones; the view is a metric label; a reload
// changes views atomically with the rest; dnsd check rejects bad views.
func TestViews(t *testing.T) {
	dir := t.TempDir()
	p1, p2, hport := freePort(t), freePort(t), freePort(t)
	a1, a2 := fmt.Sprintf("127.0.0.1:%d", p1), fmt.Sprintf("127.0.0.2:%d", p2)
	conf := func(office string) string {
		return fmt.Sprintf(`listen: [%q, %q]
http: "127.0.0.1:%d"
zones:
  example.internal:
    - hosts: {entries: ["10.0.0.1 db"]}
  other.internal:
    - hosts: {entries: ["10.9.0.1 x"]}
views:
  - name: office
    clients: [127.0.1.0/24]
    zones:
      example.internal:
        - hosts: {entries: ["%s db"]}
  - name: vpn
    listen: [%q]
    zones:
      example.internal:
        - hosts: {entries: ["10.2.0.1 db"]}
  - name: both
    clients: [127.0.3.0/24]
    listen: [%q]
    zones:
      example.internal:
        - hosts: {entries: ["10.3.0.1 db"]}
`, a1, a2, hport, office, a2, a1)
	}
	cfg := filepath.Join(dir, "dnsd.yaml")
	writeFile(t, cfg, conf("10.1.0.1"))
	p := startDnsd(t, dir, "-config", "dnsd.yaml")
	p.waitLog("dnsd started", 1)
	ask := func(from, server, name string) string {
		t.Helper()
		c := &dns.Client{Timeout: 2 * time.Second, Dialer: &net.Dialer{LocalAddr: &net.UDPAddr{IP: net.ParseIP(from)}}}
		m := new(dns.Msg)
		m.SetQuestion(name, dns.TypeA)
		r, _, err := c.Exchange(m, server)
		if err != nil {
			t.Fatalf("%s -> %s %s: %v", from, server, name, err)
		}
		return dnstest.RData(r)
	}
	for _, c := range []struct{ from, server, want, why string }{
		{"127.0.0.1", a1, "NOERROR:10.0.0.1", "no view matches: top-level zones"},
		{"127.0.1.5", a1, "NOERROR:10.1.0.1", "office by client"},
		{"127.0.1.5", a2, "NOERROR:10.1.0.1", "office and vpn match: the first wins"},
		{"127.0.0.1", a2, "NOERROR:10.2.0.1", "vpn by listen entry"},
		{"127.0.3.1", a1, "NOERROR:10.3.0.1", "both: client and listen entry"},
		{"127.0.3.1", a2, "NOERROR:10.2.0.1", "both needs its listen entry: vpn"},
	} {
		if got := ask(c.from, c.server, "db.example.internal."); got != c.want {
			t.Errorf("%s: %s -> %s: %s, want %s", c.why, c.from, c.server, got, c.want)
		}
	}
	if got := ask("127.0.1.5", a1, "x.other.internal."); got != "NOERROR:10.9.0.1" {
		t.Errorf("a name the view has no zone for: %s, want the top-level answer", got)
	}
	metrics := scrape(t, fmt.Sprintf("http://127.0.0.1:%d", hport))
	for _, want := range []string{`view="office",zone="example.internal."`, `view="office",zone="other.internal."`, `view="vpn"`, `view="both"`, `view="default"`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics has no series with %s:\n%s", want, grep(metrics, "dnsd_requests_total"))
		}
	}

	writeFile(t, cfg, conf("10.1.0.99"))
	p.signal(syscall.SIGHUP)
	p.waitLog("reloaded", 1)
	if got := ask("127.0.1.5", a1, "db.example.internal."); got != "NOERROR:10.1.0.99" {
		t.Errorf("after a reload: %s, want the view's new address", got)
	}

	// dnsd check: a view without clients and listen, a listen entry that
	// is not a top-level one.
	bad := filepath.Join(dir, "bad.yaml")
	writeFile(t, bad, strings.Replace(strings.Replace(conf("10.1.0.1"), "    clients: [127.0.1.0/24]\n", "", 1), fmt.Sprintf("listen: [%q]\n    zones", a2), `listen: ["127.0.0.9:53"]`+"\n    zones", 1))
	_, stderr, code := runCheck(t, dir, "-config", "bad.yaml")
	if code != 1 || !strings.Contains(stderr, `view "office" needs clients, listen or both`) || !strings.Contains(stderr, `listen entry "127.0.0.9:53" is not in the top-level listen`) {
		t.Errorf("dnsd check on bad views: exit %d\n%s", code, stderr)
	}
	p.stop(syscall.SIGTERM)
}

// TestViewsForwardApart: split horizon over forward sources, the office
// view asking an internal resolver and everyone else a public one. An
// answer one view's upstream gave is never served from the cache to the
// other view, whichever asks first; each view's repeat is a cache hit.
func TestViewsForwardApart(t *testing.T) {
	answering := func(ip string) *dnstest.Upstream {
		return dnstest.StartUpstream(t, func(w dns.ResponseWriter, r *dns.Msg) {
			m := new(dns.Msg)
			m.SetReply(r)
			m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: r.Question[0].Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 300}, A: net.ParseIP(ip)})
			_ = w.WriteMsg(m)
		})
	}
	public, internal := answering("192.0.2.1"), answering("10.0.0.10")
	s := startYAML(t, fmt.Sprintf(`listen: ["LISTEN"]
zones:
  ext:
    - forward: {upstreams: [%q]}
views:
  - name: office
    clients: [127.0.1.0/24]
    zones:
      ext:
        - forward: {upstreams: [%q]}
`, public.Addr, internal.Addr), nil)
	ask := func(from, name string) string {
		t.Helper()
		c := &dns.Client{Timeout: 2 * time.Second, Dialer: &net.Dialer{LocalAddr: &net.UDPAddr{IP: net.ParseIP(from)}}}
		m := new(dns.Msg)
		m.SetQuestion(name, dns.TypeA)
		r, _, err := c.Exchange(m, s.addr)
		if err != nil {
			t.Fatalf("%s %s: %v", from, name, err)
		}
		return dnstest.RData(r)
	}
	for _, order := range [][2]string{{"127.0.0.1", "127.0.1.5"}, {"127.0.1.5", "127.0.0.1"}} {
		name := "first-" + strings.ReplaceAll(order[0], ".", "-") + ".ext."
		for range 2 {
			for _, from := range order {
				want := "NOERROR:192.0.2.1"
				if from == "127.0.1.5" {
					want = "NOERROR:10.0.0.10"
				}
				if got := ask(from, name); got != want {
					t.Errorf("%s asked by %s (%s first): %s, want %s", name, from, order[0], got, want)
				}
			}
		}
	}
	if p, i := public.Queries(), internal.Queries(); p != 2 || i != 2 {
		t.Errorf("upstreams asked %d (public) and %d (internal) times, want 2 each: one per name, repeats from the cache", p, i)
	}
}
