package server

import (
	"context"
	"net/netip"
	"testing"

	"github.com/miekg/dns"

	"github.com/dnsd/dnsd/config"
	"github.com/dnsd/dnsd/internal/dnstest"
)

func TestACL(t *testing.T) {
	pfx := func(ss ...string) []netip.Prefix {
		var out []netip.Prefix
		for _, s := range ss {
			out = append(out, netip.MustParsePrefix(s))
		}
		return out
	}
	def := config.ACL{Default: true}
	explicit := config.ACL{Allow: pfx("198.51.100.0/24", "::ffff:203.0.113.0/120", "2001:db8::/32"), Deny: pfx("198.51.100.7/32")}
	cases := []struct {
		name     string
		acl      config.ACL
		client   string
		loopback bool // listener address
		want     bool
	}{
		{"default, loopback listener admits anyone", def, "203.0.113.5", true, true},
		{"default, public client on wildcard listener", def, "203.0.113.5", false, false},
		{"default, 10/8", def, "10.9.8.7", false, true},
		{"default, 172.16/12", def, "172.31.255.1", false, true},
		{"default, 172.32 is public", def, "172.32.0.1", false, false},
		{"default, 192.168/16", def, "192.168.1.1", false, true},
		{"default, loopback v4", def, "127.0.0.1", false, true},
		{"default, loopback v6", def, "::1", false, true},
		{"default, ULA fc00::/7", def, "fd12:3456::1", false, true},
		{"default, public v6", def, "2001:db8::1", false, false},
		{"default, link-local v4 not included", def, "169.254.1.1", false, false},
		{"default, link-local v6 not included", def, "fe80::1", false, false},
		{"default plus deny: deny wins", config.ACL{Default: true, Deny: pfx("10.0.0.0/8")}, "10.1.1.1", true, false},
		{"explicit allow", explicit, "198.51.100.5", false, true},
		{"explicit deny wins", explicit, "198.51.100.7", false, false},
		{"explicit: not listed", explicit, "10.0.0.1", true, false},
		{"explicit: v4-mapped prefix matches v4 client", explicit, "203.0.113.9", false, true},
		{"explicit: v6", explicit, "2001:db8:1::1", false, true},
		{"explicit empty allow admits nobody", config.ACL{}, "127.0.0.1", true, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rec := &recorder{}
			s := New(Options{Resolver: &fakeResolver{}, Observer: rec})
			s.set.Store(compile(Settings{ACL: c.acl}))
			sc := &scratch{}
			out := s.serveRaw(context.Background(), sc, protoUDP, netip.MustParseAddr(c.client), c.loopback, pack(t, query("acl.test.", dns.TypeA)))
			defer s.release(sc)
			r := new(dns.Msg)
			if err := r.Unpack(out); err != nil {
				t.Fatalf("reply does not unpack: %v", err)
			}
			if got := r.Rcode == dns.RcodeSuccess && len(r.Answer) == 1; got != c.want {
				t.Fatalf("allowed = %v (rcode %s), want %v", got, dns.RcodeToString[r.Rcode], c.want)
			}
			if !c.want && r.Rcode != dns.RcodeRefused {
				t.Fatalf("refused client got rcode %s, want REFUSED", dns.RcodeToString[r.Rcode])
			}
		})
	}
}

func TestACLOverSockets(t *testing.T) {
	deny := config.ACL{Default: true, Deny: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}
	ts := startServer(t, nil, loopbackUDPTCP(), Settings{ACL: deny})
	if r := dnstest.Exchange(t, "udp", ts.addr(t, "udp"), query("a.test.", dns.TypeA)); r.Rcode != dns.RcodeRefused {
		t.Fatalf("denied UDP client got %s", dns.RcodeToString[r.Rcode])
	}
	if len(ts.res.calls()) != 0 {
		t.Fatal("resolver called for a denied client")
	}

	// drop: nothing sent over UDP, REFUSED over TCP (never dropped there).
	deny.Drop = true
	if err := ts.Apply(context.Background(), loopbackUDPTCP(), Settings{ACL: deny}); err != nil {
		t.Fatal(err)
	}
	sc := &scratch{}
	if out := ts.serveRaw(context.Background(), sc, protoUDP, netip.MustParseAddr("127.0.0.1"), true, pack(t, query("a.test.", dns.TypeA))); out != nil {
		t.Fatal("dropped client got a UDP reply")
	}
	ts.release(sc)
	if o := ts.rec.last(t); !o.Dropped || o.Name != "a.test." {
		t.Fatalf("observation %+v, want Dropped", o)
	}
	if r := dnstest.Exchange(t, "tcp", ts.addr(t, "tcp"), query("a.test.", dns.TypeA)); r.Rcode != dns.RcodeRefused {
		t.Fatalf("denied TCP client got %s, want REFUSED", dns.RcodeToString[r.Rcode])
	}
}
