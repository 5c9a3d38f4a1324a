package pipeline

import (
	"context"
	"errors"
	"net/netip"
	"reflect"
	"slices"
	"testing"

	"github.com/miekg/dns"

	"github.com/dnsd/dnsd/internal/dnstest"
)

// wildFixture is the example zone of RFC 4592 §2.2.1, split over two
// local sources so that the rules are seen to apply to the merged zone:
//
//	example.: wild (kind "hosts", ttl 60, fallthrough) → data (kind "file",
//	ttl 300, no fallthrough)
//
// wild holds the wildcards, data the ordinary names. Each derives its
// empty non-terminals as a real source does.
func wildFixture(t *testing.T) (p *Pipeline, wild, data *fakeSource) {
	t.Helper()
	wild = newFake(t, "hosts", 60, 5,
		`*.example. 3600 IN TXT "this is a wildcard"`,
		"*.example. 3600 IN MX 10 host1.example.",
		`sub.*.example. 3600 IN TXT "this is not a wildcard"`,
		"*.apps.example. 60 IN A 10.0.0.80",
		"*.cn.example. 60 IN CNAME host1.example.",
		"_http._tcp.example. 60 IN SRV 0 0 80 web.apps.example.",
	).entsBelow("example.")
	data = newFake(t, "file", 300, 9,
		"host1.example. 300 IN A 192.0.2.1",
		"_ssh._tcp.host1.example. 300 IN SRV 0 0 22 host1.example.",
		"_ssh._tcp.host2.example. 300 IN SRV 0 0 22 host2.example.",
		"alias.example. 300 IN CNAME foo.apps.example.",
	).entsBelow("example.")
	p, err := New([]ZoneSpec{{Names: []string{"example."}, Sources: []SourceEntry{{wild, true}, {data, false}}}},
		Options{NSAddrs: []netip.Addr{netip.MustParseAddr("192.0.2.53")}})
	if err != nil {
		t.Fatal(err)
	}
	return p, wild, data
}

func TestWildcardRFC4592(t *testing.T) {
	const (
		A, MX, TXT, SRV, CNAME, ANY = dns.TypeA, dns.TypeMX, dns.TypeTXT, dns.TypeSRV, dns.TypeCNAME, dns.TypeANY
		noerr, nx                   = dns.RcodeSuccess, dns.RcodeNameError
	)
	soaWild := soa("example.", 9, 60)  // the wildcard's source (ttl 60) answered
	soaData := soa("example.", 9, 300) // data (ttl 300) answered, or was the last asked
	host1 := "host1.example. 300 IN A 192.0.2.1"
	cases := []struct {
		name   string
		qname  string
		qtype  uint16
		rcode  int
		answer []string
		ns     []string
		extra  []string
		source string
	}{
		// RFC 4592 §2.2.1: answered by a wildcard.
		{name: "synthesized from *.example.", qname: "host3.example.", qtype: MX, source: "hosts",
			answer: []string{"host3.example. 3600 IN MX 10 host1.example."}, extra: []string{host1}},
		{name: "NODATA at a wildcard match", qname: "host3.example.", qtype: A, source: "hosts", ns: []string{soaWild}},
		{name: "several labels matched", qname: "foo.bar.example.", qtype: TXT, source: "hosts",
			answer: []string{`foo.bar.example. 3600 IN TXT "this is a wildcard"`}},

		// RFC 4592 §2.2.1: not answered by a wildcard.
		{name: "existing name in another source", qname: "host1.example.", qtype: MX, source: "file", ns: []string{soaData}},
		{name: "existing name below the wildcard", qname: "sub.*.example.", qtype: MX, source: "hosts", ns: []string{soaWild}},
		{name: "below an existing empty non-terminal", qname: "_telnet._tcp.host1.example.", qtype: SRV, rcode: nx,
			source: "file", ns: []string{soaData}},
		{name: "the wildcard is the closest encloser", qname: "ghost.*.example.", qtype: MX, rcode: nx,
			source: "file", ns: []string{soaData}},
		{name: "empty non-terminal", qname: "host2.example.", qtype: A, source: "file", ns: []string{soaData}},
		{name: "below an empty non-terminal", qname: "x.host2.example.", qtype: A, rcode: nx, source: "file", ns: []string{soaData}},
		{name: "below an existing name", qname: "x.host1.example.", qtype: A, rcode: nx, source: "file", ns: []string{soaData}},
		{name: "the wildcard's parent is an empty non-terminal", qname: "apps.example.", qtype: A, source: "hosts", ns: []string{soaWild}},
		// At the apex TTL: the first local source's.
		{name: "ns.dns.<zone> stays synthesized", qname: "ns.dns.example.", qtype: A, source: "file",
			answer: []string{"ns.dns.example. 60 IN A 192.0.2.53"}},
		{name: "dns.<zone> exists above ns.dns.<zone>", qname: "dns.example.", qtype: A, source: "file", ns: []string{soaData}},
		{name: "below dns.<zone>", qname: "x.dns.example.", qtype: A, rcode: nx, source: "file", ns: []string{soaData}},

		// Below a deeper wildcard, CNAME, ANY, additional section.
		{name: "deeper wildcard wins", qname: "web.apps.example.", qtype: A, source: "hosts",
			answer: []string{"web.apps.example. 60 IN A 10.0.0.80"}},
		{name: "deeper wildcard, several labels", qname: "a.b.apps.example.", qtype: A, source: "hosts",
			answer: []string{"a.b.apps.example. 60 IN A 10.0.0.80"}},
		{name: "owner as the client wrote it", qname: "Web.APPS.example.", qtype: A, source: "hosts",
			answer: []string{"Web.APPS.example. 60 IN A 10.0.0.80"}},
		{name: "the wildcard itself", qname: "*.apps.example.", qtype: A, source: "hosts",
			answer: []string{"*.apps.example. 60 IN A 10.0.0.80"}},
		{name: "CNAME at a wildcard is chased", qname: "x.cn.example.", qtype: A, source: "hosts",
			answer: []string{"x.cn.example. 60 IN CNAME host1.example.", host1}},
		{name: "CNAME at a wildcard, CNAME query", qname: "x.cn.example.", qtype: CNAME, source: "hosts",
			answer: []string{"x.cn.example. 60 IN CNAME host1.example."}},
		{name: "CNAME target matched by a wildcard", qname: "alias.example.", qtype: A, source: "file",
			answer: []string{"alias.example. 300 IN CNAME foo.apps.example.", "foo.apps.example. 60 IN A 10.0.0.80"}},
		{name: "ANY at a synthesized name is minimal", qname: "host3.example.", qtype: ANY, source: "hosts",
			answer: []string{`host3.example. 3600 IN TXT "this is a wildcard"`}},
		{name: "SRV target matched by a wildcard gets its address", qname: "_http._tcp.example.", qtype: SRV, source: "hosts",
			answer: []string{"_http._tcp.example. 60 IN SRV 0 0 80 web.apps.example."},
			extra:  []string{"web.apps.example. 60 IN A 10.0.0.80"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, _, _ := wildFixture(t)
			resp := query(p, tc.qname, tc.qtype)
			m := resp.Msg
			if m.Rcode != tc.rcode || !m.Authoritative {
				t.Errorf("rcode %s AA %v, want %s AA", dns.RcodeToString[m.Rcode], m.Authoritative, dns.RcodeToString[tc.rcode])
			}
			if resp.Source != tc.source {
				t.Errorf("source %q, want %q", resp.Source, tc.source)
			}
			checkSections(t, m, tc.answer, tc.ns, tc.extra)
		})
	}
}

// The closest encloser is searched for from the query name up, every
// local source asked about each ancestor, then the sources with wildcards
// about "*.<closest encloser>"; a name found directly costs nothing more.
func TestWildcardQuestions(t *testing.T) {
	p, wild, data := wildFixture(t)
	query(p, "x.y.apps.example.", dns.TypeA)
	if got, want := wild.questions(), []string{"x.y.apps.example. A", "y.apps.example. A", "apps.example. A", "*.apps.example. A"}; !slices.Equal(got, want) {
		t.Errorf("wildcard source asked %q, want %q", got, want)
	}
	if got, want := data.questions(), []string{"x.y.apps.example. A", "y.apps.example. A"}; !slices.Equal(got, want) {
		t.Errorf("data source asked %q, want %q (never for a wildcard: it holds none)", got, want)
	}

	p, wild, data = wildFixture(t)
	query(p, "host1.example.", dns.TypeA)
	if got, want := append(wild.questions(), data.questions()...), []string{"host1.example. A", "host1.example. A"}; !slices.Equal(got, want) {
		t.Errorf("existing name: asked %q, want %q", got, want)
	}
}

// Sources without wildcards are asked about the query name only, as
// before wildcards existed.
func TestNoWildcardsNoSearch(t *testing.T) {
	a := newFake(t, "hosts", 60, 1, "www.example. 60 IN A 10.0.0.1").entsBelow("example.")
	b := newFake(t, "file", 60, 1, "a.b.example. 60 IN A 10.0.0.2").entsBelow("example.")
	p, err := New([]ZoneSpec{{Names: []string{"example."}, Sources: []SourceEntry{{a, true}, {b, true}}}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if resp := query(p, "x.b.example.", dns.TypeA); resp.Msg.Rcode != dns.RcodeNameError {
		t.Errorf("rcode %s, want NXDOMAIN", dns.RcodeToString[resp.Msg.Rcode])
	}
	want := []string{"x.b.example. A"}
	if !slices.Equal(a.questions(), want) || !slices.Equal(b.questions(), want) {
		t.Errorf("asked %q and %q, want %q each", a.questions(), b.questions(), want)
	}
}

// A hosts wildcard under "." answers before the name would be forwarded;
// names it does not cover are forwarded as before.
func TestWildcardBeforeForward(t *testing.T) {
	hosts := newFake(t, "hosts", 60, 1, "*.apps.internal. 60 IN A 10.0.0.80").entsBelow(".")
	fwd := newForward(t, "www.example.com. 120 IN A 203.0.113.7")
	p, err := New([]ZoneSpec{{Names: []string{"."}, Sources: []SourceEntry{{hosts, true}, {fwd, true}}}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	resp := query(p, "x.apps.internal.", dns.TypeA)
	if got, want := rrStrings(resp.Msg.Answer), canon(t, []string{"x.apps.internal. 60 IN A 10.0.0.80"}); !slices.Equal(got, want) ||
		resp.Source != "hosts" || !resp.Msg.Authoritative {
		t.Errorf("answer %q source %q AA %v, want %q from hosts", got, resp.Source, resp.Msg.Authoritative, want)
	}
	// The wildcard's parent exists, only as an empty non-terminal: in the
	// root zone the upstream is asked, and its NXDOMAIN gives way to
	// NODATA, never a wildcard answer.
	resp = query(p, "apps.internal.", dns.TypeA)
	if resp.Msg.Rcode != dns.RcodeSuccess || len(resp.Msg.Answer) != 0 || resp.Source != "hosts" {
		t.Errorf("apps.internal.: rcode %s answer %v source %q, want NODATA from hosts",
			dns.RcodeToString[resp.Msg.Rcode], resp.Msg.Answer, resp.Source)
	}
	resp = query(p, "www.example.com.", dns.TypeA)
	if got := rrStrings(resp.Msg.Answer); len(got) != 1 || resp.Source != kindForward {
		t.Errorf("www.example.com.: answer %q source %q, want the forwarded answer", got, resp.Source)
	}
	if q := fwd.questions(); !slices.Equal(q, []string{"apps.internal. A", "www.example.com. A"}) {
		t.Errorf("forwarded %q", q)
	}
}

// A source without fallthrough ends the sources that count: wildcards
// after it are never seen, and names after it never hide its wildcards.
func TestWildcardFallthroughOff(t *testing.T) {
	plain := newFake(t, "kubernetes", 5, 1, "svc.example. 5 IN A 10.1.0.1")
	wild := newFake(t, "hosts", 60, 1, "*.example. 60 IN A 10.0.0.80")
	p, err := New([]ZoneSpec{{Names: []string{"example."}, Sources: []SourceEntry{{plain, false}, {wild, true}}}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if resp := query(p, "x.example.", dns.TypeA); resp.Msg.Rcode != dns.RcodeNameError || resp.Source != "kubernetes" {
		t.Errorf("wildcard behind a source without fallthrough: rcode %s source %q, want NXDOMAIN from kubernetes",
			dns.RcodeToString[resp.Msg.Rcode], resp.Source)
	}
	if q := wild.questions(); len(q) != 0 {
		t.Errorf("source after fallthrough: false asked %q", q)
	}

	wild = newFake(t, "hosts", 60, 1, "*.example. 60 IN A 10.0.0.80")
	after := newFake(t, "file", 60, 1, "x.example. 60 IN A 10.0.0.1")
	p, err = New([]ZoneSpec{{Names: []string{"example."}, Sources: []SourceEntry{{wild, false}, {after, true}}}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	resp := query(p, "x.example.", dns.TypeA)
	if got := rrStrings(resp.Msg.Answer); !slices.Equal(got, canon(t, []string{"x.example. 60 IN A 10.0.0.80"})) || resp.Source != "hosts" {
		t.Errorf("answer %q source %q, want the wildcard of the source without fallthrough", got, resp.Source)
	}
	if q := after.questions(); len(q) != 0 {
		t.Errorf("source after fallthrough: false asked %q", q)
	}
}

// A source failing while the closest encloser is searched for gives
// SERVFAIL: the name must not be answered (or forwarded) on a guess.
func TestWildcardSearchFailure(t *testing.T) {
	wild := newFake(t, "hosts", 60, 1, "*.example. 60 IN A 10.0.0.80")
	flaky := newFake(t, "etcd", 30, 1)
	flaky.failAt = map[string]error{"y.example.": errors.New("backend lost")}
	p, err := New([]ZoneSpec{{Names: []string{"example."}, Sources: []SourceEntry{{wild, true}, {flaky, true}}}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	resp := query(p, "x.y.example.", dns.TypeA)
	if resp.Msg.Rcode != dns.RcodeServerFailure || resp.Source != "etcd" || len(resp.Msg.Answer) != 0 {
		t.Errorf("rcode %s source %q answer %v, want SERVFAIL from etcd", dns.RcodeToString[resp.Msg.Rcode], resp.Source, resp.Msg.Answer)
	}
	if resp := query(p, "x.example.", dns.TypeA); len(resp.Msg.Answer) != 1 { // not asked about y.example.
		t.Errorf("x.example.: answer %v, want the wildcard", resp.Msg.Answer)
	}
}

// A wildcard under the root zone: "*." is the closest encloser's wildcard
// for a name whose ancestors do not exist.
func TestWildcardAtRoot(t *testing.T) {
	src := newFake(t, "hosts", 60, 1, "*. 60 IN A 10.0.0.1", "a.b. 60 IN A 10.0.0.2").entsBelow(".")
	p, err := New([]ZoneSpec{{Names: []string{"."}, Sources: []SourceEntry{{src, true}}}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := rrStrings(query(p, "x.y.", dns.TypeA).Msg.Answer); !slices.Equal(got, canon(t, []string{"x.y. 60 IN A 10.0.0.1"})) {
		t.Errorf("x.y.: answer %q", got)
	}
	if resp := query(p, "x.b.", dns.TypeA); resp.Msg.Rcode != dns.RcodeNameError {
		t.Errorf("x.b. (below the existing b.): rcode %s, want NXDOMAIN", dns.RcodeToString[resp.Msg.Rcode])
	}
}

func TestWildcardNeverMutatesSourceRecords(t *testing.T) {
	p, wild, _ := wildFixture(t)
	before := wild.snapshot()
	for _, q := range []struct {
		name  string
		qtype uint16
	}{
		{"Host3.Example.", dns.TypeMX}, {"x.cn.example.", dns.TypeA}, {"A.B.Apps.Example.", dns.TypeA},
		{"host3.example.", dns.TypeANY}, {"_http._tcp.example.", dns.TypeSRV},
	} {
		resp := query(p, q.name, q.qtype)
		if len(resp.Msg.Answer) == 0 || resp.Msg.Answer[0].Header().Name != q.name {
			t.Errorf("%s: answer %v, want records owned by the name as written", q.name, resp.Msg.Answer)
		}
	}
	if after := wild.snapshot(); !reflect.DeepEqual(before, after) {
		t.Errorf("source records changed:\nbefore %v\nafter  %v", before, after)
	}
}

func TestParent(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"a.b.", "b."}, {"b.", "."}, {".", ""}, {`a\.b.c.`, "c."}, {`a\\.b.`, "b."}, {`a\046b.c.`, "c."},
	} {
		if got := Parent(tc.in); got != tc.want {
			t.Errorf("parent(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func BenchmarkResolveWildcard(b *testing.B) {
	src := benchPipelineSource(b)
	wild := &benchSource{wild: true, rrs: map[string][]dns.RR{
		"*.apps.example.internal.": {dnstest.MustRR(b, "*.apps.example.internal. 60 IN A 10.0.0.80")},
		"apps.example.internal.":   nil,
	}}
	p, err := New([]ZoneSpec{{Names: []string{"example.internal."}, Sources: []SourceEntry{{src, true}, {wild, true}}}}, Options{})
	if err != nil {
		b.Fatal(err)
	}
	req := aRequest("web.apps.example.internal.")
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if resp := p.Resolve(ctx, req); len(resp.Msg.Answer) != 1 {
			b.Fatal("no answer")
		}
	}
}
