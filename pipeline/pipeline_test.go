package pipeline

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/dnsd/dnsd/internal/dnstest"
)

// fixture is a pipeline over fake sources shaped like a real dnsd.yaml:
//
//	example. example.org.: hosts (fallthrough) → etcd (no fallthrough)
//	corp.:                 kubernetes (no fallthrough) → hosts
//	fail.test.:            etcd (failing, fallthrough) → hosts
//	allft.test.:           hosts (ttl 10) → hosts (ttl 20), both fallthrough
//	.:                     hosts → forward
type fixture struct {
	p                            *Pipeline
	hosts, etcd, kube, afterKube *fakeSource
	failing, afterFail           *fakeSource
	ft1, ft2, rootHosts          *fakeSource
	fwd                          *fakeForward
	logs                         *bytes.Buffer
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	f := &fixture{logs: new(bytes.Buffer)}
	recs := []string{
		"www.example. 60 IN A 10.0.0.1",
		"www.example. 60 IN AAAA 2001:db8::1",
		"www.example. 60 IN TXT \"hi\"",
		"a.b.example. 60 IN A 10.0.0.3",
		"alias.example. 60 IN CNAME www.example.",
		"alias2.example. 60 IN CNAME ALIAS.example.",
		"other.example. 60 IN CNAME svc.corp.",
		"other2.example. 60 IN CNAME nope.corp.",
		"ext.example. 60 IN CNAME host.remote.test.",
		"ext2.example. 60 IN CNAME nope.remote.test.",
		"bad.example. 60 IN CNAME x.fail.test.",
		"dangling.example. 60 IN CNAME missing.example.",
		"nowhere.example. 60 IN CNAME www.example.org.",
		"loop1.example. 60 IN CNAME loop2.example.",
		"loop2.example. 60 IN CNAME loop1.example.",
		"*.wild.example. 60 IN A 10.0.0.9",
		"_http._tcp.example. 60 IN SRV 0 10 80 www.example.",
		"_http._tcp.example. 60 IN SRV 0 10 80 svc.corp.",
		"_http._tcp.example. 60 IN SRV 0 10 80 host.remote.test.",
		"mail.example. 60 IN MX 10 www.example.",
		"example.org. 60 IN NS ns1.example.org.",
		"ns1.example.org. 60 IN A 10.0.0.53",
	}
	// k0 → k1 → … → k8 (8 CNAMEs) → A; l0 → … → l9 (9 CNAMEs) → A.
	for i := range 8 {
		recs = append(recs, fmt.Sprintf("k%d.example. 60 IN CNAME k%d.example.", i, i+1))
	}
	recs = append(recs, "k8.example. 60 IN A 10.0.8.8")
	for i := range 9 {
		recs = append(recs, fmt.Sprintf("l%d.example. 60 IN CNAME l%d.example.", i, i+1))
	}
	recs = append(recs, "l9.example. 60 IN A 10.0.9.9")
	f.hosts = newFake(t, "hosts", 60, 7, recs...)
	f.hosts.ents["b.example."] = true
	f.hosts.ents["wild.example."] = true // the wildcard's parent
	f.etcd = newFake(t, "etcd", 300, 9,
		"only-etcd.example. 300 IN A 10.0.0.2",
		"ns.dns.example. 300 IN A 192.0.2.53",
	)
	f.kube = newFake(t, "kubernetes", 5, 3,
		"svc.corp. 5 IN A 10.1.0.1",
		"svc.corp. 5 IN AAAA fd00::1",
	)
	f.afterKube = newFake(t, "hosts", 60, 11, "after.corp. 60 IN A 10.1.0.2")
	f.failing = newFake(t, "etcd", 30, 1)
	f.failing.fail = errors.New("etcd not synced yet")
	f.afterFail = newFake(t, "hosts", 60, 1, "x.fail.test. 60 IN A 10.2.0.1")
	f.ft1 = newFake(t, "hosts", 10, 1)
	f.ft2 = newFake(t, "hosts", 20, 2)
	f.rootHosts = newFake(t, "hosts", 3600, 1, "localhost. 3600 IN A 127.0.0.1")
	f.fwd = newForward(t,
		"host.remote.test. 120 IN A 203.0.113.7",
		"srv.remote.test. 120 IN SRV 0 0 53 www.example.",
	)
	p, err := New([]ZoneSpec{
		{Names: []string{"example.", "Example.Org"}, Sources: []SourceEntry{{f.hosts, true}, {f.etcd, false}}},
		{Names: []string{"corp."}, Sources: []SourceEntry{{f.kube, false}, {f.afterKube, true}}},
		{Names: []string{"fail.test."}, Sources: []SourceEntry{{f.failing, true}, {f.afterFail, true}}},
		{Names: []string{"allft.test."}, Sources: []SourceEntry{{f.ft1, true}, {f.ft2, true}}},
		{Names: []string{"."}, Sources: []SourceEntry{{f.rootHosts, true}, {f.fwd, true}}},
	}, Options{
		NSAddrs: []netip.Addr{netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("2001:db8::53")},
		Logger:  slog.New(slog.NewTextHandler(f.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	f.p = p
	return f
}

// query resolves qname (as a client wrote it) through p.
func query(p *Pipeline, qname string, qtype uint16) Response {
	m := new(dns.Msg)
	m.SetQuestion(qname, qtype)
	return p.Resolve(context.Background(), &Request{Msg: m, Name: strings.ToLower(qname), Type: qtype})
}

func rrStrings(rrs []dns.RR) []string {
	out := make([]string, 0, len(rrs))
	for _, rr := range rrs {
		out = append(out, rr.String())
	}
	return out
}

// checkSections compares m's answer, authority and additional sections
// with the expected records (zone-file text, in order).
func checkSections(t *testing.T, m *dns.Msg, answer, ns, extra []string) {
	t.Helper()
	for _, sec := range []struct {
		name      string
		got, want []string
	}{
		{"answer", rrStrings(m.Answer), canon(t, answer)},
		{"authority", rrStrings(m.Ns), canon(t, ns)},
		{"additional", rrStrings(m.Extra), canon(t, extra)},
	} {
		if !reflect.DeepEqual(sec.got, sec.want) {
			t.Errorf("%s section:\n got  %q\n want %q", sec.name, sec.got, sec.want)
		}
	}
}

// canon renders expected records the way dns.RR.String does.
func canon(t *testing.T, recs []string) []string {
	t.Helper()
	out := make([]string, 0, len(recs))
	for _, s := range recs {
		out = append(out, dnstest.MustRR(t, s).String())
	}
	return out
}

func soa(zone string, serial, ttl uint32) string {
	ns, mbox := "ns.dns."+zone, "hostmaster."+zone
	if zone == "." {
		ns, mbox = "ns.dns.", "hostmaster."
	}
	return fmt.Sprintf("%s %d IN SOA %s %s %d 14400 3600 1209600 %d", zone, ttl, ns, mbox, serial, ttl)
}

func TestResolve(t *testing.T) {
	const (
		A, AAAA, NS, SOA, CNAME, MX, SRV, TXT, ANY = dns.TypeA, dns.TypeAAAA, dns.TypeNS, dns.TypeSOA,
			dns.TypeCNAME, dns.TypeMX, dns.TypeSRV, dns.TypeTXT, dns.TypeANY
		noerr, nx, servfail = dns.RcodeSuccess, dns.RcodeNameError, dns.RcodeServerFailure
	)
	exampleSOA300 := soa("example.", 9, 300) // etcd (ttl 300) answered; serial max(7, 9)
	exampleSOA60 := soa("example.", 9, 60)   // hosts (ttl 60) answered
	cases := []struct {
		name   string
		qname  string
		qtype  uint16
		rcode  int
		aa     bool
		answer []string
		ns     []string
		extra  []string
		source string
		zone   string
	}{
		// Direct answers and type selection.
		{name: "A hit", qname: "www.example.", qtype: A, aa: true, source: "hosts", zone: "example.",
			answer: []string{"www.example. 60 IN A 10.0.0.1"}},
		{name: "AAAA hit", qname: "www.example.", qtype: AAAA, aa: true, source: "hosts", zone: "example.",
			answer: []string{"www.example. 60 IN AAAA 2001:db8::1"}},
		{name: "mixed case owner as written", qname: "WwW.ExAmPle.", qtype: A, aa: true, source: "hosts", zone: "example.",
			answer: []string{"WwW.ExAmPle. 60 IN A 10.0.0.1"}},
		{name: "wildcard owner rewritten", qname: "x.Wild.example.", qtype: A, aa: true, source: "hosts", zone: "example.",
			answer: []string{"x.Wild.example. 60 IN A 10.0.0.9"}},

		// Fallthrough, NXDOMAIN, SERVFAIL.
		{name: "fallthrough to next source", qname: "only-etcd.example.", qtype: A, aa: true, source: "etcd", zone: "example.",
			answer: []string{"only-etcd.example. 300 IN A 10.0.0.2"}},
		{name: "NXDOMAIN from last source without fallthrough", qname: "nope.example.", qtype: A, rcode: nx, aa: true,
			source: "etcd", zone: "example.", ns: []string{exampleSOA300}},
		{name: "fallthrough off stops at first source", qname: "after.corp.", qtype: A, rcode: nx, aa: true,
			source: "kubernetes", zone: "corp.", ns: []string{soa("corp.", 11, 5)}},
		{name: "NXDOMAIN after every source fell through", qname: "nope.allft.test.", qtype: A, rcode: nx, aa: true,
			source: "", zone: "allft.test.", ns: []string{soa("allft.test.", 2, 20)}},
		{name: "source failure is SERVFAIL even with fallthrough", qname: "x.fail.test.", qtype: A, rcode: servfail,
			source: "etcd", zone: "fail.test."},

		// NODATA, empty non-terminal.
		{name: "NODATA", qname: "www.example.", qtype: MX, aa: true, source: "hosts", zone: "example.",
			ns: []string{exampleSOA60}},
		{name: "empty non-terminal is NODATA", qname: "b.example.", qtype: A, aa: true, source: "hosts", zone: "example.",
			ns: []string{exampleSOA60}},

		// Apex.
		// The apex SOA and NS have the first local source's TTL (hosts,
		// 60), as a transfer gives them; negative answers the answering
		// source's.
		{name: "apex SOA synthesized", qname: "example.", qtype: SOA, aa: true, source: "etcd", zone: "example.",
			answer: []string{exampleSOA60}},
		{name: "apex SOA keeps query case", qname: "EXAMPLE.", qtype: SOA, aa: true, source: "etcd", zone: "example.",
			answer: []string{"EXAMPLE. 60 IN SOA ns.dns.example. hostmaster.example. 9 14400 3600 1209600 60"}},
		{name: "apex NS synthesized, glue from source data", qname: "example.", qtype: NS, aa: true, source: "etcd", zone: "example.",
			answer: []string{"example. 60 IN NS ns.dns.example."},
			extra:  []string{"ns.dns.example. 300 IN A 192.0.2.53"}},
		{name: "apex NS from source, glue from source", qname: "example.org.", qtype: NS, aa: true, source: "hosts", zone: "example.org.",
			answer: []string{"example.org. 60 IN NS ns1.example.org."},
			extra:  []string{"ns1.example.org. 60 IN A 10.0.0.53"}},
		{name: "apex SOA of second name of a zone key", qname: "example.org.", qtype: SOA, aa: true, source: "hosts", zone: "example.org.",
			answer: []string{soa("example.org.", 9, 60)}},
		{name: "apex NS synthesized, glue from NSAddrs", qname: "corp.", qtype: NS, aa: true, source: "kubernetes", zone: "corp.",
			answer: []string{"corp. 5 IN NS ns.dns.corp."},
			extra:  []string{"ns.dns.corp. 5 IN A 192.0.2.1", "ns.dns.corp. 5 IN AAAA 2001:db8::53"}},
		{name: "apex other type is NODATA, never NXDOMAIN", qname: "example.", qtype: TXT, aa: true, source: "etcd", zone: "example.",
			ns: []string{exampleSOA300}},
		{name: "ns.dns.<zone> from NSAddrs", qname: "ns.dns.example.org.", qtype: A, aa: true, source: "etcd", zone: "example.org.",
			answer: []string{"ns.dns.example.org. 60 IN A 192.0.2.1"}},
		{name: "ns.dns.<zone> AAAA from NSAddrs", qname: "ns.dns.corp.", qtype: AAAA, aa: true, source: "kubernetes", zone: "corp.",
			answer: []string{"ns.dns.corp. 5 IN AAAA 2001:db8::53"}},
		{name: "ns.dns.<zone> from source data", qname: "ns.dns.example.", qtype: A, aa: true, source: "etcd", zone: "example.",
			answer: []string{"ns.dns.example. 300 IN A 192.0.2.53"}},
		{name: "dns.<zone>, parent of ns.dns.<zone>, is NODATA", qname: "dns.corp.", qtype: A, aa: true, source: "kubernetes", zone: "corp.",
			ns: []string{soa("corp.", 11, 5)}},
		{name: "dns.<zone> ANY is NODATA", qname: "dns.corp.", qtype: ANY, aa: true, source: "kubernetes", zone: "corp.",
			ns: []string{soa("corp.", 11, 5)}},
		{name: "below dns.<zone> is NXDOMAIN", qname: "x.dns.corp.", qtype: A, rcode: nx, aa: true, source: "kubernetes", zone: "corp.",
			ns: []string{soa("corp.", 11, 5)}},
		{name: "ns.dns.<zone> other type NODATA", qname: "ns.dns.corp.", qtype: TXT, aa: true, source: "kubernetes", zone: "corp.",
			ns: []string{soa("corp.", 11, 5)}},

		// CNAME chasing.
		{name: "CNAME in zone", qname: "alias.example.", qtype: A, aa: true, source: "hosts", zone: "example.",
			answer: []string{"alias.example. 60 IN CNAME www.example.", "www.example. 60 IN A 10.0.0.1"}},
		{name: "CNAME query returns the CNAME only", qname: "alias.example.", qtype: CNAME, aa: true, source: "hosts", zone: "example.",
			answer: []string{"alias.example. 60 IN CNAME www.example."}},
		{name: "CNAME chain owners as written in targets", qname: "Alias2.Example.", qtype: A, aa: true, source: "hosts", zone: "example.",
			answer: []string{"Alias2.Example. 60 IN CNAME ALIAS.example.", "ALIAS.example. 60 IN CNAME www.example.", "www.example. 60 IN A 10.0.0.1"}},
		{name: "CNAME to NODATA target", qname: "alias.example.", qtype: MX, aa: true, source: "hosts", zone: "example.",
			answer: []string{"alias.example. 60 IN CNAME www.example."}, ns: []string{exampleSOA60}},
		{name: "CNAME to missing target is NXDOMAIN", qname: "dangling.example.", qtype: A, rcode: nx, aa: true, source: "hosts", zone: "example.",
			answer: []string{"dangling.example. 60 IN CNAME missing.example."}, ns: []string{exampleSOA300}},
		{name: "CNAME into another local zone", qname: "other.example.", qtype: A, aa: true, source: "hosts", zone: "example.",
			answer: []string{"other.example. 60 IN CNAME svc.corp.", "svc.corp. 5 IN A 10.1.0.1"}},
		{name: "CNAME into another zone, NXDOMAIN carries that zone's SOA", qname: "other2.example.", qtype: A, rcode: nx, aa: true,
			source: "hosts", zone: "example.",
			answer: []string{"other2.example. 60 IN CNAME nope.corp."}, ns: []string{soa("corp.", 11, 5)}},
		{name: "CNAME into the other name of the same zone key", qname: "nowhere.example.", qtype: A, rcode: nx, aa: true,
			source: "hosts", zone: "example.",
			answer: []string{"nowhere.example. 60 IN CNAME www.example.org."}, ns: []string{soa("example.org.", 9, 300)}},
		{name: "CNAME completed by forward", qname: "ext.example.", qtype: A, aa: true, source: "hosts", zone: "example.",
			answer: []string{"ext.example. 60 IN CNAME host.remote.test.", "host.remote.test. 120 IN A 203.0.113.7"}},
		{name: "CNAME to forward NXDOMAIN", qname: "ext2.example.", qtype: A, rcode: nx, aa: true, source: "hosts", zone: "example.",
			answer: []string{"ext2.example. 60 IN CNAME nope.remote.test."},
			ns:     []string{". 900 IN SOA a.root-servers.net. nstld.verisign-grs.com. 2024010100 1800 900 604800 86400"}},
		{name: "CNAME into failing zone is SERVFAIL", qname: "bad.example.", qtype: A, rcode: servfail, source: "hosts", zone: "example."},
		{name: "CNAME loop stops with the chain", qname: "loop1.example.", qtype: A, aa: true, source: "hosts", zone: "example.",
			answer: []string{"loop1.example. 60 IN CNAME loop2.example.", "loop2.example. 60 IN CNAME loop1.example."}},

		// ANY (RFC 8482).
		{name: "ANY returns one RRset", qname: "www.example.", qtype: ANY, aa: true, source: "hosts", zone: "example.",
			answer: []string{"www.example. 60 IN A 10.0.0.1"}},
		{name: "ANY on empty non-terminal is NODATA", qname: "b.example.", qtype: ANY, aa: true, source: "hosts", zone: "example.",
			ns: []string{exampleSOA60}},
		{name: "ANY on missing name is NXDOMAIN", qname: "nope.example.", qtype: ANY, rcode: nx, aa: true, source: "etcd", zone: "example.",
			ns: []string{exampleSOA300}},
		{name: "ANY at apex is the SOA", qname: "corp.", qtype: ANY, aa: true, source: "kubernetes", zone: "corp.",
			answer: []string{soa("corp.", 11, 5)}},

		// Additional section.
		{name: "SRV targets' addresses, local only", qname: "_http._tcp.example.", qtype: SRV, aa: true, source: "hosts", zone: "example.",
			answer: []string{
				"_http._tcp.example. 60 IN SRV 0 10 80 www.example.",
				"_http._tcp.example. 60 IN SRV 0 10 80 svc.corp.",
				"_http._tcp.example. 60 IN SRV 0 10 80 host.remote.test.",
			},
			extra: []string{
				"www.example. 60 IN A 10.0.0.1", "www.example. 60 IN AAAA 2001:db8::1",
				"svc.corp. 5 IN A 10.1.0.1", "svc.corp. 5 IN AAAA fd00::1",
			}},
		{name: "MX target addresses", qname: "mail.example.", qtype: MX, aa: true, source: "hosts", zone: "example.",
			answer: []string{"mail.example. 60 IN MX 10 www.example."},
			extra:  []string{"www.example. 60 IN A 10.0.0.1", "www.example. 60 IN AAAA 2001:db8::1"}},

		// Root zone and forward.
		{name: "root zone local source", qname: "localhost.", qtype: A, aa: true, source: "hosts", zone: ".",
			answer: []string{"localhost. 3600 IN A 127.0.0.1"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			resp := query(f.p, tc.qname, tc.qtype)
			m := resp.Msg
			if m == nil {
				t.Fatal("nil message")
			}
			if m.Rcode != tc.rcode {
				t.Errorf("rcode = %s, want %s", dns.RcodeToString[m.Rcode], dns.RcodeToString[tc.rcode])
			}
			if !m.Response || m.Authoritative != tc.aa || m.RecursionAvailable {
				t.Errorf("QR=%v AA=%v RA=%v, want QR=true AA=%v RA=false", m.Response, m.Authoritative, m.RecursionAvailable, tc.aa)
			}
			if resp.Source != tc.source || resp.Zone != tc.zone {
				t.Errorf("source, zone = %q, %q; want %q, %q", resp.Source, resp.Zone, tc.source, tc.zone)
			}
			checkSections(t, m, tc.answer, tc.ns, tc.extra)
			if len(m.Question) != 1 || m.Question[0].Name != tc.qname || m.Question[0].Qtype != tc.qtype {
				t.Errorf("question = %v, want the client's", m.Question)
			}
		})
	}
}

func TestRefusedWithoutZone(t *testing.T) {
	src := newFake(t, "hosts", 60, 1, "www.example. 60 IN A 10.0.0.1")
	p, err := New([]ZoneSpec{{Names: []string{"example."}, Sources: []SourceEntry{{src, true}}}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"www.example.com.", "example.com.", ".", "xample."} {
		resp := query(p, name, dns.TypeA)
		if resp.Msg.Rcode != dns.RcodeRefused || resp.Zone != "" || resp.Source != "" || len(resp.Msg.Answer) != 0 || resp.Msg.Authoritative {
			t.Errorf("%s: rcode %s zone %q source %q AA %v answer %v; want REFUSED, no zone, no answer",
				name, dns.RcodeToString[resp.Msg.Rcode], resp.Zone, resp.Source, resp.Msg.Authoritative, resp.Msg.Answer)
		}
	}
	if q := src.questions(); len(q) != 0 {
		t.Errorf("source asked %v for names outside its zone", q)
	}
}

func TestFallthroughOffNeverAsksNext(t *testing.T) {
	f := newFixture(t)
	query(f.p, "after.corp.", dns.TypeA)
	if q := f.afterKube.questions(); len(q) != 0 {
		t.Errorf("source after a no-fallthrough source was asked %v", q)
	}
	if q := f.kube.questions(); !reflect.DeepEqual(q, []string{"after.corp. A"}) {
		t.Errorf("kubernetes asked %v", q)
	}
}

func TestFailedNeverFallsThrough(t *testing.T) {
	f := newFixture(t)
	resp := query(f.p, "x.fail.test.", dns.TypeA)
	if resp.Msg.Rcode != dns.RcodeServerFailure {
		t.Fatalf("rcode %s, want SERVFAIL", dns.RcodeToString[resp.Msg.Rcode])
	}
	if q := f.afterFail.questions(); len(q) != 0 {
		t.Errorf("source after a failed one was asked %v (names must not leak)", q)
	}
	if q := f.fwd.questions(); len(q) != 0 {
		t.Errorf("forward asked %v", q)
	}
	if logs := f.logs.String(); !strings.Contains(logs, "etcd not synced yet") || !strings.Contains(logs, "level=DEBUG") {
		t.Errorf("failure not logged at debug: %q", logs)
	}
}

func TestAnsweredPassthrough(t *testing.T) {
	f := newFixture(t)
	resp := query(f.p, "host.remote.test.", dns.TypeA)
	f.fwd.mu.Lock()
	last := f.fwd.last
	f.fwd.mu.Unlock()
	if resp.Msg != last {
		t.Fatalf("forward's message not returned as is")
	}
	if resp.Source != kindForward || resp.Zone != "." {
		t.Errorf("source, zone = %q, %q", resp.Source, resp.Zone)
	}
	if !resp.Msg.RecursionAvailable || resp.Msg.Authoritative || len(resp.Msg.Answer) != 1 {
		t.Errorf("upstream answer altered: %v", resp.Msg)
	}
	if q := f.rootHosts.questions(); !reflect.DeepEqual(q, []string{"host.remote.test. A"}) {
		t.Errorf("local source before forward asked %v", q)
	}
}

// An upstream's answer to ANY is trimmed to one RRset (RFC 8482), on a
// copy: the upstream's message (which may be a cache entry) is untouched.
func TestForwardedANYIsMinimal(t *testing.T) {
	fwd := newForward(t, "multi.remote.test. 60 IN A 192.0.2.1", "multi.remote.test. 60 IN A 192.0.2.2",
		"multi.remote.test. 60 IN AAAA 2001:db8::1", "multi.remote.test. 60 IN TXT \"x\"")
	p, err := New([]ZoneSpec{{Names: []string{"."}, Sources: []SourceEntry{{Source: fwd}}}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	resp := query(p, "multi.remote.test.", dns.TypeANY)
	if len(resp.Msg.Answer) != 2 {
		t.Fatalf("ANY answer has %d records, want the 2 of the first RRset: %v", len(resp.Msg.Answer), resp.Msg.Answer)
	}
	for _, rr := range resp.Msg.Answer {
		if rr.Header().Rrtype != dns.TypeA {
			t.Errorf("ANY answer holds %s", rr)
		}
	}
	fwd.mu.Lock()
	left := len(fwd.last.Answer)
	fwd.mu.Unlock()
	if left != 4 {
		t.Errorf("the upstream's message was modified: %d records left", left)
	}
	// A single RRset is returned as it is.
	resp = query(p, "multi.remote.test.", dns.TypeA)
	fwd.mu.Lock()
	last := fwd.last
	fwd.mu.Unlock()
	if resp.Msg != last {
		t.Errorf("an A answer was copied")
	}
}

func TestAdditionalsNeverForwarded(t *testing.T) {
	f := newFixture(t)
	query(f.p, "_http._tcp.example.", dns.TypeSRV)
	if q := f.fwd.questions(); len(q) != 0 {
		t.Errorf("forward asked %v for additional records", q)
	}
}

// A source is remote because it implements Remote, whatever its Kind: a
// remote one is never asked for additional records, a local one is, even
// one whose Kind is "forward".
func TestRemoteIsACapability(t *testing.T) {
	remote := newForward(t, "srv.remote.test. 120 IN SRV 0 0 53 host.remote.test.", "host.remote.test. 120 IN A 203.0.113.7")
	remote.kind = "resolver"
	p, err := New([]ZoneSpec{{Names: []string{"."}, Sources: []SourceEntry{{Source: remote}}}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	query(p, "srv.remote.test.", dns.TypeSRV)
	if q := remote.questions(); !slices.Equal(q, []string{"srv.remote.test. SRV"}) {
		t.Errorf("a Remote source named %q was asked %q, want only the query", remote.kind, q)
	}
	local := newFake(t, "forward", 60, 1, "srv.local.test. 60 IN SRV 0 0 53 host.local.test.", "host.local.test. 60 IN A 10.0.0.7")
	p, err = New([]ZoneSpec{{Names: []string{"local.test."}, Sources: []SourceEntry{{Source: local}}}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	r := query(p, "srv.local.test.", dns.TypeSRV)
	if got := rrStrings(r.Msg.Extra); !slices.Contains(got, "host.local.test.\t60\tIN\tA\t10.0.0.7") {
		t.Errorf("a local source whose Kind is \"forward\" gave no additional records: %q", got)
	}
}

func TestCNAMELimit(t *testing.T) {
	f := newFixture(t)
	var want []string
	for i := range 8 {
		want = append(want, fmt.Sprintf("k%d.example.\t60\tIN\tCNAME\tk%d.example.", i, i+1))
	}
	want = append(want, "k8.example.\t60\tIN\tA\t10.0.8.8")
	resp := query(f.p, "k0.example.", dns.TypeA)
	if got := rrStrings(resp.Msg.Answer); !reflect.DeepEqual(got, want) || resp.Msg.Rcode != dns.RcodeSuccess {
		t.Errorf("8-link chain: rcode %d answer\n%q\nwant\n%q", resp.Msg.Rcode, got, want)
	}

	asked := len(f.hosts.questions())
	resp = query(f.p, "l0.example.", dns.TypeA)
	got := rrStrings(resp.Msg.Answer)
	if resp.Msg.Rcode != dns.RcodeSuccess || len(got) != MaxCNAMELinks {
		t.Fatalf("9-link chain: rcode %d, %d records, want NOERROR with %d CNAMEs: %q", resp.Msg.Rcode, len(got), MaxCNAMELinks, got)
	}
	if last := got[len(got)-1]; last != "l7.example.\t60\tIN\tCNAME\tl8.example." {
		t.Errorf("last record %q", last)
	}
	if q := f.hosts.questions()[asked:]; len(q) != MaxCNAMELinks+1 {
		t.Errorf("hosts asked %d times for a 9-link chain, want %d: %v", len(q), MaxCNAMELinks+1, q)
	}
}

func TestCNAMELoopAsksEachNameOnce(t *testing.T) {
	f := newFixture(t)
	query(f.p, "loop1.example.", dns.TypeA)
	if q := f.hosts.questions(); !reflect.DeepEqual(q, []string{"loop1.example. A", "loop2.example. A"}) {
		t.Errorf("asked %v", q)
	}
}

func TestCNAMETargetOutsideZones(t *testing.T) {
	src := newFake(t, "hosts", 60, 1, "alias.example. 60 IN CNAME www.example.com.")
	p, err := New([]ZoneSpec{{Names: []string{"example."}, Sources: []SourceEntry{{src, false}}}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	resp := query(p, "alias.example.", dns.TypeA)
	want := []string{"alias.example.\t60\tIN\tCNAME\twww.example.com."}
	if got := rrStrings(resp.Msg.Answer); resp.Msg.Rcode != dns.RcodeSuccess || !reflect.DeepEqual(got, want) || len(resp.Msg.Ns) != 0 {
		t.Errorf("rcode %d answer %q ns %v; want NOERROR with the CNAME", resp.Msg.Rcode, got, resp.Msg.Ns)
	}
}

func TestSourceRecordsNeverMutated(t *testing.T) {
	f := newFixture(t)
	before := f.hosts.snapshot()
	for _, q := range []struct {
		name  string
		qtype uint16
	}{
		{"WWW.EXAMPLE.", dns.TypeA}, {"Alias2.Example.", dns.TypeA}, {"x.WILD.example.", dns.TypeA},
		{"_HTTP._tcp.example.", dns.TypeSRV}, {"Mail.Example.", dns.TypeMX}, {"WWW.example.", dns.TypeANY},
		{"Example.Org.", dns.TypeNS},
	} {
		resp := query(f.p, q.name, q.qtype)
		if len(resp.Msg.Answer) == 0 {
			t.Fatalf("%s: no answer", q.name)
		}
		if got := resp.Msg.Answer[0].Header().Name; got != q.name {
			t.Errorf("%s: answer owner %q, want the name as written", q.name, got)
		}
	}
	if after := f.hosts.snapshot(); !reflect.DeepEqual(before, after) {
		t.Errorf("source records changed:\nbefore %v\nafter  %v", before, after)
	}
}

func TestLowerCaseAnswerSharesSourceRecords(t *testing.T) {
	f := newFixture(t)
	resp := query(f.p, "www.example.", dns.TypeA)
	if len(resp.Msg.Answer) != 1 || resp.Msg.Answer[0] != f.hosts.rrs["www.example."][0] {
		t.Errorf("answer to a lower-case query is not the source's record (needless copy)")
	}
}

func TestSerialFollowsSources(t *testing.T) {
	f := newFixture(t)
	serial := func() uint32 {
		t.Helper()
		resp := query(f.p, "example.", dns.TypeSOA)
		s, ok := resp.Msg.Answer[0].(*dns.SOA)
		if !ok {
			t.Fatalf("answer %v", resp.Msg.Answer)
		}
		return s.Serial
	}
	if s := serial(); s != 9 {
		t.Fatalf("serial %d, want 9 (max of 7, 9)", s)
	}
	f.hosts.serial.Store(12)
	if s := serial(); s != 12 {
		t.Errorf("serial %d after hosts changed to 12", s)
	}
}

func TestQuestionToSources(t *testing.T) {
	src := newFake(t, "hosts", 60, 1)
	var got []Question
	rec := &recordingSource{Source: src, got: &got}
	p, err := New([]ZoneSpec{{Names: []string{"example."}, Sources: []SourceEntry{{rec, true}}}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	m := new(dns.Msg)
	m.SetQuestion("Www.Example.", dns.TypeAAAA)
	p.Resolve(context.Background(), &Request{Msg: m, Name: "www.example.", Type: dns.TypeAAAA, DO: true, CD: true})
	want := []Question{{Name: "www.example.", Type: dns.TypeAAAA, DO: true, CD: true, Zone: "example."}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("questions %+v, want %+v", got, want)
	}
}

type recordingSource struct {
	Source
	got *[]Question
}

func (r *recordingSource) Lookup(ctx context.Context, q *Question) Result {
	*r.got = append(*r.got, *q)
	return r.Source.Lookup(ctx, q)
}

func TestMatch(t *testing.T) {
	src := newFake(t, "hosts", 60, 1)
	mk := func(root bool) *Pipeline {
		specs := []ZoneSpec{
			{Names: []string{"example.", "sub.example."}, Sources: []SourceEntry{{src, true}}},
			{Names: []string{"cluster.local.", "10.in-addr.arpa."}, Sources: []SourceEntry{{src, false}}},
		}
		if root {
			specs = append(specs, ZoneSpec{Names: []string{"."}, Sources: []SourceEntry{{src, true}}})
		}
		p, err := New(specs, Options{})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	withRoot, noRoot := mk(true), mk(false)
	for _, tc := range []struct {
		name     string
		zone     string // with "." configured
		noRootOK bool
	}{
		{"example.", "example.", true},
		{"www.example.", "example.", true},
		{"sub.example.", "sub.example.", true},
		{"a.b.sub.example.", "sub.example.", true},
		{"xsub.example.", "example.", true},
		{`a\.sub.example.`, "example.", true}, // escaped dot: one label "a.sub"
		{"svc.ns.svc.cluster.local.", "cluster.local.", true},
		{"4.3.2.10.in-addr.arpa.", "10.in-addr.arpa.", true},
		{"4.3.2.11.in-addr.arpa.", ".", false},
		{"local.", ".", false},
		{"example.com.", ".", false},
		{"xample.", ".", false},
		{".", ".", false},
	} {
		if z, ok := withRoot.Match(tc.name); !ok || z != tc.zone {
			t.Errorf("with root: Match(%q) = %q, %v; want %q", tc.name, z, ok, tc.zone)
		}
		z, ok := noRoot.Match(tc.name)
		if ok != tc.noRootOK || (ok && z != tc.zone) {
			t.Errorf("without root: Match(%q) = %q, %v", tc.name, z, ok)
		}
	}
}

func TestNew(t *testing.T) {
	a := newFake(t, "hosts", 60, 1)
	b := newFake(t, "etcd", 60, 1)
	for _, tc := range []struct {
		name  string
		zones []ZoneSpec
		err   string
	}{
		{"duplicate across specs, case and dot insensitive", []ZoneSpec{
			{Names: []string{"example."}, Sources: []SourceEntry{{a, true}}},
			{Names: []string{"Example"}, Sources: []SourceEntry{{b, true}}},
		}, `zone "example." declared twice`},
		{"duplicate in one spec", []ZoneSpec{
			{Names: []string{"a.", "a."}, Sources: []SourceEntry{{a, true}}},
		}, `zone "a." declared twice`},
		{"empty source list", []ZoneSpec{{Names: []string{"example."}}}, `zone "example.": empty source list`},
		{"no names", []ZoneSpec{{Sources: []SourceEntry{{a, true}}}}, "no zone name"},
		{"empty name", []ZoneSpec{{Names: []string{""}, Sources: []SourceEntry{{a, true}}}}, "not a domain name"},
		{"nil source", []ZoneSpec{{Names: []string{"x."}, Sources: []SourceEntry{{nil, true}}}}, "source 0 is nil"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := New(tc.zones, Options{})
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("New = %v, %v; want error containing %q", p, err, tc.err)
			}
		})
	}

	p, err := New([]ZoneSpec{
		{Names: []string{"a.", "b."}, Sources: []SourceEntry{{a, true}, {b, true}}},
		{Names: []string{"c."}, Sources: []SourceEntry{{b, true}}},
	}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Sources(); len(got) != 2 || got[0] != Source(a) || got[1] != Source(b) {
		t.Errorf("Sources() = %v, want [hosts etcd] once each", got)
	}
}

// TestConcurrentResolve runs mixed queries from several goroutines; with
// -race it proves the pipeline shares nothing mutable between queries.
func TestConcurrentResolve(t *testing.T) {
	f := newFixture(t)
	queries := []struct {
		name  string
		qtype uint16
		first string // first answer record, "" for none
	}{
		{"WWW.example.", dns.TypeA, "WWW.example.\t60\tIN\tA\t10.0.0.1"},
		{"Alias2.Example.", dns.TypeA, "Alias2.Example.\t60\tIN\tCNAME\tALIAS.example."},
		{"_http._tcp.example.", dns.TypeSRV, "_http._tcp.example.\t60\tIN\tSRV\t0 10 80 www.example."},
		{"nope.example.", dns.TypeA, ""},
		{"ext.example.", dns.TypeA, "ext.example.\t60\tIN\tCNAME\thost.remote.test."},
	}
	errc := make(chan error, 4)
	for g := range 4 {
		go func() {
			for i := range 200 {
				q := queries[(g+i)%len(queries)]
				m := query(f.p, q.name, q.qtype).Msg
				var first string
				if len(m.Answer) > 0 {
					first = m.Answer[0].String()
				}
				if first != q.first {
					errc <- fmt.Errorf("%s: first answer %q, want %q", q.name, first, q.first)
					return
				}
			}
			errc <- nil
		}()
	}
	for range 4 {
		if err := <-errc; err != nil {
			t.Error(err)
		}
	}
}

func TestSerialClock(t *testing.T) {
	var c SerialClock
	now := uint32(time.Now().Unix())
	prev := c.Next()
	if prev < now {
		t.Fatalf("Next = %d, before the Unix time %d", prev, now)
	}
	for range 100 {
		s := c.Next()
		if s <= prev {
			t.Fatalf("Next = %d after %d", s, prev)
		}
		prev = s
	}
	var none *SerialClock
	if s := none.Next(); s < now {
		t.Fatalf("nil clock: Next = %d, before the Unix time %d", s, now)
	}
}

func TestInZone(t *testing.T) {
	for _, c := range []struct {
		name, zone string
		want       bool
	}{
		{"example.com.", "example.com.", true},
		{"a.example.com.", "example.com.", true},
		{"a.b.example.com.", "example.com.", true},
		{"aexample.com.", "example.com.", false},
		{"com.", "example.com.", false},
		{"example.org.", "example.com.", false},
		{"anything.", ".", true},
		{".", ".", true},
	} {
		if got := InZone(c.name, c.zone); got != c.want {
			t.Errorf("InZone(%q, %q) = %v, want %v", c.name, c.zone, got, c.want)
		}
	}
}

// In the root zone, the names a local source holds only as empty
// non-terminals (the parents of /etc/hosts names) are the world's: the
// forward source after it answers them, unless it says NXDOMAIN, which
// would deny the local names below (then NODATA). A name with records
// of another type is the local source's (NODATA, not forwarded), and so
// is an empty non-terminal of a named zone (TestEmptyNonTerminalYieldsToRecords).
func TestRootEmptyNonTerminalForwarded(t *testing.T) {
	hosts := newFake(t, "hosts", 60, 10, "myhost.example.com. 60 IN A 127.0.1.1").entsBelow(".")
	fwd := newForward(t, "example.com. 300 IN MX 10 mail.example.com.", "com. 300 IN NS a.gtld-servers.net.")
	p, err := New([]ZoneSpec{{Names: []string{"."}, Sources: []SourceEntry{{Source: hosts, Fallthrough: true}, {Source: fwd, Fallthrough: true}}}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		qt     uint16
		want   string // rcode and answer
		source string
	}{
		{"example.com.", dns.TypeMX, "NOERROR [example.com.\t300\tIN\tMX\t10 mail.example.com.]", kindForward},
		{"com.", dns.TypeNS, "NOERROR [com.\t300\tIN\tNS\ta.gtld-servers.net.]", kindForward},
		{"example.com.", dns.TypeA, "NOERROR []", kindForward}, // the upstream's NODATA
		{"myhost.example.com.", dns.TypeAAAA, "NOERROR []", "hosts"},
	} {
		r := query(p, tc.name, tc.qt)
		if got := dns.RcodeToString[r.Msg.Rcode] + " " + fmt.Sprint(rrStrings(r.Msg.Answer)); got != tc.want || r.Source != tc.source {
			t.Errorf("%s %s: %s from %q, want %s from %q", tc.name, dns.TypeToString[tc.qt], got, r.Source, tc.want, tc.source)
		}
	}
	if q := fwd.questions(); !slices.Equal(q, []string{"example.com. MX", "com. NS", "example.com. A"}) {
		t.Errorf("forwarded %q", q)
	}
	// An upstream NXDOMAIN for a parent of local names: NODATA, with the
	// zone's SOA, authoritative.
	hosts2 := newFake(t, "hosts", 60, 10, "db.corp.invalid. 60 IN A 10.0.0.9").entsBelow(".")
	p, err = New([]ZoneSpec{{Names: []string{"."}, Sources: []SourceEntry{{Source: hosts2, Fallthrough: true}, {Source: newForward(t), Fallthrough: true}}}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	r := query(p, "corp.invalid.", dns.TypeA)
	if r.Msg.Rcode != dns.RcodeSuccess || len(r.Msg.Answer) != 0 || r.Source != "hosts" || !r.Msg.Authoritative || len(r.Msg.Ns) != 1 {
		t.Errorf("corp.invalid. A: %v from %q, want NODATA from hosts", r.Msg, r.Source)
	}
}

// An empty non-terminal in one source does not hide another local
// source's records at that name (a hosts file's names above a zone file's
// apex records); with no local records it is NODATA, never forwarded.
// The apex SOA is the zone's whichever source holds a SOA record.
func TestEmptyNonTerminalYieldsToRecords(t *testing.T) {
	hosts := newFake(t, "hosts", 60, 10, "db.example. 60 IN A 10.0.0.1", "x.y.example. 60 IN A 10.0.0.2")
	hosts.ents["example."] = true
	hosts.ents["y.example."] = true
	file := newFake(t, "file", 300, 20, "example. 300 IN MX 10 mail.example.", "example. 300 IN SOA a. b. 7 1 2 3 4")
	fwd := newForward(t)
	p, err := New([]ZoneSpec{{Names: []string{"example."}, Sources: []SourceEntry{
		{Source: hosts, Fallthrough: true}, {Source: file, Fallthrough: true}, {Source: fwd, Fallthrough: true},
	}}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	r := query(p, "example.", dns.TypeMX)
	if got := rrStrings(r.Msg.Answer); len(got) != 1 || !strings.Contains(got[0], "MX\t10 mail.example.") || r.Source != "file" {
		t.Errorf("apex MX behind another source's empty non-terminal: %v from %q", got, r.Source)
	}
	r = query(p, "y.example.", dns.TypeA)
	if r.Msg.Rcode != dns.RcodeSuccess || len(r.Msg.Answer) != 0 || len(fwd.questions()) != 0 {
		t.Errorf("an empty non-terminal no local source has records at: rcode %d answer %v, forwarded %v; want NODATA, not forwarded",
			r.Msg.Rcode, r.Msg.Answer, fwd.questions())
	}
	r = query(p, "example.", dns.TypeSOA)
	if soa, ok := r.Msg.Answer[0].(*dns.SOA); !ok || soa.Serial != 20 || soa.Ns != "ns.dns.example." {
		t.Errorf("apex SOA %v: want the zone's (ns.dns.example., the largest serial 20), not one source's record", r.Msg.Answer)
	}
}

// unsyncedFake is a fakeSource that reports not being synced.
type unsyncedFake struct{ *fakeSource }

func (unsyncedFake) Synced() bool                     { return false }
func (unsyncedFake) WaitSynced(context.Context) error { return nil }

// TestFailureEDE: a source that is not synced fails with EDE 14 (Not
// Ready), unless it failed because no server it depends on answered
// (a secondary zone past its expire): EDE 22 (No Reachable Authority).
func TestFailureEDE(t *testing.T) {
	for _, c := range []struct {
		err  error
		want uint16
	}{
		{errors.New("not loaded"), dns.ExtendedErrorCodeNotReady},
		{fmt.Errorf("%w: the zone expired", ErrUnreachable), dns.ExtendedErrorCodeNoReachableAuthority},
	} {
		f := newFake(t, "secondary", 60, 1)
		f.fail = c.err
		p, err := New([]ZoneSpec{{Names: []string{"example."}, Sources: []SourceEntry{{Source: unsyncedFake{f}}}}}, Options{})
		if err != nil {
			t.Fatal(err)
		}
		m := query(p, "www.example.", dns.TypeA).Msg
		var got []uint16
		for _, rr := range m.Extra {
			if opt, ok := rr.(*dns.OPT); ok {
				for _, o := range opt.Option {
					if e, ok := o.(*dns.EDNS0_EDE); ok {
						got = append(got, e.InfoCode)
					}
				}
			}
		}
		if m.Rcode != dns.RcodeServerFailure || len(got) != 1 || got[0] != c.want {
			t.Errorf("%v: rcode %s, EDE %v; want SERVFAIL, EDE %d", c.err, dns.RcodeToString[m.Rcode], got, c.want)
		}
	}
}
