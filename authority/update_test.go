package authority

import (
	"context"
	"fmt"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/dnsd/dnsd/internal/dnstest"
	"github.com/dnsd/dnsd/pipeline"
	"github.com/dnsd/dnsd/sources/dynamic"
)

const upSecret = "c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0IQ=="

var upKey = &TSIGKey{Name: "dhcp-key.", Algorithm: dns.HmacSHA256, Secret: upSecret}

// upZone is corp.test. with a real dynamic store first and a read-only
// "file" source after it, and the update items given.
type upZone struct {
	t    *testing.T
	z    *Zones
	dyn  *dynamic.Source
	file *fakeSource
}

func newUpZone(t *testing.T, items []UpdateSpec, file ...string) *upZone {
	t.Helper()
	zones := []string{"corp.test."}
	b, err := dynamic.Open(filepath.Join(t.TempDir(), "corp.db"), zones, dynamic.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	dyn := dynamic.NewSource(b, &dynamic.Config{MaxRecords: 100, TTL: time.Minute})
	f := newFake(t, "file", 300, 1, file...)
	p, err := pipeline.New([]pipeline.ZoneSpec{{Names: zones, Sources: []pipeline.SourceEntry{{Source: dyn, Fallthrough: true}, {Source: f}}}}, pipeline.Options{})
	if err != nil {
		t.Fatal(err)
	}
	z, err := New(p, Options{Updates: items})
	if err != nil {
		t.Fatal(err)
	}
	return &upZone{t: t, z: z, dyn: dyn, file: f}
}

// send packs m (signed with key when set), unpacks it as the server does
// and hands it to Update from client.
func (u *upZone) send(m *dns.Msg, key *TSIGKey, client string) UpdateAnswer {
	u.t.Helper()
	var wire []byte
	var err error
	if key != nil {
		m.SetTsig(key.Name, key.Algorithm, 300, time.Now().Unix())
		wire, _, err = dns.TsigGenerate(m, key.Secret, "", false)
	} else {
		wire, err = m.Pack()
	}
	if err != nil {
		u.t.Fatal(err)
	}
	q := new(dns.Msg)
	if err := q.Unpack(wire); err != nil {
		u.t.Fatal(err)
	}
	return u.z.Update(context.Background(), q, wire, netip.MustParseAddr(client))
}

// resolve answers name/qtype as a query would.
func (u *upZone) resolve(name string, qtype uint16) *dns.Msg {
	u.t.Helper()
	q := new(dns.Msg)
	q.SetQuestion(name, qtype)
	r := u.z.Pipeline().Resolve(context.Background(), &pipeline.Request{Msg: q, Name: name, Type: qtype})
	if r.Msg == nil {
		u.t.Fatalf("%s %s: no answer", name, dns.TypeToString[qtype])
	}
	return r.Msg
}

func updateMsg(zone string) *dns.Msg {
	m := new(dns.Msg)
	m.SetUpdate(zone)
	return m
}

func rrs(t *testing.T, s ...string) []dns.RR {
	t.Helper()
	out := make([]dns.RR, len(s))
	for i, x := range s {
		out[i] = dnstest.MustRR(t, x)
	}
	return out
}

func TestUpdateZoneAndKey(t *testing.T) {
	u := newUpZone(t, []UpdateSpec{{Zones: []string{"corp.test."}, Key: upKey}})
	add := func(zone string) *dns.Msg {
		m := updateMsg(zone)
		m.Insert(rrs(t, "a.corp.test. 60 IN A 192.0.2.1"))
		return m
	}
	if a := u.send(add("other.test."), upKey, "127.0.0.1"); a.Rcode != dns.RcodeNotAuth || a.Result != UpdateNotAuth {
		t.Errorf("zone not served: %+v, want NOTAUTH", a)
	}
	if a := u.send(add("a.corp.test."), upKey, "127.0.0.1"); a.Rcode != dns.RcodeNotAuth {
		t.Errorf("zone section below the apex: %+v, want NOTAUTH", a)
	}
	a := u.send(add("corp.test."), nil, "127.0.0.1")
	if a.Rcode != dns.RcodeRefused || a.Reason != "update[0]: updates must be signed with TSIG key dhcp-key." {
		t.Errorf("unsigned: %+v, want REFUSED naming the key", a)
	}
	other := &TSIGKey{Name: "acme-key.", Algorithm: dns.HmacSHA256, Secret: upSecret}
	if a := u.send(add("corp.test."), other, "127.0.0.1"); a.Rcode != dns.RcodeNotAuth || a.Check.Error != dns.RcodeBadKey {
		t.Errorf("unknown key: %+v, want NOTAUTH BADKEY", a)
	}
	wrong := &TSIGKey{Name: "dhcp-key.", Algorithm: dns.HmacSHA256, Secret: "b3RoZXItc2VjcmV0"}
	if a := u.send(add("corp.test."), wrong, "127.0.0.1"); a.Rcode != dns.RcodeNotAuth || a.Check.Error != dns.RcodeBadSig {
		t.Errorf("wrong secret: %+v, want NOTAUTH BADSIG", a)
	}
	if got := u.resolve("a.corp.test.", dns.TypeA); len(got.Answer) != 0 {
		t.Fatalf("a refused update changed the zone: %v", got.Answer)
	}
	serial := u.z.Pipeline().ZoneSOA("corp.test.").Serial
	a = u.send(add("corp.test."), upKey, "127.0.0.1")
	if a.Rcode != dns.RcodeSuccess || !a.Changed || a.Check.Key != upKey || a.Result != UpdateOK {
		t.Fatalf("signed update: %+v, want NOERROR, changed, signed answer", a)
	}
	if got := u.resolve("a.corp.test.", dns.TypeA); len(got.Answer) != 1 || got.Answer[0].(*dns.A).A.String() != "192.0.2.1" {
		t.Fatalf("after the update, a.corp.test. A = %v", got.Answer)
	}
	if now := u.z.Pipeline().ZoneSOA("corp.test.").Serial; !pipeline.SerialLess(serial, now) {
		t.Errorf("serial %d -> %d: an applied update must raise it", serial, now)
	}
	serial = u.z.Pipeline().ZoneSOA("corp.test.").Serial
	if a := u.send(add("corp.test."), upKey, "127.0.0.1"); a.Rcode != dns.RcodeSuccess || a.Changed {
		t.Errorf("duplicate add: %+v, want NOERROR without a change", a)
	}
	if now := u.z.Pipeline().ZoneSOA("corp.test.").Serial; now != serial {
		t.Errorf("a duplicate add moved the serial %d -> %d", serial, now)
	}
}

func TestUpdatePolicy(t *testing.T) {
	u := newUpZone(t, []UpdateSpec{
		{Zones: []string{"corp.test."}, Allow: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}, Names: []string{"*.dhcp.corp.test."}, Types: []uint16{dns.TypeA, dns.TypeTXT}, Index: 0},
		{Zones: []string{"corp.test."}, Allow: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}, Names: []string{"_acme-challenge.*"}, Types: []uint16{dns.TypeTXT}, Index: 1},
	})
	for _, c := range []struct {
		client, rr, reason string
	}{
		{"192.0.2.9", "h.dhcp.corp.test. 60 IN A 10.1.1.1", "update[0]: client 192.0.2.9 not allowed"},
		{"10.0.0.1", "h.corp.test. 60 IN A 10.1.1.1", "update[0]: name h.corp.test. not allowed"},
		{"10.0.0.1", "h.dhcp.corp.test. 60 IN AAAA 2001:db8::1", "update[0]: type AAAA not allowed"},
		{"10.0.0.1", "_acme-challenge.corp.test. 60 IN A 10.1.1.1", "update[0]: name _acme-challenge.corp.test. not allowed"},
	} {
		m := updateMsg("corp.test.")
		m.Insert(rrs(t, c.rr))
		if a := u.send(m, nil, c.client); a.Rcode != dns.RcodeRefused || a.Reason != c.reason {
			t.Errorf("%s from %s: %v %q, want REFUSED %q", c.rr, c.client, dns.RcodeToString[a.Rcode], a.Reason, c.reason)
		}
	}
	for _, rr := range []string{
		"h.dhcp.corp.test. 60 IN A 10.1.1.1",
		`_acme-challenge.corp.test. 60 IN TXT "token"`,
		`_acme-challenge.www.corp.test. 60 IN TXT "token"`,
	} {
		m := updateMsg("corp.test.")
		m.Insert(rrs(t, rr))
		if a := u.send(m, nil, "10.0.0.1"); a.Rcode != dns.RcodeSuccess {
			t.Errorf("%s: %v %q, want NOERROR", rr, dns.RcodeToString[a.Rcode], a.Reason)
		}
	}
	// An SOA in an update is ignored, not refused.
	m := updateMsg("corp.test.")
	m.Insert(rrs(t, "corp.test. 60 IN SOA ns. host. 99 1 1 1 1"))
	if a := u.send(m, nil, "10.0.0.1"); a.Rcode != dns.RcodeSuccess || a.Changed {
		t.Errorf("SOA update: %+v, want NOERROR, no change", a)
	}
}

func TestUpdatePrerequisites(t *testing.T) {
	u := newUpZone(t, []UpdateSpec{{Zones: []string{"corp.test."}, Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}},
		"static.corp.test. 300 IN A 192.0.2.50", "deep.ent.corp.test. 300 IN A 192.0.2.51")
	m := updateMsg("corp.test.")
	m.Insert(rrs(t, "h.corp.test. 60 IN A 192.0.2.1", `h.corp.test. 60 IN TXT "x"`))
	if a := u.send(m, nil, "127.0.0.1"); a.Rcode != dns.RcodeSuccess {
		t.Fatalf("setup: %+v", a)
	}
	for _, c := range []struct {
		name  string
		build func(m *dns.Msg)
		rcode int
	}{
		{"name not in use, held by dynamic", func(m *dns.Msg) { m.NameNotUsed(rrs(t, "h.corp.test. 0 IN A 0.0.0.0")) }, dns.RcodeYXDomain},
		{"name not in use, held by file", func(m *dns.Msg) { m.NameNotUsed(rrs(t, "static.corp.test. 0 IN A 0.0.0.0")) }, dns.RcodeYXDomain},
		{"name not in use, empty non-terminal", func(m *dns.Msg) { m.NameNotUsed(rrs(t, "ent.corp.test. 0 IN A 0.0.0.0")) }, dns.RcodeSuccess},
		{"name in use, absent", func(m *dns.Msg) { m.NameUsed(rrs(t, "nope.corp.test. 0 IN A 0.0.0.0")) }, dns.RcodeNameError},
		{"name in use, apex", func(m *dns.Msg) { m.NameUsed(rrs(t, "corp.test. 0 IN A 0.0.0.0")) }, dns.RcodeSuccess},
		{"rrset exists, other type", func(m *dns.Msg) { m.RRsetUsed(rrs(t, "h.corp.test. 0 IN MX 0 .")) }, dns.RcodeNXRrset},
		{"rrset exists, in file", func(m *dns.Msg) { m.RRsetUsed(rrs(t, "static.corp.test. 0 IN A 0.0.0.0")) }, dns.RcodeSuccess},
		{"rrset does not exist, exists", func(m *dns.Msg) { m.RRsetNotUsed(rrs(t, "h.corp.test. 0 IN TXT \"\"")) }, dns.RcodeYXRrset},
		{"value dependent, same", func(m *dns.Msg) { m.Used(rrs(t, "h.corp.test. 0 IN A 192.0.2.1")) }, dns.RcodeSuccess},
		{"value dependent, other", func(m *dns.Msg) { m.Used(rrs(t, "h.corp.test. 0 IN A 192.0.2.2")) }, dns.RcodeNXRrset},
		{"value dependent, more", func(m *dns.Msg) { m.Used(rrs(t, "h.corp.test. 0 IN A 192.0.2.1", "h.corp.test. 0 IN A 192.0.2.2")) }, dns.RcodeNXRrset},
	} {
		m := updateMsg("corp.test.")
		c.build(m)
		m.Insert(rrs(t, `flag.corp.test. 60 IN TXT "`+strings.ReplaceAll(c.name, " ", "-")+`"`))
		a := u.send(m, nil, "127.0.0.1")
		if a.Rcode != c.rcode {
			t.Errorf("%s: %s, want %s", c.name, dns.RcodeToString[a.Rcode], dns.RcodeToString[c.rcode])
		}
		applied := slices.ContainsFunc(u.resolve("flag.corp.test.", dns.TypeTXT).Answer, func(rr dns.RR) bool {
			return strings.Contains(rr.String(), strings.ReplaceAll(c.name, " ", "-"))
		})
		if applied != (c.rcode == dns.RcodeSuccess) {
			t.Errorf("%s: update applied = %v with rcode %s (all or nothing)", c.name, applied, dns.RcodeToString[a.Rcode])
		}
		if c.rcode != dns.RcodeSuccess && a.Result != UpdatePrereq {
			t.Errorf("%s: result %q, want %q", c.name, a.Result, UpdatePrereq)
		}
	}
	// The prerequisite section's records must have TTL 0.
	m = updateMsg("corp.test.")
	m.Answer = []dns.RR{&dns.ANY{Hdr: dns.RR_Header{Name: "h.corp.test.", Rrtype: dns.TypeA, Class: dns.ClassANY, Ttl: 5}}}
	if a := u.send(m, nil, "127.0.0.1"); a.Rcode != dns.RcodeFormatError {
		t.Errorf("prerequisite with TTL 5: %s, want FORMERR", dns.RcodeToString[a.Rcode])
	}
	m = updateMsg("corp.test.")
	m.Insert(rrs(t, "h.other.test. 60 IN A 192.0.2.1"))
	if a := u.send(m, nil, "127.0.0.1"); a.Rcode != dns.RcodeNotZone {
		t.Errorf("update outside the zone: %s, want NOTZONE", dns.RcodeToString[a.Rcode])
	}
}

func TestUpdateChanges(t *testing.T) {
	u := newUpZone(t, []UpdateSpec{{Zones: []string{"corp.test."}, Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}},
		"static.corp.test. 300 IN A 192.0.2.50", "corp.test. 300 IN MX 10 mail.corp.test.")
	send := func(build func(m *dns.Msg)) UpdateAnswer {
		m := updateMsg("corp.test.")
		build(m)
		return u.send(m, nil, "127.0.0.1")
	}
	answer := func(name string, qtype uint16) []string {
		var out []string
		for _, rr := range u.resolve(name, qtype).Answer {
			out = append(out, strings.TrimPrefix(rr.String(), rr.Header().String()))
		}
		slices.Sort(out)
		return out
	}
	if a := send(func(m *dns.Msg) {
		m.Insert(rrs(t, "h.corp.test. 60 IN A 192.0.2.1", "h.corp.test. 60 IN A 192.0.2.2", "alias.corp.test. 60 IN CNAME h.corp.test."))
	}); a.Rcode != dns.RcodeSuccess {
		t.Fatalf("adds: %+v", a)
	}
	if got := answer("h.corp.test.", dns.TypeA); !slices.Equal(got, []string{"192.0.2.1", "192.0.2.2"}) {
		t.Errorf("h A = %v", got)
	}
	// CNAME exclusivity: an A beside a CNAME, a CNAME beside an A, are
	// ignored; a CNAME replaces a CNAME.
	send(func(m *dns.Msg) {
		m.Insert(rrs(t, "alias.corp.test. 60 IN A 192.0.2.9", "h.corp.test. 60 IN CNAME x.corp.test.", "alias.corp.test. 60 IN CNAME static.corp.test."))
	})
	if got := answer("alias.corp.test.", dns.TypeCNAME); !slices.Equal(got, []string{"static.corp.test."}) {
		t.Errorf("alias CNAME = %v, want the replacing CNAME alone", got)
	}
	if got := answer("h.corp.test.", dns.TypeCNAME); len(got) != 0 {
		t.Errorf("a CNAME was added beside h's A records: %v", got)
	}
	// Delete one RR, then an RRset; the last record gone, the name is gone.
	send(func(m *dns.Msg) { m.Remove(rrs(t, "h.corp.test. 0 IN A 192.0.2.1")) })
	if got := answer("h.corp.test.", dns.TypeA); !slices.Equal(got, []string{"192.0.2.2"}) {
		t.Errorf("after deleting one A: %v", got)
	}
	send(func(m *dns.Msg) { m.RemoveRRset(rrs(t, "h.corp.test. 0 IN A 0.0.0.0")) })
	if r := u.resolve("h.corp.test.", dns.TypeA); r.Rcode != dns.RcodeNameError {
		t.Errorf("after deleting the last RRset of h: %s, want NXDOMAIN", dns.RcodeToString[r.Rcode])
	}
	// The read-only source's data is neither hidden nor deleted.
	for _, c := range []struct {
		name   string
		build  func(m *dns.Msg)
		reason string
	}{
		{"add at a file name", func(m *dns.Msg) { m.Insert(rrs(t, `static.corp.test. 60 IN TXT "x"`)) }, "name static.corp.test. is held by the file source (read-only)"},
		{"delete a file RRset", func(m *dns.Msg) { m.RemoveRRset(rrs(t, "static.corp.test. 0 IN A 0.0.0.0")) }, "static.corp.test. A is held by the file source (read-only)"},
		{"delete a file name", func(m *dns.Msg) { m.RemoveName(rrs(t, "static.corp.test. 0 IN A 0.0.0.0")) }, "name static.corp.test. is held by the file source (read-only)"},
		{"delete a file RR", func(m *dns.Msg) { m.Remove(rrs(t, "static.corp.test. 0 IN A 192.0.2.50")) }, "a A record at static.corp.test. is held by the file source (read-only)"},
	} {
		a := send(c.build)
		if a.Rcode != dns.RcodeRefused || a.Reason != c.reason {
			t.Errorf("%s: %s %q, want REFUSED %q", c.name, dns.RcodeToString[a.Rcode], a.Reason, c.reason)
		}
	}
	if got := answer("static.corp.test.", dns.TypeA); !slices.Equal(got, []string{"192.0.2.50"}) {
		t.Errorf("static A = %v after refused updates", got)
	}
	// All or nothing: a refused record undoes the whole update.
	a := send(func(m *dns.Msg) {
		m.Insert(rrs(t, "new.corp.test. 60 IN A 192.0.2.7", `static.corp.test. 60 IN TXT "x"`))
	})
	if a.Rcode != dns.RcodeRefused {
		t.Errorf("mixed update: %s, want REFUSED", dns.RcodeToString[a.Rcode])
	}
	if r := u.resolve("new.corp.test.", dns.TypeA); r.Rcode != dns.RcodeNameError {
		t.Errorf("a refused update's other record was applied: %v", r.Answer)
	}
}

func TestUpdateConfigChecks(t *testing.T) {
	f := newFake(t, "file", 300, 1)
	p, err := pipeline.New([]pipeline.ZoneSpec{{Names: []string{"corp.test."}, Sources: []pipeline.SourceEntry{{Source: f}}}}, pipeline.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(p, Options{Updates: []UpdateSpec{{Zones: []string{"corp.test."}}}}); err == nil || !strings.Contains(err.Error(), "no writable source") {
		t.Errorf("zone without a writable source: %v", err)
	}
	z, err := New(p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if z.Updates() {
		t.Error("Updates() with no update items")
	}
}

func TestUpdateBounds(t *testing.T) {
	zones := []string{"corp.test."}
	b, err := dynamic.Open(filepath.Join(t.TempDir(), "corp.db"), zones, dynamic.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	dyn := dynamic.NewSource(b, &dynamic.Config{MaxRecords: 3, TTL: time.Minute})
	p, err := pipeline.New([]pipeline.ZoneSpec{{Names: zones, Sources: []pipeline.SourceEntry{{Source: dyn, Fallthrough: true}}}}, pipeline.Options{})
	if err != nil {
		t.Fatal(err)
	}
	z, err := New(p, Options{Updates: []UpdateSpec{{Zones: zones, Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}}, MaxUpdateSize: 600, MaxUpdateRRs: 4})
	if err != nil {
		t.Fatal(err)
	}
	u := &upZone{t: t, z: z, dyn: dyn}
	add := func(n int) UpdateAnswer {
		m := updateMsg("corp.test.")
		for i := range n {
			m.Insert(rrs(t, fmt.Sprintf("h%d.corp.test. 60 IN A 192.0.2.%d", i, i+1)))
		}
		return u.send(m, nil, "127.0.0.1")
	}
	if a := add(5); a.Rcode != dns.RcodeRefused || a.Reason != "the update has 5 records, more than limits.max_update_rrs (4)" {
		t.Errorf("5 records, max_update_rrs 4: %s %q", dns.RcodeToString[a.Rcode], a.Reason)
	}
	if a := add(4); a.Rcode != dns.RcodeRefused || !strings.Contains(a.Reason, "max_records is 3") {
		t.Errorf("4 records into a store of at most 3: %s %q", dns.RcodeToString[a.Rcode], a.Reason)
	}
	if n := dyn.Records(); n != 0 {
		t.Errorf("a refused update left %d records", n)
	}
	if a := add(3); a.Rcode != dns.RcodeSuccess {
		t.Errorf("3 records: %s %q", dns.RcodeToString[a.Rcode], a.Reason)
	}
	m := updateMsg("corp.test.")
	m.Insert(rrs(t, `big.corp.test. 60 IN TXT "`+strings.Repeat("x", 250)+`" "`+strings.Repeat("y", 250)+`" "`+strings.Repeat("z", 250)+`"`))
	if a := u.send(m, nil, "127.0.0.1"); a.Rcode != dns.RcodeFormatError {
		t.Errorf("a message over max_update_size: %s, want FORMERR", dns.RcodeToString[a.Rcode])
	}
}

func TestUpdateViewZoneRefused(t *testing.T) {
	f := newFake(t, "file", 300, 1)
	v := newFake(t, "hosts", 300, 1)
	p, err := pipeline.New([]pipeline.ZoneSpec{{Names: []string{"corp.test."}, Sources: []pipeline.SourceEntry{{Source: f}}}},
		pipeline.Options{Views: []pipeline.ViewSpec{{Name: "office", Zones: []pipeline.ZoneSpec{{Names: []string{"office.test."}, Sources: []pipeline.SourceEntry{{Source: v}}}}}}})
	if err != nil {
		t.Fatal(err)
	}
	z, err := New(p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	u := &upZone{t: t, z: z}
	m := updateMsg("office.test.")
	m.Insert(rrs(t, "a.office.test. 60 IN A 192.0.2.1"))
	if a := u.send(m, nil, "127.0.0.1"); a.Rcode != dns.RcodeRefused || !strings.Contains(a.Reason, "a view's zone") {
		t.Errorf("a view's zone: %s %q, want REFUSED", dns.RcodeToString[a.Rcode], a.Reason)
	}
	m = updateMsg("corp.test.")
	if a := u.send(m, nil, "127.0.0.1"); a.Rcode != dns.RcodeRefused || a.Reason != "zone corp.test. is not open to updates" {
		t.Errorf("a zone in no update item: %s %q, want REFUSED", dns.RcodeToString[a.Rcode], a.Reason)
	}
}
