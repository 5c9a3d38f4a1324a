package etcd

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/dnsd/dnsd/internal/dnstest"
	"github.com/dnsd/dnsd/pipeline"
	"github.com/dnsd/dnsd/sources/etcd/etcdtest"
)

// writerFixture is a backend on a real etcd with a Writer on it.
type writerFixture struct {
	*fixture
	w *Writer
}

func openWriter(t *testing.T, srv *etcdtest.Server) *writerFixture {
	t.Helper()
	f := openFixture(t, srv, nil)
	f.waitSynced()
	return &writerFixture{fixture: f, w: NewWriter(NewSource(f.b, testZones, 300*time.Second))}
}

func (f *writerFixture) begin(zone string) pipeline.UpdateTxn {
	f.t.Helper()
	txn, err := f.w.BeginUpdate(context.Background(), zone)
	if err != nil {
		f.t.Fatal(err)
	}
	return txn
}

// set replaces the records at name with rrs (presentation format) in
// one update.
func (f *writerFixture) set(zone, name string, rrs ...string) error {
	f.t.Helper()
	txn := f.begin(zone)
	txn.Records(name)
	return txn.Commit(context.Background(), map[string][]dns.RR{name: mustRRs(f.t, rrs...)})
}

// keys lists the keys below prefix in etcd.
func (f *writerFixture) keys(prefix string) []string {
	f.t.Helper()
	resp, err := f.srv.Client().Get(context.Background(), prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		f.t.Fatal(err)
	}
	var out []string
	for _, kv := range resp.Kvs {
		out = append(out, string(kv.Key))
	}
	return out
}

// records renders what a new update reads at name, sorted.
func (f *writerFixture) records(zone, name string) []string {
	f.t.Helper()
	txn := f.begin(zone)
	defer txn.Abort()
	return sortedStrings(txn.Records(name))
}

func mustRRs(t testing.TB, s ...string) []dns.RR {
	t.Helper()
	out := make([]dns.RR, 0, len(s))
	for _, x := range s {
		out = append(out, dnstest.MustRR(t, x))
	}
	return out
}

// sortedStrings renders rrs whole (owner, TTL, data), sorted.
func sortedStrings(rrs []dns.RR) []string {
	out := make([]string, 0, len(rrs))
	for _, rr := range rrs {
		out = append(out, rr.String())
	}
	slices.Sort(out)
	return out
}

// TestUpdateRoundTrip: each type the SkyDNS format can hold is written
// as a record key, served at once (a query right after Commit sees it)
// at its name only, and read back by the next update exactly.
func TestUpdateRoundTrip(t *testing.T) {
	srv := etcdtest.Start(t, etcdtest.Options{NoFsync: true})
	f := openWriter(t, srv)
	const zone = "example.internal."
	for _, c := range []struct {
		zone, name string
		rrs        []string
		qtype      uint16
	}{
		{zone, "a.example.internal.", []string{"a.example.internal. 60 IN A 10.0.0.1", "a.example.internal. 60 IN A 10.0.0.2"}, dns.TypeA},
		{zone, "v6.example.internal.", []string{"v6.example.internal. 120 IN AAAA fd00::1"}, dns.TypeAAAA},
		{zone, "alias.example.internal.", []string{"alias.example.internal. 30 IN CNAME web.example.org."}, dns.TypeCNAME},
		{zone, "t.example.internal.", []string{`t.example.internal. 300 IN TXT "v=spf1 -all"`, `t.example.internal. 300 IN TXT "quote\" back\\slash \009tab"`}, dns.TypeTXT},
		{zone, "_pg._tcp.example.internal.", []string{"_pg._tcp.example.internal. 60 IN SRV 10 50 5432 db.example.internal."}, dns.TypeSRV},
		{zone, "mail.example.internal.", []string{"mail.example.internal. 3600 IN MX 5 mx1.example.internal."}, dns.TypeMX},
		{"10.in-addr.arpa.", "5.0.0.10.in-addr.arpa.", []string{"5.0.0.10.in-addr.arpa. 60 IN PTR db.example.internal."}, dns.TypePTR},
		{zone, "multi.example.internal.", []string{"multi.example.internal. 60 IN A 10.0.0.9", `multi.example.internal. 60 IN TXT "x"`, "multi.example.internal. 60 IN MX 10 mx.example.internal."}, dns.TypeA},
		{zone, "a.b.example.internal.", []string{"a.b.example.internal. 60 IN A 10.0.3.1"}, dns.TypeA},
	} {
		if err := f.set(c.zone, c.name, c.rrs...); err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		// Served at once: no wait between Commit and the query.
		res := f.w.Lookup(context.Background(), &pipeline.Question{Name: c.name, Type: c.qtype, Zone: c.zone})
		if want := sortedStrings(mustRRs(t, c.rrs...)); res.Status != pipeline.Found || !slices.Equal(sortedStrings(res.RRs), want) {
			t.Errorf("%s right after Commit: %v %v, want %v", c.name, res.Status, sortedStrings(res.RRs), want)
		}
		got := f.records(c.zone, c.name)
		slices.Sort(got)
		if want := sortedStrings(mustRRs(t, c.rrs...)); !slices.Equal(got, want) {
			t.Errorf("%s read back: %v, want %v", c.name, got, want)
		}
	}
	// One key a record, named by its record ID below the name's path.
	keys := f.keys("/skydns/internal/example/a/")
	if len(keys) != 2 || !strings.HasPrefix(keys[0], "/skydns/internal/example/a/@a-") {
		t.Errorf("keys of a.example.internal: %v", keys)
	}
	// A record key counts at its name only: b.example.internal (parent
	// of a.b) is an empty non-terminal, not an A.
	if got := answer(f.ask("b.example.internal", dns.TypeA)); got != "NOERROR:" {
		t.Errorf("b.example.internal A = %s, want NODATA", got)
	}
	// Deleting a name deletes its keys.
	if err := f.set(zone, "a.example.internal."); err != nil {
		t.Fatal(err)
	}
	if got := answer(f.ask("a.example.internal", dns.TypeA)); got != "NXDOMAIN:" {
		t.Errorf("after the delete: %s", got)
	}
	if keys := f.keys("/skydns/internal/example/a/"); len(keys) != 0 {
		t.Errorf("keys left: %v", keys)
	}
	// A TTL change rewrites the record key in place.
	if err := f.set(zone, "v6.example.internal.", "v6.example.internal. 90 IN AAAA fd00::1"); err != nil {
		t.Fatal(err)
	}
	if got := f.records(zone, "v6.example.internal."); len(got) != 1 || !strings.Contains(got[0], "\t90\t") {
		t.Errorf("after a TTL change: %v", got)
	}
	// The apex: records are added beside what apex.dns and ns.dns give.
	srv.Put("/skydns/internal/example/dns/ns/ns1", `{"host":"10.0.9.1"}`)
	f.eventually("example.internal", dns.TypeNS, "NOERROR:NS ns1.ns.dns.example.internal.")
	txn := f.begin(zone)
	apex := append(slices.Clone(txn.Records(zone)), mustRRs(t, `example.internal. 60 IN TXT "apex"`)...)
	if err := txn.Commit(context.Background(), map[string][]dns.RR{zone: apex}); err != nil {
		t.Fatal(err)
	}
	if got := answer(f.ask("example.internal", dns.TypeTXT)); got != `NOERROR:TXT "apex"` {
		t.Errorf("apex TXT = %s", got)
	}
	if got := answer(f.ask("example.internal", dns.TypeNS)); got != "NOERROR:NS ns1.ns.dns.example.internal." {
		t.Errorf("apex NS = %s", got)
	}
}

// TestUpdateNotRepresentable: records the SkyDNS format cannot hold are
// refused with the reason, and nothing is written.
func TestUpdateNotRepresentable(t *testing.T) {
	srv := etcdtest.Start(t, etcdtest.Options{NoFsync: true})
	f := openWriter(t, srv)
	for _, c := range []struct {
		zone, rr, reason string
	}{
		{"example.internal.", "h.example.internal. 60 IN DHCID AAIBY2/AuCccgoJbsaxcQc9TUapptP69lOjxfNuVAA2kjEA=", "the etcd source cannot hold DHCID records"},
		{"example.internal.", `h.example.internal. 60 IN CAA 0 issue "letsencrypt.org"`, "the etcd source cannot hold CAA records"},
		{"example.internal.", "h.example.internal. 60 IN SRV 0 5 5060 sip.example.internal.", "the etcd source cannot hold SRV records with priority 0 (SkyDNS reads 0 as its default)"},
		{"example.internal.", "h.example.internal. 60 IN MX 0 mx.example.internal.", "the etcd source cannot hold MX records with preference 0 (SkyDNS reads 0 as its default)"},
		{"example.internal.", "h.example.internal. 0 IN A 10.0.0.1", "the etcd source cannot hold records with TTL 0 (a SkyDNS value without ttl takes the source's)"},
		{"example.internal.", "h.example.internal. 60 IN AAAA ::ffff:10.0.0.1", "the etcd source cannot hold the AAAA record ::ffff:10.0.0.1 at h.example.internal. as a SkyDNS value"},
		{"10.in-addr.arpa.", "1.0.0.10.in-addr.arpa. 60 IN CNAME 1.0/25.0.0.10.in-addr.arpa.", "the etcd source cannot hold the CNAME record 1.0/25.0.0.10.in-addr.arpa. at 1.0.0.10.in-addr.arpa. as a SkyDNS value"},
		{"example.internal.", "h.example.internal. 60 IN NS ns.example.org.", "the etcd source cannot hold NS records"},
		{"example.internal.", `h.example.internal. 60 IN TXT "a" "b"`, `the etcd source cannot hold the TXT record "a" "b" at h.example.internal. as a SkyDNS value`},
		{"example.internal.", "h.example.internal. 60 IN PTR x.example.org.", "the etcd source cannot hold the PTR record x.example.org. at h.example.internal. as a SkyDNS value"},
	} {
		rr := dnstest.MustRR(t, c.rr)
		err := f.set(c.zone, rr.Header().Name, c.rr)
		if !errors.Is(err, pipeline.ErrNotRepresentable) || err.Error() != c.reason {
			t.Errorf("%s: %v, want %q", c.rr, err, c.reason)
		}
	}
	if keys := f.keys("/skydns/"); len(keys) != 0 {
		t.Errorf("refused updates wrote %v", keys)
	}
}

// TestUpdateConflict: of two updates begun at one revision that touch
// one name, the second to commit loses; a key read by an update and
// deleted by another writer before its Commit is a conflict too, also
// at a name the update only read (a prerequisite's).
func TestUpdateConflict(t *testing.T) {
	srv := etcdtest.Start(t, etcdtest.Options{NoFsync: true})
	f := openWriter(t, srv)
	const zone, x = "example.internal.", "x.example.internal."
	t1, t2 := f.begin(zone), f.begin(zone)
	if t1.Records(x) != nil || t2.Records(x) != nil {
		t.Fatal("x exists")
	}
	if err := t1.Commit(context.Background(), map[string][]dns.RR{x: mustRRs(t, "x.example.internal. 60 IN A 10.0.0.1")}); err != nil {
		t.Fatal(err)
	}
	err := t2.Commit(context.Background(), map[string][]dns.RR{x: mustRRs(t, "x.example.internal. 60 IN A 10.0.0.2")})
	if !errors.Is(err, pipeline.ErrUpdateConflict) {
		t.Fatalf("second commit: %v, want a conflict", err)
	}
	// The loser's retry reads the winner's record at once.
	if got := f.records(zone, x); len(got) != 1 || !strings.HasSuffix(got[0], "10.0.0.1") {
		t.Errorf("after the conflict: %v", got)
	}

	// A deletion by another writer between begin and commit.
	srv.Put("/skydns/internal/example/del", `{"host":"10.0.0.9"}`)
	f.eventually("del.example.internal", dns.TypeA, "NOERROR:A 10.0.0.9")
	txn := f.begin(zone)
	if len(txn.Records("del.example.internal.")) != 1 {
		t.Fatal("del not read")
	}
	srv.Delete("/skydns/internal/example/del")
	err = txn.Commit(context.Background(), map[string][]dns.RR{"del.example.internal.": mustRRs(t, "del.example.internal. 60 IN A 10.0.0.9", "del.example.internal. 60 IN A 10.0.0.10")})
	if !errors.Is(err, pipeline.ErrUpdateConflict) {
		t.Errorf("commit after the read key was deleted: %v, want a conflict", err)
	}

	// Only read, not written: the guard covers it.
	srv.Put("/skydns/internal/example/pre", `{"host":"10.0.0.8"}`)
	f.eventually("pre.example.internal", dns.TypeA, "NOERROR:A 10.0.0.8")
	txn = f.begin(zone)
	txn.Records("pre.example.internal.")
	txn.Records("y.example.internal.")
	srv.Delete("/skydns/internal/example/pre")
	err = txn.Commit(context.Background(), map[string][]dns.RR{"y.example.internal.": mustRRs(t, "y.example.internal. 60 IN A 10.0.0.3")})
	if !errors.Is(err, pipeline.ErrUpdateConflict) {
		t.Errorf("commit after a key only read was deleted: %v, want a conflict", err)
	}
	// ... as does a name created below one read.
	txn = f.begin(zone)
	txn.Records("new.example.internal.")
	srv.Put("/skydns/internal/example/new/x1", `{"host":"10.0.0.7"}`)
	err = txn.Commit(context.Background(), map[string][]dns.RR{"y.example.internal.": mustRRs(t, "y.example.internal. 60 IN A 10.0.0.3")})
	if !errors.Is(err, pipeline.ErrUpdateConflict) {
		t.Errorf("commit after a key was created below a name read: %v, want a conflict", err)
	}
	if keys := f.keys("/skydns/internal/example/y"); len(keys) != 0 {
		t.Errorf("a conflicting update wrote %v", keys)
	}
}

// TestUpdateHandWritten: keys dnsd did not write are deleted when they
// hold a record deleted, their other records kept as record keys; a
// child key's parent keeps its answer.
func TestUpdateHandWritten(t *testing.T) {
	srv := etcdtest.Start(t, etcdtest.Options{NoFsync: true})
	f := openWriter(t, srv)
	const zone = "example.internal."
	srv.Put("/skydns/internal/example/web/x1", `{"host":"10.0.1.1"}`)
	srv.Put("/skydns/internal/example/web/x2", `{"host":"10.0.1.2"}`)
	srv.Put("/skydns/internal/example/both", `{"host":"10.0.0.7","text":"hi","ttl":60}`)
	f.eventually("both.example.internal", dns.TypeTXT, `NOERROR:TXT "hi"`)
	f.eventually("web.example.internal", dns.TypeA, "NOERROR:A 10.0.1.1,A 10.0.1.2")

	// Delete one A of web: the key holding it goes; x1.web, which it
	// named, keeps its record as a record key (counted at x1.web only).
	if err := f.set(zone, "web.example.internal.", "web.example.internal. 300 IN A 10.0.1.2"); err != nil {
		t.Fatal(err)
	}
	if got := answer(f.ask("web.example.internal", dns.TypeA)); got != "NOERROR:A 10.0.1.2" {
		t.Errorf("web A = %s", got)
	}
	if keys := f.keys("/skydns/internal/example/web"); len(keys) != 2 || !strings.HasPrefix(keys[0], "/skydns/internal/example/web/x1/@a-") || keys[1] != "/skydns/internal/example/web/x2" {
		t.Errorf("web keys = %v", keys)
	}
	if got := answer(f.ask("x1.web.example.internal", dns.TypeA)); got != "NOERROR:A 10.0.1.1" {
		t.Errorf("x1.web A = %s", got)
	}
	// Delete the TXT of a key holding A and TXT: the A is written again.
	if err := f.set(zone, "both.example.internal.", "both.example.internal. 60 IN A 10.0.0.7"); err != nil {
		t.Fatal(err)
	}
	if got := answer(f.ask("both.example.internal", dns.TypeANY)); got != "NOERROR:A 10.0.0.7" {
		t.Errorf("both = %s", got)
	}
	// Delete the name x2.web: web keeps its address.
	if err := f.set(zone, "x2.web.example.internal."); err != nil {
		t.Fatal(err)
	}
	if got := answer(f.ask("x2.web.example.internal", dns.TypeA)); got != "NXDOMAIN:" {
		t.Errorf("x2.web = %s", got)
	}
	if got := answer(f.ask("web.example.internal", dns.TypeA)); got != "NOERROR:A 10.0.1.2" {
		t.Errorf("web A after x2.web was deleted = %s", got)
	}
}

// TestWritable: only a source with updates: true is writable, in the
// configuration and as a pipeline.Writer.
func TestWritable(t *testing.T) {
	k := NewKind()
	for _, on := range []bool{false, true} {
		c := &Config{Updates: on}
		_, isWriter := writable(c, NewSource(nil, testZones, time.Minute)).(pipeline.Writer)
		if k.Writable(c) != on || isWriter != on {
			t.Errorf("updates: %v: Writable %v, a pipeline.Writer %v", on, k.Writable(c), isWriter)
		}
	}
}
