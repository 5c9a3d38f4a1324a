package etcd

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/dnsd/dnsd/internal/dnstest"
	"github.com/dnsd/dnsd/internal/logtest"
	"github.com/dnsd/dnsd/pipeline"
	"github.com/dnsd/dnsd/sources/etcd/etcdtest"
)

// logBuf collects a backend's log lines.
type logBuf = logtest.Buffer

// fixture is a backend on a real etcd and a pipeline serving it.
type fixture struct {
	t   *testing.T
	srv *etcdtest.Server
	b   *Backend
	p   *pipeline.Pipeline
	log *logBuf
	m   *Metrics
}

var testZones = []string{"example.internal.", "10.in-addr.arpa.", "d.f.ip6.arpa."}

func openFixture(t *testing.T, srv *etcdtest.Server, mod func(*Options)) *fixture {
	t.Helper()
	f := &fixture{t: t, srv: srv, log: &logBuf{}, m: NewMetrics()}
	opts := Options{
		Endpoints: []string{srv.Endpoint()},
		Prefix:    "/skydns",
		TTL:       300 * time.Second,
		Logger:    slog.New(slog.NewTextHandler(f.log, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Metrics:   f.m,
		RetryMin:  20 * time.Millisecond,
		RetryMax:  200 * time.Millisecond,
	}
	if mod != nil {
		mod(&opts)
	}
	b, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		b.Close()
		if t.Failed() {
			t.Logf("backend log:\n%s", f.log.String())
		}
	})
	f.b = b
	src := NewSource(b, testZones, 300*time.Second)
	f.p, err = pipeline.New([]pipeline.ZoneSpec{{Names: testZones, Sources: []pipeline.SourceEntry{{Source: src}}}},
		pipeline.Options{NSAddrs: []netip.Addr{netip.MustParseAddr("127.0.0.53")}})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *fixture) waitSynced() {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := f.b.WaitSynced(ctx); err != nil {
		f.t.Fatal(err)
	}
}

// ask resolves name/qtype through the pipeline.
func (f *fixture) ask(name string, qtype uint16) *dns.Msg {
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), qtype)
	r := f.p.Resolve(context.Background(), &pipeline.Request{Msg: m, Name: strings.ToLower(dns.Fqdn(name)), Type: qtype})
	return r.Msg
}

// answer renders "RCODE:rdata,rdata" with sorted rdata.
func answer(m *dns.Msg) string {
	var parts []string
	for _, rr := range m.Answer {
		f := strings.Fields(rr.String())
		parts = append(parts, f[3]+" "+strings.Join(f[4:], " "))
	}
	slices.Sort(parts)
	return dns.RcodeToString[m.Rcode] + ":" + strings.Join(parts, ",")
}

func extra(m *dns.Msg) string {
	var parts []string
	for _, rr := range m.Extra {
		f := strings.Fields(rr.String())
		parts = append(parts, f[0]+" "+f[3]+" "+strings.Join(f[4:], " "))
	}
	slices.Sort(parts)
	return strings.Join(parts, ",")
}

// eventually polls until name/qtype answers want, within 2 s.
func (f *fixture) eventually(name string, qtype uint16, want string) time.Duration {
	f.t.Helper()
	start := time.Now()
	var got string
	for time.Since(start) < 2*time.Second {
		if got = answer(f.ask(name, qtype)); got == want {
			return time.Since(start)
		}
		time.Sleep(2 * time.Millisecond)
	}
	f.t.Fatalf("%s %s: got %q, want %q within 2s", name, dns.TypeToString[qtype], got, want)
	return 0
}

func TestRecordKinds(t *testing.T) {
	srv := etcdtest.Start(t, etcdtest.Options{})
	for k, v := range map[string]string{
		"/skydns/internal/example/db":                                                      `{"host":"10.0.0.5"}`,
		"/skydns/internal/example/v6":                                                      `{"host":"fd00::5","ttl":60}`,
		"/skydns/internal/example/www":                                                     `{"host":"db.example.internal"}`,
		"/skydns/internal/example/ext":                                                     `{"host":"www.example.org"}`,
		"/skydns/internal/example/multi/x1":                                                `{"host":"10.0.1.1"}`,
		"/skydns/internal/example/multi/x2":                                                `{"host":"10.0.1.2"}`,
		"/skydns/internal/example/multi/x3":                                                `{"host":"fd00::1:3"}`,
		"/skydns/internal/example/_tcp/_pg/a":                                              `{"host":"10.0.2.1","port":5432,"priority":10,"weight":20}`,
		"/skydns/internal/example/_tcp/_pg/b":                                              `{"host":"db.example.internal","port":5433}`,
		"/skydns/internal/example/_tcp/_http/x":                                            `{"host":"10.0.3.1","port":80,"targetstrip":1}`,
		"/skydns/internal/example/txt":                                                     `{"text":"hello world"}`,
		"/skydns/internal/example/mail/mx1":                                                `{"host":"10.0.4.1","mail":true,"priority":5}`,
		"/skydns/internal/example/mail/mx2":                                                `{"host":"db.example.internal","mail":true}`,
		"/skydns/internal/example/grp/a":                                                   `{"host":"10.0.5.1","group":"g1"}`,
		"/skydns/internal/example/grp/b":                                                   `{"host":"10.0.5.2","group":"g1"}`,
		"/skydns/internal/example/grp/c":                                                   `{"host":"10.0.5.3","group":"g2"}`,
		"/skydns/internal/example/grp":                                                     `{"host":"10.0.5.9","group":"g2"}`,
		"/skydns/internal/example/ent/a/leaf":                                              `{"host":"10.0.6.1"}`,
		"/skydns/internal/example/wild/*":                                                  `{"host":"10.0.7.7"}`,
		"/skydns/internal/example/dns/apex/x1":                                             `{"host":"10.0.8.1"}`,
		"/skydns/internal/example/dns/apex/x2":                                             `{"host":"10.0.8.2"}`,
		"/skydns/internal/example/dns/ns/ns1":                                              `{"host":"10.0.9.1"}`,
		"/skydns/internal/example/dns/ns/ns2":                                              `{"host":"10.0.9.2"}`,
		"/skydns/arpa/in-addr/10/0/0/5":                                                    `{"host":"db.example.internal."}`,
		"/skydns/arpa/ip6/f/d/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/5": `{"host":"v6.example.internal"}`,
	} {
		srv.Put(k, v)
	}
	f := openFixture(t, srv, nil)
	f.waitSynced()

	for _, c := range []struct {
		name  string
		qtype uint16
		want  string
	}{
		{"db.example.internal", dns.TypeA, "NOERROR:A 10.0.0.5"},
		{"DB.Example.Internal", dns.TypeA, "NOERROR:A 10.0.0.5"},
		{"db.example.internal", dns.TypeAAAA, "NOERROR:"}, // NODATA
		{"v6.example.internal", dns.TypeAAAA, "NOERROR:AAAA fd00::5"},
		{"www.example.internal", dns.TypeA, "NOERROR:A 10.0.0.5,CNAME db.example.internal."},
		{"ext.example.internal", dns.TypeCNAME, "NOERROR:CNAME www.example.org."},
		{"multi.example.internal", dns.TypeA, "NOERROR:A 10.0.1.1,A 10.0.1.2"},
		{"multi.example.internal", dns.TypeAAAA, "NOERROR:AAAA fd00::1:3"},
		{"x2.multi.example.internal", dns.TypeA, "NOERROR:A 10.0.1.2"},
		{"_pg._tcp.example.internal", dns.TypeSRV, "NOERROR:SRV 10 100 5433 db.example.internal.,SRV 10 20 5432 a._pg._tcp.example.internal."},
		{"_http._tcp.example.internal", dns.TypeSRV, "NOERROR:SRV 10 100 80 _http._tcp.example.internal."},
		{"txt.example.internal", dns.TypeTXT, `NOERROR:TXT "hello world"`},
		{"mail.example.internal", dns.TypeMX, "NOERROR:MX 10 db.example.internal.,MX 5 mx1.mail.example.internal."},
		{"grp.example.internal", dns.TypeA, "NOERROR:A 10.0.5.3,A 10.0.5.9"},
		{"ent.example.internal", dns.TypeA, "NOERROR:"}, // empty non-terminal
		{"a.ent.example.internal", dns.TypeA, "NOERROR:A 10.0.6.1"},
		{"nope.example.internal", dns.TypeA, "NXDOMAIN:"},
		{"anything.wild.example.internal", dns.TypeA, "NOERROR:A 10.0.7.7"},
		{"wild.example.internal", dns.TypeA, "NOERROR:"}, // the wildcard's parent: an empty non-terminal (RFC 4592)
		{"x1.*.example.internal", dns.TypeA, "NOERROR:A 10.0.1.1"},
		{"*.multi.example.internal", dns.TypeA, "NOERROR:A 10.0.1.1,A 10.0.1.2"},
		{"example.internal", dns.TypeA, "NOERROR:A 10.0.8.1,A 10.0.8.2"},
		{"example.internal", dns.TypeNS, "NOERROR:NS ns1.ns.dns.example.internal.,NS ns2.ns.dns.example.internal."},
		{"5.0.0.10.in-addr.arpa", dns.TypePTR, "NOERROR:PTR db.example.internal."},
		{"5.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.d.f.ip6.arpa", dns.TypePTR, "NOERROR:PTR v6.example.internal."},
	} {
		if got := answer(f.ask(c.name, c.qtype)); got != c.want {
			t.Errorf("%s %s = %q, want %q", c.name, dns.TypeToString[c.qtype], got, c.want)
		}
	}

	// TTLs: the value's, else the configured one; owners as asked.
	r := f.ask("V6.example.internal", dns.TypeAAAA)
	if len(r.Answer) != 1 || r.Answer[0].Header().Ttl != 60 || r.Answer[0].Header().Name != "V6.example.internal." || !r.Authoritative {
		t.Errorf("v6: %v", r.Answer)
	}
	if r := f.ask("db.example.internal", dns.TypeA); r.Answer[0].Header().Ttl != 300 {
		t.Errorf("db ttl = %d, want 300", r.Answer[0].Header().Ttl)
	}
	// Additional section: SRV and MX targets' addresses.
	if got := extra(f.ask("_pg._tcp.example.internal", dns.TypeSRV)); got != "a._pg._tcp.example.internal. A 10.0.2.1,db.example.internal. A 10.0.0.5" {
		t.Errorf("SRV additional = %q", got)
	}
	if got := extra(f.ask("mail.example.internal", dns.TypeMX)); got != "db.example.internal. A 10.0.0.5,mx1.mail.example.internal. A 10.0.4.1" {
		t.Errorf("MX additional = %q", got)
	}
	if got := extra(f.ask("example.internal", dns.TypeNS)); got != "ns1.ns.dns.example.internal. A 10.0.9.1,ns2.ns.dns.example.internal. A 10.0.9.2" {
		t.Errorf("NS additional = %q", got)
	}
	// SOA is synthesized at the apex and in negative answers.
	if r := f.ask("nope.example.internal", dns.TypeA); len(r.Ns) != 1 || r.Ns[0].Header().Rrtype != dns.TypeSOA {
		t.Errorf("NXDOMAIN without SOA: %v", r.Ns)
	}
	if got := answer(f.ask("example.internal", dns.TypeSOA)); !strings.HasPrefix(got, "NOERROR:SOA ns.dns.example.internal. hostmaster.example.internal.") {
		t.Errorf("apex SOA = %q", got)
	}
}

func TestPutUpdateDeletePropagation(t *testing.T) {
	srv := etcdtest.Start(t, etcdtest.Options{})
	f := openFixture(t, srv, nil)
	f.waitSynced()
	f.eventually("db.example.internal", dns.TypeA, "NXDOMAIN:")

	var worst time.Duration
	srv.Put("/skydns/internal/example/db", `{"host":"10.0.0.5"}`)
	worst = max(worst, f.eventually("db.example.internal", dns.TypeA, "NOERROR:A 10.0.0.5"))
	srv.Put("/skydns/internal/example/db", `{"host":"10.0.0.6"}`)
	worst = max(worst, f.eventually("db.example.internal", dns.TypeA, "NOERROR:A 10.0.0.6"))
	srv.Put("/skydns/internal/example/db/x2", `{"host":"10.0.0.7"}`)
	worst = max(worst, f.eventually("db.example.internal", dns.TypeA, "NOERROR:A 10.0.0.6,A 10.0.0.7"))
	srv.Delete("/skydns/internal/example/db")
	worst = max(worst, f.eventually("db.example.internal", dns.TypeA, "NOERROR:A 10.0.0.7"))
	srv.Delete("/skydns/internal/example/db/x2")
	worst = max(worst, f.eventually("db.example.internal", dns.TypeA, "NXDOMAIN:"))
	t.Logf("slowest put/delete -> served: %v", worst)

	if got := metricValue(f.m.events.WithLabelValues(f.b.opts.Name, "put")); got != 3 {
		t.Errorf("put events = %v, want 3", got)
	}
	if got := metricValue(f.m.events.WithLabelValues(f.b.opts.Name, "delete")); got != 2 {
		t.Errorf("delete events = %v, want 2", got)
	}
	if s1 := f.b.Serial(); s1 == 0 {
		t.Error("serial is 0")
	}
}

// A watch that starts after its revision was compacted re-lists: keys
// put, changed and deleted meanwhile are all reflected.
func TestCompactionRelists(t *testing.T) {
	srv := etcdtest.Start(t, etcdtest.Options{})
	srv.Put("/skydns/internal/example/keep", `{"host":"10.0.0.1"}`)
	srv.Put("/skydns/internal/example/change", `{"host":"10.0.0.2"}`)
	srv.Put("/skydns/internal/example/gone", `{"host":"10.0.0.3"}`)
	hold := make(chan struct{})
	var first sync.Once
	var begun, ended atomic.Int32 // lists told to Options.Bulk
	f := openFixture(t, srv, func(o *Options) {
		o.beforeWatch = func() { first.Do(func() { <-hold }) }
		o.Bulk = func() func() {
			begun.Add(1)
			return func() { ended.Add(1) }
		}
	})
	f.waitSynced()
	f.eventually("gone.example.internal", dns.TypeA, "NOERROR:A 10.0.0.3")
	settled := func(n int32) {
		t.Helper()
		// synced comes just before a list returns, and ends its burst
		for deadline := time.Now().Add(5 * time.Second); ended.Load() < n && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
	}
	settled(1)
	if b, e := begun.Load(), ended.Load(); b != 1 || e != 1 {
		t.Errorf("the first list: %d bursts begun, %d ended; want 1, 1", b, e)
	}

	// While the watch is held back: changes, then a compaction past them.
	srv.Put("/skydns/internal/example/change", `{"host":"10.0.0.22"}`)
	srv.Delete("/skydns/internal/example/gone")
	srv.Put("/skydns/internal/example/new", `{"host":"10.0.0.4"}`)
	srv.Compact()
	close(hold)

	f.eventually("new.example.internal", dns.TypeA, "NOERROR:A 10.0.0.4")
	f.eventually("change.example.internal", dns.TypeA, "NOERROR:A 10.0.0.22")
	f.eventually("gone.example.internal", dns.TypeA, "NXDOMAIN:")
	f.eventually("keep.example.internal", dns.TypeA, "NOERROR:A 10.0.0.1")
	if got := metricValue(f.m.relists.WithLabelValues(f.b.opts.Name, "compacted")); got != 1 {
		t.Errorf("compaction re-lists = %v, want 1", got)
	}
	settled(2)
	if b, e := begun.Load(), ended.Load(); b != 2 || e != 2 {
		t.Errorf("the first list and a re-list: %d bursts begun, %d ended; want 2, 2", b, e)
	}
	// The watch goes on after the re-list.
	srv.Put("/skydns/internal/example/after", `{"host":"10.0.0.5"}`)
	f.eventually("after.example.internal", dns.TypeA, "NOERROR:A 10.0.0.5")
}

// The watch starts at the listed revision + 1: changes made between the
// list and the watch are all applied, without a re-list.
func TestWatchFollowsList(t *testing.T) {
	srv := etcdtest.Start(t, etcdtest.Options{})
	srv.Put("/skydns/internal/example/a", `{"host":"10.0.0.1"}`)
	srv.Put("/skydns/internal/example/b", `{"host":"10.0.0.2"}`)
	hold := make(chan struct{})
	var first sync.Once
	f := openFixture(t, srv, func(o *Options) {
		o.beforeWatch = func() { first.Do(func() { <-hold }) }
	})
	f.waitSynced()
	srv.Put("/skydns/internal/example/a", `{"host":"10.0.0.11"}`)
	srv.Delete("/skydns/internal/example/b")
	srv.Put("/skydns/internal/example/c", `{"host":"10.0.0.3"}`)
	srv.Put("/skydns/internal/example/c", `{"host":"10.0.0.33"}`)
	if got := answer(f.ask("a.example.internal", dns.TypeA)); got != "NOERROR:A 10.0.0.1" {
		t.Fatalf("before the watch: a = %q", got)
	}
	close(hold)
	f.eventually("a.example.internal", dns.TypeA, "NOERROR:A 10.0.0.11")
	f.eventually("b.example.internal", dns.TypeA, "NXDOMAIN:")
	f.eventually("c.example.internal", dns.TypeA, "NOERROR:A 10.0.0.33")
	if got := metricValue(f.m.relists.WithLabelValues(f.b.opts.Name, "start")); got != 1 {
		t.Errorf("lists = %v, want 1", got)
	}
	if got := metricValue(f.m.events.WithLabelValues(f.b.opts.Name, "put")); got != 3 {
		t.Errorf("put events = %v, want 3 (none lost, none twice)", got)
	}
}

// etcd stopped while dnsd serves: the last data stays, the metric and the
// log say etcd is unreachable; restarted: new puts are served again.
func TestEtcdOutage(t *testing.T) {
	srv := etcdtest.Start(t, etcdtest.Options{})
	srv.Put("/skydns/internal/example/db", `{"host":"10.0.0.5"}`)
	srv.Put("/skydns/internal/example/old", `{"host":"10.0.0.6"}`)
	f := openFixture(t, srv, nil)
	f.waitSynced()
	dnstest.Eventually(t, "backend up", 20*time.Second, f.b.Up)

	srv.Stop()
	dnstest.Eventually(t, "backend down", 20*time.Second, func() bool { return !f.b.Up() })
	if got := metricValue(f.m.up.WithLabelValues(f.b.opts.Name)); got != 0 {
		t.Errorf("dnsd_etcd_up = %v during the outage", got)
	}
	dnstest.Eventually(t, "outage logged", 20*time.Second, func() bool { return strings.Contains(f.log.String(), "etcd unreachable; serving the last data") })
	for range 3 {
		if got := answer(f.ask("db.example.internal", dns.TypeA)); got != "NOERROR:A 10.0.0.5" {
			t.Fatalf("during the outage: db = %q", got)
		}
		time.Sleep(100 * time.Millisecond)
	}

	srv.Restart()
	srv.Put("/skydns/internal/example/new", `{"host":"10.0.0.7"}`)
	srv.Delete("/skydns/internal/example/old")
	f.eventually("new.example.internal", dns.TypeA, "NOERROR:A 10.0.0.7")
	f.eventually("old.example.internal", dns.TypeA, "NXDOMAIN:")
	f.eventually("db.example.internal", dns.TypeA, "NOERROR:A 10.0.0.5")
	dnstest.Eventually(t, "backend up again", 20*time.Second, f.b.Up)
	if got := metricValue(f.m.up.WithLabelValues(f.b.opts.Name)); got != 1 {
		t.Errorf("dnsd_etcd_up = %v after the restart", got)
	}
	for _, reason := range []string{"compacted", "cluster_changed", "revision_back", "history_changed"} {
		if got := metricValue(f.m.relists.WithLabelValues(f.b.opts.Name, reason)); got != 0 {
			t.Errorf("the watch re-listed (%v, %s) instead of resuming", got, reason)
		}
	}
}

func TestTLSAndAuth(t *testing.T) {
	const password = "s3cret-Pa55word"
	srv := etcdtest.Start(t, etcdtest.Options{TLS: true, Auth: true, Username: "dnsd", Password: password})
	srv.Put("/skydns/internal/example/db", `{"host":"10.0.0.5"}`)
	f := openFixture(t, srv, func(o *Options) {
		o.TLS = srv.Certs.ClientTLS(t)
		o.Username, o.Password = "dnsd", password
	})
	f.waitSynced()
	f.eventually("db.example.internal", dns.TypeA, "NOERROR:A 10.0.0.5")
	srv.Put("/skydns/internal/example/db", `{"host":"10.0.0.6"}`)
	f.eventually("db.example.internal", dns.TypeA, "NOERROR:A 10.0.0.6")

	// A wrong password never syncs: SERVFAIL, and no secret in the log.
	bad := openFixture(t, srv, func(o *Options) {
		o.TLS = srv.Certs.ClientTLS(t)
		o.Username, o.Password = "dnsd", "wrong-"+password
	})
	dnstest.Eventually(t, "auth failure logged", 20*time.Second, func() bool { return strings.Contains(bad.log.String(), "etcd connect failed") })
	if got := answer(bad.ask("db.example.internal", dns.TypeA)); got != "SERVFAIL:" {
		t.Errorf("wrong password: db = %q, want SERVFAIL", got)
	}
	// No client certificate: the TLS handshake fails.
	nocert := openFixture(t, srv, func(o *Options) {
		tc := srv.Certs.ClientTLS(t)
		tc.Certificates = nil
		o.TLS = tc
		o.Username, o.Password = "dnsd", password
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := nocert.b.WaitSynced(ctx); err == nil {
		t.Error("synced without a client certificate")
	}
	// The certificate names etcd.test, not 127.0.0.1 (the endpoint's
	// host): verified against server_name; another name fails.
	wrongName := openFixture(t, srv, func(o *Options) {
		tc := srv.Certs.ClientTLS(t)
		tc.ServerName = "other.test"
		o.TLS = tc
		o.Username, o.Password = "dnsd", password
	})
	ctx2, cancel2 := context.WithTimeout(context.Background(), time.Second)
	defer cancel2()
	if err := wrongName.b.WaitSynced(ctx2); err == nil {
		t.Error("synced with a server_name the certificate does not name")
	}
	for _, l := range []*logBuf{f.log, bad.log, nocert.log} {
		if strings.Contains(l.String(), password) {
			t.Fatalf("a password was logged:\n%s", l.String())
		}
	}
}

// Nothing listens at the endpoint: not synced, SERVFAIL, and WaitSynced
// gives up with its context. Close does not hang.
func TestNotSyncedServfail(t *testing.T) {
	port := etcdtest.FreePort(t)
	f := &fixture{t: t, log: &logBuf{}, m: NewMetrics()}
	var bursts atomic.Int32 // begun and not ended: none while etcd is unreachable
	b, err := Open(Options{
		Bulk: func() func() {
			bursts.Add(1)
			return func() { bursts.Add(-1) }
		},
		Endpoints: []string{fmt.Sprintf("http://127.0.0.1:%d", port)},
		Prefix:    "/skydns",
		TTL:       time.Minute,
		Logger:    slog.New(slog.NewTextHandler(f.log, nil)),
		Metrics:   f.m,
		RetryMin:  20 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	src := NewSource(b, []string{"example.internal."}, time.Minute)
	f.p, _ = pipeline.New([]pipeline.ZoneSpec{{Names: []string{"example.internal."}, Sources: []pipeline.SourceEntry{{Source: src, Fallthrough: true}}}}, pipeline.Options{})
	for _, name := range []string{"db.example.internal", "example.internal"} {
		if got := answer(f.ask(name, dns.TypeA)); got != "SERVFAIL:" {
			t.Errorf("%s before sync = %q, want SERVFAIL (never NXDOMAIN, never a fall-through)", name, got)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if err := src.WaitSynced(ctx); err == nil || src.Synced() {
		t.Error("synced with nothing listening")
	}
	if n := bursts.Load(); n != 0 {
		t.Errorf("%d bursts of background work under way while etcd is unreachable, want 0", n)
	}
	done := make(chan struct{})
	go func() { b.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Close hangs while etcd is unreachable")
	}
}

// Malformed values are skipped, logged once per key revision and
// counted; the name's other records keep working. A member the format
// does not know is ignored, as SkyDNS and CoreDNS ignore it; a misspelt
// one that leaves no record is reported as such.
func TestMalformedValues(t *testing.T) {
	srv := etcdtest.Start(t, etcdtest.Options{})
	srv.Put("/skydns/internal/example/db/x1", `{"host":"10.0.0.1"}`)
	srv.Put("/skydns/internal/example/db/x2", `{"host":"10.0.0.300"}`)
	srv.Put("/skydns/internal/example/db/x3", `{"hots":"10.0.0.3"}`)
	srv.Put("/skydns/internal/example/db/x4", `not json`)
	srv.Put("/skydns/internal/example/db/x5", `{"host":"10.0.0.5","key":"/skydns/internal/example/db/x5","colour":"red"}`)
	srv.Put("/skydns/internal/example/bad.label", `{"host":"10.0.0.9"}`)
	f := openFixture(t, srv, nil)
	f.waitSynced()
	f.eventually("db.example.internal", dns.TypeA, "NOERROR:A 10.0.0.1,A 10.0.0.5")
	if got := metricValue(f.m.malformed.WithLabelValues(f.b.opts.Name)); got != 4 {
		t.Errorf("malformed = %v, want 4", got)
	}
	log := f.log.String()
	for _, want := range []string{"x2 revision=", "bad IP address", "x3 revision=", "no record", "x4 revision=", "bad.label"} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %q", want)
		}
	}
	// A fix is picked up; a new bad revision is logged again.
	srv.Put("/skydns/internal/example/db/x2", `{"host":"10.0.0.2"}`)
	f.eventually("db.example.internal", dns.TypeA, "NOERROR:A 10.0.0.1,A 10.0.0.2,A 10.0.0.5")
	srv.Put("/skydns/internal/example/db/x2", `{"host":"::zz"}`)
	f.eventually("db.example.internal", dns.TypeA, "NOERROR:A 10.0.0.1,A 10.0.0.5")
	if got := metricValue(f.m.malformed.WithLabelValues(f.b.opts.Name)); got != 5 {
		t.Errorf("malformed = %v, want 5", got)
	}
	// The log line may follow the published data by a moment.
	dnstest.Eventually(t, "5 'skipped' log lines (once per key revision)", 5*time.Second, func() bool {
		return strings.Count(f.log.String(), "etcd value skipped") == 5
	})
	time.Sleep(50 * time.Millisecond)
	if n := strings.Count(f.log.String(), "etcd value skipped"); n != 5 {
		t.Errorf("%d 'skipped' log lines, want 5 (once per key revision)", n)
	}
}

// While the connection stays down, the cause follows what the retries
// fail with: a server that accepts and hangs up, then nothing listening.
func TestCauseFollowsRetries(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	f := &fixture{t: t, log: &logBuf{}, m: NewMetrics()}
	b, err := Open(Options{
		Endpoints: []string{"http://" + ln.Addr().String()},
		Prefix:    "/skydns",
		TTL:       time.Minute,
		Logger:    slog.New(slog.NewTextHandler(f.log, nil)),
		Metrics:   f.m,
		RetryMin:  20 * time.Millisecond,
		RetryMax:  200 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	dnstest.Eventually(t, "a cause while the server hangs up", 10*time.Second, func() bool { return b.Problem() != "" })
	if p := b.Problem(); strings.Contains(p, "refused") {
		t.Fatalf("cause %q while the server accepts", p)
	}
	ln.Close()
	dnstest.Eventually(t, "the cause to become the refused connections", 10*time.Second, func() bool {
		return strings.Contains(b.Problem(), "connection refused")
	})
}

// One endpoint of several is dead: the client uses the live one.
func TestSeveralEndpoints(t *testing.T) {
	srv := etcdtest.Start(t, etcdtest.Options{})
	srv.Put("/skydns/internal/example/db", `{"host":"10.0.0.5"}`)
	dead := fmt.Sprintf("http://127.0.0.1:%d", etcdtest.FreePort(t))
	f := openFixture(t, srv, func(o *Options) { o.Endpoints = []string{dead, srv.Endpoint()} })
	f.waitSynced()
	f.eventually("db.example.internal", dns.TypeA, "NOERROR:A 10.0.0.5")
	srv.Put("/skydns/internal/example/db", `{"host":"10.0.0.6"}`)
	f.eventually("db.example.internal", dns.TypeA, "NOERROR:A 10.0.0.6")
}

// A prefix of many keys is read in pages at one revision.
func TestPagedList(t *testing.T) {
	srv := etcdtest.Start(t, etcdtest.Options{})
	cli := srv.Client()
	for i := range 250 {
		if _, err := cli.Put(context.Background(), fmt.Sprintf("/skydns/internal/example/h%03d", i), fmt.Sprintf(`{"host":"10.1.%d.%d"}`, i/256, i%256)); err != nil {
			t.Fatal(err)
		}
	}
	// Keys outside the prefix ("/skydnsx") are not read.
	srv.Put("/skydnsx/internal/example/h000", `{"host":"10.9.9.9"}`)
	f := openFixture(t, srv, func(o *Options) { o.PageSize = 7 })
	f.waitSynced()
	if got := f.b.Records(); got != 250 {
		t.Errorf("records = %d, want 250", got)
	}
	f.eventually("h000.example.internal", dns.TypeA, "NOERROR:A 10.1.0.0")
	f.eventually("h249.example.internal", dns.TypeA, "NOERROR:A 10.1.0.249")
}

// metricValue reads a counter or gauge.
func metricValue(m prometheus.Metric) float64 {
	var d dto.Metric
	if err := m.Write(&d); err != nil {
		panic(err)
	}
	if c := d.GetCounter(); c != nil {
		return c.GetValue()
	}
	return d.GetGauge().GetValue()
}
