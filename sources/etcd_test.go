package sources

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/dnsd/dnsd/internal/dnstest"
	"github.com/dnsd/dnsd/pipeline"
	"github.com/dnsd/dnsd/sources/etcd"
	"github.com/dnsd/dnsd/sources/etcd/etcdtest"
	"github.com/dnsd/dnsd/sources/kind"
)

// Zones with the same etcd settings share one backend (one client, one
// watch), across zones and reloads; a changed password makes a new one;
// the password never appears in the registry's keys or logs. The etcd
// server wants TLS with a client certificate (verified against the CA
// and server_name of dnsd.yaml) and a password.
func TestEtcdBackendSharing(t *testing.T) {
	const password = "first-Secret-pw"
	srv := etcdtest.Start(t, etcdtest.Options{TLS: true, Auth: true, Username: "dnsd", Password: password})
	srv.Put("/skydns/test/one/x", `{"host":"10.0.0.1"}`)
	srv.Put("/skydns/test/two/y", `{"host":"10.0.0.2"}`)
	dir := t.TempDir()
	pwFile := filepath.Join(dir, "etcd.password")
	if err := os.WriteFile(pwFile, []byte(password+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	yaml := fmt.Sprintf(`zones:
  one.test:
    - etcd: {endpoints: ["%[1]s"], username: dnsd, password_file: etcd.password, ttl: 30s, tls: %[2]s}
  two.test:
    - etcd: {endpoints: ["%[1]s"], username: dnsd, password_file: etcd.password, ttl: 30s, tls: %[2]s}
`, srv.Endpoint(), fmt.Sprintf("{ca: %s, cert: %s, key: %s, server_name: %s}", srv.Certs.CA, srv.Certs.ClientCert, srv.Certs.ClientKey, srv.Certs.ServerName))
	cfg := load(t, dir, yaml)
	var logs bytes.Buffer
	reg := NewRegistry(Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	defer reg.Close()
	p1, set1, err := reg.Build(context.Background(), cfg, pipeline.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if reg.Len() != 1 || len(set1.Fresh) != 1 {
		t.Fatalf("two zones, same etcd settings: %d backends, %d fresh; want 1, 1", reg.Len(), len(set1.Fresh))
	}
	waitSources(t, p1)
	if got := resolveA(t, p1, "x.one.test."); got != "10.0.0.1" {
		t.Fatalf("x.one.test = %s", got)
	}
	if got := resolveA(t, p1, "y.two.test."); got != "10.0.0.2" {
		t.Fatalf("y.two.test = %s", got)
	}

	// A reload with the same settings reuses the backend.
	p2, set2, err := reg.Build(context.Background(), load(t, dir, yaml), pipeline.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if reg.Len() != 1 || len(set2.Fresh) != 0 {
		t.Fatalf("same settings: %d backends, %d fresh; want 1, 0", reg.Len(), len(set2.Fresh))
	}
	set1.Release()
	if got := resolveA(t, p2, "x.one.test."); got != "10.0.0.1" {
		t.Fatalf("after the reload: x.one.test = %s", got)
	}

	// The password file changes (same path): a new backend.
	if err := os.WriteFile(pwFile, []byte("another-pw\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, set3, err := reg.Build(context.Background(), load(t, dir, yaml), pipeline.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(set3.Fresh) != 1 || reg.Len() != 2 {
		t.Fatalf("changed password: %d fresh, %d running; want 1, 2", len(set3.Fresh), reg.Len())
	}
	// The two backends, differing in a secret only, are one stable name
	// in dnsd_source_synced (the secrets' hash is salted per process).
	var names []string
	reg.Synced(func(name string, _ bool) { names = append(names, name) })
	if len(names) != 1 || strings.Contains(names[0], "secrets=") {
		t.Errorf("dnsd_source_synced names %q, want one, without the secrets' hash", names)
	}
	set2.Release()
	set3.Release()
	if reg.Len() != 0 {
		t.Fatalf("%d backends left after releasing every set", reg.Len())
	}
	var keys []string
	reg.Synced(func(name string, _ bool) { keys = append(keys, name) })
	for _, s := range append(keys, logs.String(), set3.Fresh[0]) {
		if strings.Contains(s, password) || strings.Contains(s, "another-pw") {
			t.Fatalf("a password leaked: %s", s)
		}
	}
}

// dnsd check (DryRun) reads the local files but connects to nothing.
func TestEtcdDryRun(t *testing.T) {
	dir := t.TempDir()
	cfg := load(t, dir, `zones:
  one.test:
    - etcd: {endpoints: ["http://127.0.0.1:1"]}
`)
	reg := NewRegistry(Options{DryRun: true})
	defer reg.Close()
	_, set, err := reg.Build(context.Background(), cfg, pipeline.Options{})
	if err != nil {
		t.Fatal(err)
	}
	set.Release()
	if reg.Len() != 0 {
		t.Fatalf("dry run started %d backends", reg.Len())
	}
}

func waitSources(t *testing.T, p *pipeline.Pipeline) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, s := range p.Sources() {
		if sy, ok := s.(pipeline.Syncer); ok {
			if err := sy.WaitSynced(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// A reload during an etcd outage never turns answered names into
// SERVFAIL. A ttl change gets a new view of the same connection, built
// from the data it holds: synced at once, the new ttl served at once. A
// replacement connection (other endpoints, here the same server under
// another name) that cannot sync is handed the zone only once it has, the
// old one answering until then; then the old one is stopped.
func TestEtcdReloadDuringOutageHandsOver(t *testing.T) {
	srv := etcdtest.Start(t, etcdtest.Options{})
	srv.Put("/skydns/test/one/x", `{"host":"10.0.0.1"}`)
	dir := t.TempDir()
	conf := func(endpoint, ttl string) string {
		return fmt.Sprintf("zones:\n  one.test:\n    - etcd: {endpoints: [%q], ttl: %s, sync_timeout: 300ms}\n", endpoint, ttl)
	}
	localhost := strings.Replace(srv.Endpoint(), "127.0.0.1", "localhost", 1)
	reg := NewRegistry(Options{})
	defer reg.Close()
	cfg1 := load(t, dir, conf(srv.Endpoint(), "30s"))
	p1, set1, err := reg.Build(context.Background(), cfg1, pipeline.Options{})
	if err != nil {
		t.Fatal(err)
	}
	reg.Swapped(cfg1, p1, set1)
	waitSources(t, p1)

	srv.Stop()
	answer := func(p *pipeline.Pipeline) string {
		m := new(dns.Msg)
		m.SetQuestion("x.one.test.", dns.TypeA)
		r := p.Resolve(context.Background(), &pipeline.Request{Msg: m, Name: "x.one.test.", Type: dns.TypeA})
		if len(r.Msg.Answer) == 0 {
			return dns.RcodeToString[r.Msg.Rcode]
		}
		return r.Msg.Answer[0].String()
	}
	sets := []*Set{set1}
	p := p1
	for _, c := range []struct {
		what, yaml string
		unsynced   int
	}{
		{"ttl changed", conf(srv.Endpoint(), "45s"), 0},
		{"endpoint changed", conf(localhost, "45s"), 1},
	} {
		cfg2 := load(t, dir, c.yaml)
		p2, set2, err := reg.Build(context.Background(), cfg2, pipeline.Options{})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		unsynced := set2.WaitFresh(ctx)
		if len(unsynced) != c.unsynced {
			t.Fatalf("%s during the outage: %d unsynced new backends, want %d", c.what, len(unsynced), c.unsynced)
		}
		cancel()
		for _, key := range unsynced {
			if !set2.Covered(key) { // what the reload's warning says
				t.Errorf("%s: the unsynced replacement is not covered by the old backend", c.what)
			}
		}
		reg.Swapped(cfg2, p2, set2)
		sets[len(sets)-1].Release() // the old generation is done
		sets = append(sets, set2)
		p = p2
		if got, want := answer(p), "x.one.test.\t45\tIN\tA\t10.0.0.1"; got != want {
			t.Fatalf("%s during the outage: x.one.test = %q, want %q", c.what, got, want)
		}
	}
	// The old connection's view (answering) and the unsynced replacement.
	if n := reg.Len(); n != 2 {
		t.Fatalf("%d backends running during the handover, want 2 (old answering + replacement)", n)
	}

	srv.Restart()
	srv.Put("/skydns/test/one/x", `{"host":"10.0.0.2"}`)
	deadline := time.Now().Add(20 * time.Second)
	for answer(p) != "x.one.test.\t45\tIN\tA\t10.0.0.2" || reg.Len() != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("after etcd came back: x.one.test = %s, %d backends; want 10.0.0.2 from the replacement, 1 backend", answer(p), reg.Len())
		}
		time.Sleep(20 * time.Millisecond)
	}
	// A zone added with an etcd that cannot sync has no backend before
	// it: not covered, its names answer SERVFAIL.
	dead := fmt.Sprintf("http://127.0.0.1:%d", etcdtest.FreePort(t))
	cfg3 := load(t, dir, conf(localhost, "45s")+fmt.Sprintf("  two.test:\n    - etcd: {endpoints: [%q], sync_timeout: 100ms}\n", dead))
	_, set3, err := reg.Build(context.Background(), cfg3, pipeline.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	unsynced := set3.WaitFresh(ctx)
	cancel()
	if len(unsynced) != 1 || set3.Covered(unsynced[0]) {
		t.Errorf("a new zone's unsynced backend: %q, covered %v; want one, not covered", unsynced, len(unsynced) == 1 && set3.Covered(unsynced[0]))
	}
	set3.Release()
	sets[len(sets)-1].Release()
}

// Sources of one connection with different ttls share one client and
// watch (an endpoint written with a trailing slash is the same one); each
// answers with its own ttl, and a change reaches both.
func TestEtcdViewsPerTTL(t *testing.T) {
	srv := etcdtest.Start(t, etcdtest.Options{})
	srv.Put("/skydns/test/one/x", `{"host":"10.0.0.1"}`)
	srv.Put("/skydns/test/two/y", `{"host":"10.0.0.2","ttl":7}`)
	dir := t.TempDir()
	cfg := load(t, dir, fmt.Sprintf("zones:\n  one.test:\n    - etcd: {endpoints: [%[1]q], ttl: 30s}\n  two.test:\n    - etcd: {endpoints: [%[1]q], ttl: 60s}\n  three.test:\n    - etcd: {endpoints: [\"%[1]s/\"], ttl: 60s}\n", srv.Endpoint())) // a trailing slash: the same endpoint
	ek := etcd.NewKind()
	reg := NewRegistry(Options{Kinds: []kind.Kind{ek}})
	defer reg.Close()
	p, set, err := reg.Build(context.Background(), cfg, pipeline.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer set.Release()
	waitSources(t, p)
	if n := ek.Connections(); n != 1 || reg.Len() != 2 {
		t.Fatalf("%d etcd connections, %d backends; want 1 connection, 2 views (30s, 60s)", n, reg.Len())
	}
	ttlOf := func(name string) uint32 {
		m := new(dns.Msg)
		m.SetQuestion(name, dns.TypeA)
		r := p.Resolve(context.Background(), &pipeline.Request{Msg: m, Name: name, Type: dns.TypeA})
		if len(r.Msg.Answer) != 1 {
			t.Fatalf("%s: %v", name, r.Msg)
		}
		return r.Msg.Answer[0].Header().Ttl
	}
	if a, b := ttlOf("x.one.test."), ttlOf("y.two.test."); a != 30 || b != 7 {
		t.Fatalf("ttls %d (default of one.test) and %d (the value's own); want 30 and 7", a, b)
	}
	srv.Put("/skydns/test/two/z", `{"host":"10.0.0.3"}`)
	deadline := time.Now().Add(5 * time.Second)
	for resolveA(t, p, "z.two.test.") != "10.0.0.3" {
		if time.Now().After(deadline) {
			t.Fatal("a put did not reach the 60s view")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got := ttlOf("z.two.test."); got != 60 {
		t.Fatalf("new record in the 60s view has ttl %d", got)
	}
}

// The etcd backends the registry builds tell Options.Bulk of their lists
// of the prefix.
func TestEtcdListToldToBulk(t *testing.T) {
	srv := etcdtest.Start(t, etcdtest.Options{})
	srv.Put("/skydns/test/one/x", `{"host":"10.0.0.1"}`)
	var begun, ended atomic.Int32
	reg := NewRegistry(Options{Bulk: func() func() {
		begun.Add(1)
		return func() { ended.Add(1) }
	}})
	defer reg.Close()
	cfg := load(t, t.TempDir(), fmt.Sprintf("zones:\n  one.test:\n    - etcd: {endpoints: [%q]}\n", srv.Endpoint()))
	p, set, err := reg.Build(context.Background(), cfg, pipeline.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer set.Release()
	waitSources(t, p)
	// synced comes just before the list returns, and ends its burst
	for deadline := time.Now().Add(5 * time.Second); ended.Load() == 0 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	if b, e := begun.Load(), ended.Load(); b != 1 || e != 1 {
		t.Errorf("after the first list: %d bursts begun, %d ended; want 1, 1", b, e)
	}
}

// A reload that replaces the backend of an etcd source with updates: true
// during an outage keeps the zone's writable source: the handover takes
// updates for the replacement, which refuses them until it has synced
// (the zone stays open to updates; the reload does not fail for want of
// a writable source).
func TestEtcdUpdatesReloadDuringOutage(t *testing.T) {
	srv := etcdtest.Start(t, etcdtest.Options{})
	srv.Put("/skydns/test/one/x", `{"host":"10.0.0.1"}`)
	dir := t.TempDir()
	conf := func(endpoint string) string {
		return fmt.Sprintf("zones:\n  one.test:\n    - etcd: {endpoints: [%q], updates: true, sync_timeout: 300ms}\n", endpoint)
	}
	reg := NewRegistry(Options{})
	defer reg.Close()
	cfg1 := load(t, dir, conf(srv.Endpoint()))
	p1, set1, err := reg.Build(context.Background(), cfg1, pipeline.Options{})
	if err != nil {
		t.Fatal(err)
	}
	reg.Swapped(cfg1, p1, set1)
	waitSources(t, p1)
	srv.Stop()

	cfg2 := load(t, dir, conf(strings.Replace(srv.Endpoint(), "127.0.0.1", "localhost", 1)))
	p2, set2, err := reg.Build(context.Background(), cfg2, pipeline.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer set2.Release()
	reg.Swapped(cfg2, p2, set2)
	set1.Release()
	isWriter := func(s pipeline.Source) bool { _, ok := s.(pipeline.Writer); return ok }
	w, ok := p2.ZoneSource("one.test.", isWriter).(pipeline.Writer)
	if !ok {
		t.Fatal("after the reload during the outage the zone has no writable source")
	}
	if txn, err := w.BeginUpdate(context.Background(), "one.test."); err == nil {
		txn.Abort()
		t.Fatal("an update began on a replacement that has not synced")
	}
	srv.Restart()
	dnstest.EventuallyNil(t, 20*time.Second, func() error {
		txn, err := w.BeginUpdate(context.Background(), "one.test.")
		if err == nil {
			txn.Abort()
		}
		return err
	})
}
