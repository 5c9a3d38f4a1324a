package authority

import (
	"context"
	"errors"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/dnsd/dnsd/internal/dnstest"
	"github.com/dnsd/dnsd/internal/logtest"
	"github.com/dnsd/dnsd/pipeline"
)

var loopback = netip.MustParseAddr("127.0.0.1")

func xfrRequest(zone string, qtype uint16, serial uint32) *Request {
	m := new(dns.Msg)
	if qtype == dns.TypeIXFR {
		m.SetIxfr(zone, serial, "ns.", "mbox.")
	} else {
		m.SetAxfr(zone)
	}
	wire, _ := m.Pack()
	return &Request{Msg: m, Wire: wire, Client: loopback}
}

func xfrStrings(rrs []dns.RR) []string {
	out := make([]string, len(rrs))
	for i, rr := range rrs {
		out[i] = strings.Join(strings.Fields(rr.String()), " ")
	}
	return out
}

func TestTransferPrecedence(t *testing.T) {
	first := listFake{newFake(t, "hosts", 60, 10,
		"www.example. 60 IN A 10.0.0.1",
		"a.b.example. 60 IN A 10.0.0.2",
		"*.apps.example. 60 IN A 10.0.0.80",
	)}
	second := listFake{newFake(t, "etcd", 300, 20,
		"www.example. 300 IN A 10.9.9.9",      // shadowed: first has www
		"www.example. 300 IN TXT \"hidden\"",  // shadowed too (whole name)
		"b.example. 300 IN A 10.9.9.8",        // shadowed: an empty non-terminal of first
		"db.example. 300 IN A 10.0.0.5",       // only here
		"x.sub.example. 300 IN A 10.0.0.6",    // another configured zone
		"example. 300 IN NS ns1.example.",     // apex NS from a source: no synthesized NS
		"example. 300 IN SOA a. b. 1 2 3 4 5", // a source's SOA is never listed
		"x.apps.example. 300 IN A 10.0.0.81",  // shadowed by first's wildcard
		"elsewhere.org. 300 IN A 10.0.0.7",    // not in the zone
	)}
	first.ents["b.example."] = true
	after := listFake{newFake(t, "hosts", 60, 30, "late.example. 60 IN A 10.0.0.9")} // after fallthrough: false
	fwd := newForward(t)
	p, err := newGen([]pipeline.ZoneSpec{
		{Names: []string{"example."}, Sources: []pipeline.SourceEntry{
			{Source: first, Fallthrough: true}, {Source: fwd, Fallthrough: true}, {Source: second}, {Source: after, Fallthrough: true},
		}},
		{Names: []string{"sub.example."}, Sources: []pipeline.SourceEntry{{Source: second}}},
	}, genOptions{
		Serial:    5,
		NSAddrs:   []netip.Addr{loopback},
		Transfers: []TransferSpec{{Zones: []string{"example"}, Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	res := p.Transfer(context.Background(), xfrRequest("EXAMPLE.", dns.TypeAXFR, 0))
	if res.Rcode != dns.RcodeSuccess || res.Zone != "example." {
		t.Fatalf("rcode %d zone %q err %v", res.Rcode, res.Zone, res.Err)
	}
	got := xfrStrings(res.RRs)
	soa := "example. 60 IN SOA ns.dns.example. hostmaster.example. 30 14400 3600 1209600 60" // the largest serial of the zone's sources
	want := []string{
		soa,
		"*.apps.example. 60 IN A 10.0.0.80",
		"a.b.example. 60 IN A 10.0.0.2",
		"www.example. 60 IN A 10.0.0.1",
		"db.example. 300 IN A 10.0.0.5",
		"example. 300 IN NS ns1.example.",
		"x.apps.example. 300 IN A 10.0.0.81",
		soa,
	}
	if !slices.Equal(got, want) {
		t.Errorf("transfer:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if q := fwd.questions(); len(q) != 0 {
		t.Errorf("the forward source was asked %q", q)
	}

	// IXFR: an up-to-date or newer serial gets the SOA alone, an older one
	// the whole zone; serials compare in RFC 1982 arithmetic.
	for _, tc := range []struct {
		serial uint32
		n      int
	}{{30, 1}, {31, 1}, {29, len(want)}, {30 + 1<<31 + 1, len(want)}, {30 + 1<<31 - 1, 1}} {
		res := p.Transfer(context.Background(), xfrRequest("example.", dns.TypeIXFR, tc.serial))
		if res.Rcode != dns.RcodeSuccess || len(res.RRs) != tc.n {
			t.Errorf("IXFR from %d: %d records, want %d", tc.serial, len(res.RRs), tc.n)
		}
	}

	// A source that cannot list fails the transfer (never an empty zone);
	// the listing of the previous version is not served for the new one.
	second.fail = errors.New("not synced")
	second.serial.Store(40)
	if res := p.Transfer(context.Background(), xfrRequest("example.", dns.TypeAXFR, 0)); res.Rcode != dns.RcodeServerFailure || res.Err == nil {
		t.Errorf("unsynced source: rcode %d err %v, want SERVFAIL", res.Rcode, res.Err)
	}
}

func TestTransferPolicy(t *testing.T) {
	src := listFake{newFake(t, "hosts", 60, 10, "www.example. 60 IN A 10.0.0.1")}
	key := &TSIGKey{Name: "xfr-key.", Algorithm: dns.HmacSHA256, Secret: "c2VjcmV0LXNlY3JldC1zZWNyZXQ="}
	p, err := newGen([]pipeline.ZoneSpec{
		{Names: []string{"example.", "signed.", "unlisted.", "far."}, Sources: []pipeline.SourceEntry{{Source: src, Fallthrough: true}}},
	}, genOptions{Transfers: []TransferSpec{
		{Zones: []string{"example."}, Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}},
		{Zones: []string{"signed."}, Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}, Key: key},
		{Zones: []string{"far."}, Allow: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	sign := func(req *Request, name, secret string, at time.Time) *Request {
		req.Msg.SetTsig(name, dns.HmacSHA256, 300, at.Unix())
		wire, _, err := dns.TsigGenerate(req.Msg, secret, "", false)
		if err != nil {
			t.Fatal(err)
		}
		req.Wire = wire
		if err := req.Msg.Unpack(wire); err != nil {
			t.Fatal(err)
		}
		return req
	}
	now := time.Now()
	for _, tc := range []struct {
		name    string
		req     *Request
		rcode   int
		tsigErr uint16
		zone    string
	}{
		{"listed", xfrRequest("example.", dns.TypeAXFR, 0), dns.RcodeSuccess, 0, "example."},
		{"unlisted", xfrRequest("unlisted.", dns.TypeAXFR, 0), dns.RcodeRefused, 0, ""},
		{"below a zone", xfrRequest("www.example.", dns.TypeAXFR, 0), dns.RcodeRefused, 0, ""},
		{"outside allow", xfrRequest("far.", dns.TypeAXFR, 0), dns.RcodeRefused, 0, "far."},
		{"unsigned", xfrRequest("signed.", dns.TypeAXFR, 0), dns.RcodeRefused, 0, "signed."},
		{"signed", sign(xfrRequest("signed.", dns.TypeAXFR, 0), "xfr-key.", key.Secret, now), dns.RcodeSuccess, 0, "signed."},
		{"other key", sign(xfrRequest("signed.", dns.TypeAXFR, 0), "other.", key.Secret, now), dns.RcodeNotAuth, dns.RcodeBadKey, "signed."},
		{"bad MAC", sign(xfrRequest("signed.", dns.TypeAXFR, 0), "xfr-key.", "b3RoZXI=", now), dns.RcodeNotAuth, dns.RcodeBadSig, "signed."},
		{"old", sign(xfrRequest("signed.", dns.TypeAXFR, 0), "xfr-key.", key.Secret, now.Add(-time.Hour)), dns.RcodeNotAuth, dns.RcodeBadTime, "signed."},
		// An item without a key, asked with another item's key (BIND
		// signs every request to a server it has a key for): answered,
		// signed with that key; with an unknown key or a bad MAC, not.
		{"signed without a key", sign(xfrRequest("example.", dns.TypeAXFR, 0), "xfr-key.", key.Secret, now), dns.RcodeSuccess, 0, "example."},
		{"unknown key without a key", sign(xfrRequest("example.", dns.TypeAXFR, 0), "other.", key.Secret, now), dns.RcodeNotAuth, dns.RcodeBadKey, "example."},
		{"bad MAC without a key", sign(xfrRequest("example.", dns.TypeAXFR, 0), "xfr-key.", "b3RoZXI=", now), dns.RcodeNotAuth, dns.RcodeBadSig, "example."},
	} {
		res := p.Transfer(context.Background(), tc.req)
		if res.Rcode != tc.rcode || res.TSIGError != tc.tsigErr || res.Zone != tc.zone {
			t.Errorf("%s: rcode %d tsig error %d zone %q, want %d %d %q", tc.name, res.Rcode, res.TSIGError, res.Zone, tc.rcode, tc.tsigErr, tc.zone)
		}
		if (tc.name == "signed" || tc.name == "signed without a key") && (res.Key != key || res.RequestMAC == "") {
			t.Errorf("%s: key %v MAC %q: the answer would not be signed", tc.name, res.Key, res.RequestMAC)
		}
	}
	if _, err := newGen([]pipeline.ZoneSpec{{Names: []string{"example."}, Sources: []pipeline.SourceEntry{{Source: src}}}},
		genOptions{Transfers: []TransferSpec{{Zones: []string{"nowhere."}}, {Zones: []string{"example."}}, {Zones: []string{"example."}}}}); err == nil {
		t.Error("transfers of an unknown zone and of a zone twice compiled")
	}
}

// TestOwnSOA: a zone whose only local source holds the zone's SOA (a zone
// file) keeps it, serial as written; with another local source, or when
// the source's serial does not follow its data (inline records beside the
// file), it is still the file's SOA but with dnsd's own serial.
func TestOwnSOA(t *testing.T) {
	own := &dns.SOA{Hdr: dns.RR_Header{Name: "example.", Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: 3600},
		Ns: "ns1.example.", Mbox: "admin.example.", Serial: 2024010101, Refresh: 7200, Retry: 600, Expire: 86400, Minttl: 300}
	file := soaFake{listFake{newFake(t, "file", 300, 4000000000, "www.example. 300 IN A 10.0.0.1")}, own, false}
	other := listFake{newFake(t, "hosts", 60, 50, "db.example. 60 IN A 10.0.0.2")}
	spec := TransferSpec{Zones: []string{"example."}, Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}

	alone, err := newGen([]pipeline.ZoneSpec{{Names: []string{"example."}, Sources: []pipeline.SourceEntry{{Source: file}, {Source: newForward(t)}}}},
		genOptions{Serial: 99, Transfers: []TransferSpec{spec}})
	if err != nil {
		t.Fatal(err)
	}
	if got := alone.ZoneSOA("example."); got.Serial != own.Serial || got.Ns != own.Ns || got.Refresh != own.Refresh {
		t.Errorf("zone file alone: SOA %v, want the file's", got)
	}
	res := alone.Transfer(context.Background(), xfrRequest("example.", dns.TypeAXFR, 0))
	if first := res.RRs[0].(*dns.SOA); first.Serial != own.Serial {
		t.Errorf("transfer starts with %v, want the file's SOA", first)
	}
	r := alone.Resolve(context.Background(), &pipeline.Request{Name: "nx.example.", Type: dns.TypeA})
	if len(r.Msg.Ns) != 1 || r.Msg.Ns[0].(*dns.SOA).Serial != own.Serial {
		t.Errorf("negative answer's SOA %v, want the file's", r.Msg.Ns)
	}

	mixed, err := newGen([]pipeline.ZoneSpec{{Names: []string{"example."}, Sources: []pipeline.SourceEntry{{Source: file, Fallthrough: true}, {Source: other}}}},
		genOptions{Serial: 99, Transfers: []TransferSpec{spec}})
	if err != nil {
		t.Fatal(err)
	}
	if got := mixed.ZoneSOA("example."); got.Serial != 4000000000 || got.Ns != own.Ns || got.Mbox != own.Mbox ||
		got.Refresh != own.Refresh || got.Retry != own.Retry || got.Expire != own.Expire || got.Minttl != own.Minttl || got.Hdr.Ttl != own.Hdr.Ttl {
		t.Errorf("file and hosts: SOA %v, want the file's with dnsd's serial (the largest, 4000000000)", got)
	}
	if first := mixed.Transfer(context.Background(), xfrRequest("example.", dns.TypeAXFR, 0)).RRs[0].(*dns.SOA); first.Serial != 4000000000 || first.Ns != own.Ns {
		t.Errorf("file and hosts: transfer starts with %v, want the file's SOA with dnsd's serial", first)
	}
	r = mixed.Resolve(context.Background(), &pipeline.Request{Name: "nx.example.", Type: dns.TypeA})
	if len(r.Msg.Ns) != 1 || r.Msg.Ns[0].(*dns.SOA).Ns != own.Ns || r.Msg.Ns[0].(*dns.SOA).Serial != 4000000000 || r.Msg.Ns[0].Header().Ttl != own.Minttl {
		t.Errorf("file and hosts: negative answer's SOA %v, want the file's with dnsd's serial, TTL its minimum %d", r.Msg.Ns, own.Minttl)
	}

	inline := soaFake{listFake{newFake(t, "file", 300, 3000000000, "www.example. 300 IN A 10.0.0.1")}, own, true}
	withRecords, err := newGen([]pipeline.ZoneSpec{{Names: []string{"example."}, Sources: []pipeline.SourceEntry{{Source: inline}}}},
		genOptions{Serial: 99, Transfers: []TransferSpec{spec}})
	if err != nil {
		t.Fatal(err)
	}
	if got := withRecords.ZoneSOA("example."); got.Serial != 3000000000 || got.Ns != own.Ns || got.Mbox != own.Mbox {
		t.Errorf("zone file with inline records: SOA %v, want the file's with dnsd's serial 3000000000", got)
	}
	r = withRecords.Resolve(context.Background(), &pipeline.Request{Name: "example.", Type: dns.TypeSOA})
	if len(r.Msg.Answer) != 1 || r.Msg.Answer[0].(*dns.SOA).Ns != own.Ns || r.Msg.Answer[0].(*dns.SOA).Serial != 3000000000 {
		t.Errorf("zone file with inline records: SOA query %v", r.Msg.Answer)
	}
}

// The apex SOA, NS and ns.dns address a query gets carry the TTL a
// transfer gives them (the first local source's), whichever source holds
// the apex: a secondary then serves what dnsd serves.
func TestApexTTLAsTransferred(t *testing.T) {
	hosts := listFake{newFake(t, "hosts", 60, 50, "www.example. 60 IN A 10.0.0.1")}
	file := listFake{newFake(t, "file", 3600, 40, "example. 3600 IN MX 10 www.example.")}
	p, err := newGen([]pipeline.ZoneSpec{{Names: []string{"example."}, Sources: []pipeline.SourceEntry{{Source: hosts, Fallthrough: true}, {Source: file, Fallthrough: true}}}},
		genOptions{Serial: 99, NSAddrs: []netip.Addr{netip.MustParseAddr("127.0.0.1")},
			Transfers: []TransferSpec{{Zones: []string{"example."}, Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}}})
	if err != nil {
		t.Fatal(err)
	}
	xfr := map[uint16]uint32{}
	for _, rr := range p.Transfer(context.Background(), xfrRequest("example.", dns.TypeAXFR, 0)).RRs {
		if h := rr.Header(); h.Name == "example." || h.Name == "ns.dns.example." {
			xfr[h.Rrtype] = h.Ttl
		}
	}
	for _, c := range []struct {
		name  string
		qtype uint16
	}{{"example.", dns.TypeSOA}, {"example.", dns.TypeNS}, {"ns.dns.example.", dns.TypeA}} {
		r := p.Resolve(context.Background(), &pipeline.Request{Name: c.name, Type: c.qtype})
		if len(r.Msg.Answer) == 0 {
			t.Fatalf("%s %s: no answer", c.name, dns.TypeToString[c.qtype])
		}
		if got := r.Msg.Answer[0].Header().Ttl; got != 60 || got != xfr[c.qtype] {
			t.Errorf("%s %s: TTL %d, the transfer's %d, want 60 both", c.name, dns.TypeToString[c.qtype], got, xfr[c.qtype])
		}
	}
	// The NS answer's additional ns.dns address carries the same TTL as
	// the address asked for directly.
	r := p.Resolve(context.Background(), &pipeline.Request{Name: "example.", Type: dns.TypeNS})
	var extra []dns.RR
	for _, rr := range r.Msg.Extra {
		if rr.Header().Name == "ns.dns.example." {
			extra = append(extra, rr)
		}
	}
	if len(extra) == 0 || extra[0].Header().Ttl != 60 {
		t.Errorf("NS additional section: %v, want ns.dns.example. with TTL 60", r.Msg.Extra)
	}
}

// A transfer leaves out CNAMEs beside other data at their name (the apex
// included) and every CNAME of a name but the first: Knot and other
// secondaries refuse such a zone and then take none of its changes.
// Records beside them, and lone CNAMEs, stay.
func TestTransferLeavesOutCNAMEConflicts(t *testing.T) {
	etcd := listFake{newFake(t, "etcd", 60, 50,
		"mix.example. 60 IN A 10.0.0.1", "mix.example. 60 IN CNAME web.example.",
		"example. 60 IN CNAME web.example.",
		"two.example. 60 IN CNAME a.example.", "two.example. 60 IN CNAME b.example.",
		"alias.example. 60 IN CNAME web.example.", "web.example. 60 IN A 10.0.0.2")}
	p, err := newGen([]pipeline.ZoneSpec{{Names: []string{"example."}, Sources: []pipeline.SourceEntry{{Source: etcd}}}},
		genOptions{Serial: 99, Transfers: []TransferSpec{{Zones: []string{"example."}, Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}}})
	if err != nil {
		t.Fatal(err)
	}
	var cnames []string
	a := 0
	for _, rr := range p.Transfer(context.Background(), xfrRequest("example.", dns.TypeAXFR, 0)).RRs {
		switch c := rr.(type) {
		case *dns.CNAME:
			cnames = append(cnames, c.Hdr.Name+" "+c.Target)
		case *dns.A:
			a++
		}
	}
	slices.Sort(cnames)
	if want := []string{"alias.example. web.example.", "two.example. a.example."}; !slices.Equal(cnames, want) {
		t.Errorf("CNAMEs transferred %q, want %q", cnames, want)
	}
	if a != 2 {
		t.Errorf("%d A records transferred, want 2 (mix and web)", a)
	}
}

// TestTransferKeepsSignedCNAME: a signed zone's CNAME has its RRSIG and
// NSEC beside it (RFC 4035 section 2.5): they are not other data, and all
// three are transferred; a CNAME beside an A record is still left out.
func TestTransferKeepsSignedCNAME(t *testing.T) {
	file := listFake{newFake(t, "file", 300, 50,
		"alias.example. 300 IN CNAME www.example.",
		"alias.example. 300 IN RRSIG CNAME 13 2 300 20270103002832 20261204002832 15233 example. AAAA",
		"alias.example. 60 IN NSEC www.example. CNAME RRSIG NSEC",
		"alias.example. 60 IN RRSIG NSEC 13 2 60 20270103002832 20261204002832 15233 example. AAAA",
		"mix.example. 300 IN CNAME www.example.", "mix.example. 300 IN A 10.0.0.1",
		"www.example. 300 IN A 10.0.0.10")}
	p, err := newGen([]pipeline.ZoneSpec{{Names: []string{"example."}, Sources: []pipeline.SourceEntry{{Source: file}}}},
		genOptions{Transfers: []TransferSpec{{Zones: []string{"example."}, Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}}})
	if err != nil {
		t.Fatal(err)
	}
	var alias, cnames []string
	for _, rr := range p.Transfer(context.Background(), xfrRequest("example.", dns.TypeAXFR, 0)).RRs {
		h := rr.Header()
		if h.Name == "alias.example." {
			alias = append(alias, dns.TypeToString[h.Rrtype])
		}
		if h.Rrtype == dns.TypeCNAME {
			cnames = append(cnames, h.Name)
		}
	}
	slices.Sort(alias)
	if want := []string{"CNAME", "NSEC", "RRSIG", "RRSIG"}; !slices.Equal(alias, want) {
		t.Errorf("records of alias.example. transferred: %q, want %q", alias, want)
	}
	if want := []string{"alias.example."}; !slices.Equal(cnames, want) {
		t.Errorf("CNAMEs transferred %q, want %q (mix's beside its A left out)", cnames, want)
	}
}

// countingLister counts its List calls.
type countingLister struct {
	listFake
	lists atomic.Int32
	slow  time.Duration // each List takes this long
}

func (c *countingLister) List(zone string, yield func(dns.RR) bool) error {
	c.lists.Add(1)
	time.Sleep(c.slow)
	return c.listFake.List(zone, yield)
}

// Transfers of one zone version share one listing, built once even when
// they ask at the same time; a new version is listed again.
func TestTransferListingShared(t *testing.T) {
	src := &countingLister{listFake: listFake{newFake(t, "hosts", 60, 10, "www.example. 60 IN A 10.0.0.1", "db.example. 60 IN A 10.0.0.2")}, slow: 50 * time.Millisecond}
	p, err := newGen([]pipeline.ZoneSpec{{Names: []string{"example."}, Sources: []pipeline.SourceEntry{{Source: src}}}},
		genOptions{Journal: NewJournal(), Transfers: []TransferSpec{{Zones: []string{"example."}, Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}}})
	if err != nil {
		t.Fatal(err)
	}
	results := make([]Result, 8)
	var wg sync.WaitGroup
	for i := range results {
		wg.Go(func() { results[i] = p.Transfer(context.Background(), xfrRequest("example.", dns.TypeAXFR, 0)) })
	}
	wg.Wait()
	for i, res := range results {
		if res.Rcode != dns.RcodeSuccess || len(res.RRs) != 5 {
			t.Fatalf("transfer %d: rcode %d, %d records, err %v", i, res.Rcode, len(res.RRs), res.Err)
		}
		if &res.RRs[0] != &results[0].RRs[0] {
			t.Errorf("transfer %d has a listing of its own", i)
		}
	}
	if n := src.lists.Load(); n != 1 {
		t.Errorf("8 transfers of one version listed the source %d times, want 1", n)
	}
	src.serial.Store(11)
	src.rrs["new.example."] = []dns.RR{dnstest.MustRR(t, "new.example. 60 IN A 10.0.0.3")}
	res := p.Transfer(context.Background(), xfrRequest("example.", dns.TypeAXFR, 0))
	if n := src.lists.Load(); n != 2 || len(res.RRs) != 6 || res.RRs[0].(*dns.SOA).Serial != 11 {
		t.Errorf("after a change: %d lists, %d records, SOA %v", n, len(res.RRs), res.RRs[0])
	}
	// An IXFR from the version sent before is the difference, also made
	// once and shared.
	a := p.Transfer(context.Background(), xfrRequest("example.", dns.TypeIXFR, 10))
	b := p.Transfer(context.Background(), xfrRequest("example.", dns.TypeIXFR, 10))
	if !a.Incremental || !slices.Equal(xfrStrings(a.RRs), xfrStrings(b.RRs)) || &a.RRs[0] != &b.RRs[0] {
		t.Errorf("IXFR from 10: incremental %t, %v vs %v", a.Incremental, xfrStrings(a.RRs), xfrStrings(b.RRs))
	}
	if want := "new.example. 60 IN A 10.0.0.3"; len(a.RRs) != 5 || xfrStrings(a.RRs)[3] != want {
		t.Errorf("IXFR from 10: %v, want the addition of %s", xfrStrings(a.RRs), want)
	}
}

// A record that cannot be packed in one transfer message is left out of
// the zone's transfers, which go on, with one warning per zone version
// naming the zone and the record's owner.
func TestTransferOversizedRecord(t *testing.T) {
	big := &dns.TXT{Hdr: dns.RR_Header{Name: "big.example.", Rrtype: dns.TypeTXT, Class: dns.ClassINET, Ttl: 60}}
	for range 300 {
		big.Txt = append(big.Txt, strings.Repeat("x", 250))
	}
	fits := &dns.TXT{Hdr: dns.RR_Header{Name: "fits.example.", Rrtype: dns.TypeTXT, Class: dns.ClassINET, Ttl: 60}, Txt: big.Txt[:200]}
	src := listFake{newFake(t, "etcd", 60, 10, "www.example. 60 IN A 10.0.0.1")}
	src.rrs["big.example."] = []dns.RR{big}
	src.rrs["fits.example."] = []dns.RR{fits}
	var logs logtest.Buffer
	p, err := newGen([]pipeline.ZoneSpec{{Names: []string{"example."}, Sources: []pipeline.SourceEntry{{Source: src}}}},
		genOptions{Logger: slog.New(slog.NewTextHandler(&logs, nil)), Transfers: []TransferSpec{{Zones: []string{"example."}, Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}}})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		res := p.Transfer(context.Background(), xfrRequest("example.", dns.TypeAXFR, 0))
		if res.Rcode != dns.RcodeSuccess {
			t.Fatalf("rcode %d err %v", res.Rcode, res.Err)
		}
		var owners []string
		for _, rr := range res.RRs {
			owners = append(owners, rr.Header().Name)
		}
		if slices.Contains(owners, "big.example.") || !slices.Contains(owners, "fits.example.") || !slices.Contains(owners, "www.example.") {
			t.Errorf("transfer owners %v: want fits and www, not big", owners)
		}
	}
	const warning = "zone transfer leaves out a record too large for one transfer message"
	if n := logs.Count(warning); n != 1 {
		t.Errorf("logged %d times for three transfers of one version, want 1:\n%s", n, logs.String())
	}
	if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "zone=example. serial=10 owner=big.example. type=TXT") {
		t.Errorf("the warning does not name zone and owner:\n%s", logs.String())
	}
	// A reload that leaves the zone as it was keeps its version: the
	// listing carries over and is not logged again.
	p2, err := newGen([]pipeline.ZoneSpec{{Names: []string{"example."}, Sources: []pipeline.SourceEntry{{Source: src}}}},
		genOptions{Prev: p, Logger: slog.New(slog.NewTextHandler(&logs, nil)), Transfers: []TransferSpec{{Zones: []string{"example."}, Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}}})
	if err != nil {
		t.Fatal(err)
	}
	if res := p2.Transfer(context.Background(), xfrRequest("example.", dns.TypeAXFR, 0)); res.Rcode != dns.RcodeSuccess || len(res.RRs) != 5 {
		t.Fatalf("after a reload: rcode %d, %d records", res.Rcode, len(res.RRs))
	}
	if n := logs.Count(warning); n != 1 {
		t.Errorf("after a reload that changed nothing: logged %d times in all, want 1", n)
	}
	src.serial.Store(11)
	p2.Transfer(context.Background(), xfrRequest("example.", dns.TypeAXFR, 0))
	if n := logs.Count(warning); n != 2 {
		t.Errorf("a new version: logged %d times in all, want 2", n)
	}
}

// A reload that leaves a transferred zone's content as it was keeps its
// serial (no NOTIFY, no transfer for the secondaries); one that changes
// it (a record's TTL, a source with records more), or a later change of
// the data, raises it.
func TestReloadKeepsSerialOfUnchangedZone(t *testing.T) {
	var clock pipeline.SerialClock
	hosts := listFake{newFake(t, "hosts", 60, clock.Next(), "www.example. 60 IN A 10.0.0.1")}
	spec := TransferSpec{Zones: []string{"example."}, Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}
	build := func(prev *gen, srcs ...pipeline.Source) *gen {
		t.Helper()
		var entries []pipeline.SourceEntry
		for _, s := range srcs {
			entries = append(entries, pipeline.SourceEntry{Source: s, Fallthrough: true})
		}
		p, err := newGen([]pipeline.ZoneSpec{{Names: []string{"example."}, Sources: entries}}, genOptions{Serial: clock.Next(), Prev: prev, Transfers: []TransferSpec{spec}})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	serial := func(p *gen) uint32 { return p.ZoneSOA("example.").Serial }

	p1 := build(nil, hosts)
	s1 := serial(p1)
	p2 := build(p1, hosts)
	if s := serial(p2); s != s1 {
		t.Errorf("a reload that changed nothing: serial %d, want %d as before", s, s1)
	}
	// Listed by a transfer first, the old generation's listing is reused.
	p1b := build(p2, hosts)
	_ = p1b.Transfer(context.Background(), xfrRequest("example.", dns.TypeAXFR, 0))
	if s := serial(build(p1b, hosts)); s != s1 {
		t.Errorf("a second reload that changed nothing: serial %d, want %d", s, s1)
	}

	hosts.serial.Store(clock.Next()) // the data changes after the reload
	s2 := serial(p2)
	if !pipeline.SerialLess(s1, s2) {
		t.Errorf("a change after a reload that kept the serial: %d, want above %d", s2, s1)
	}

	other := listFake{newFake(t, "etcd", 60, clock.Next(), "db.example. 60 IN A 10.0.0.2")}
	p3 := build(p2, hosts, other)
	s3 := serial(p3)
	if !pipeline.SerialLess(s2, s3) {
		t.Errorf("a reload that added a source with records: serial %d, want above %d", s3, s2)
	}
	shorter := listFake{newFake(t, "hosts", 30, clock.Next(), "www.example. 30 IN A 10.0.0.1")}
	p4 := build(p3, shorter, other)
	if s := serial(p4); !pipeline.SerialLess(s3, s) {
		t.Errorf("a reload that changed a TTL: serial %d, want above %d", s, s3)
	}
	empty := listFake{newFake(t, "file", 60, clock.Next())}
	p5 := build(p4, shorter, other, empty)
	if s, was := serial(p5), serial(p4); s != was {
		t.Errorf("a reload that added a source without records: serial %d, want %d as before", s, was)
	}
}
