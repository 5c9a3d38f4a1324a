package sources

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/dnsd/dnsd/config"
	"github.com/dnsd/dnsd/internal/pacing"
	"github.com/dnsd/dnsd/pipeline"
	"github.com/dnsd/dnsd/sources/etcd/etcdtest"
	"github.com/dnsd/dnsd/sources/hosts"
	"github.com/dnsd/dnsd/sources/kind"
)

func load(t *testing.T, dir, yaml string) *config.Config {
	t.Helper()
	path := filepath.Join(dir, "dnsd.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path, ConfigKinds())
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func resolveA(t *testing.T, p *pipeline.Pipeline, name string) string {
	t.Helper()
	m := new(dns.Msg)
	m.SetQuestion(name, dns.TypeA)
	r := p.Resolve(context.Background(), &pipeline.Request{Msg: m, Name: name, Type: dns.TypeA})
	if len(r.Msg.Answer) == 0 {
		return dns.RcodeToString[r.Msg.Rcode]
	}
	return r.Msg.Answer[0].(*dns.A).A.String()
}

// Two zones naming the same hosts files share one backend; a second build
// (a reload) with the same settings reuses it; it stops when the last
// pipeline holding it is released.
func TestBackendSharedAcrossZonesAndReloads(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a.hosts"), []byte("10.0.0.1 x.one.test\n10.0.0.2 x.two.test\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := load(t, dir, `zones:
  one.test:
    - hosts: {files: [a.hosts]}
  two.test:
    - hosts: {files: [a.hosts], entries: ["10.0.0.3 y"]}
`)
	reg := NewRegistry(Options{})
	defer reg.Close()
	p1, set1, err := reg.Build(context.Background(), cfg, pipeline.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if reg.Len() != 1 || len(set1.Fresh) != 1 {
		t.Fatalf("two zones with the same files: %d backends running, %d fresh; want 1, 1", reg.Len(), len(set1.Fresh))
	}
	if got := resolveA(t, p1, "x.one.test."); got != "10.0.0.1" {
		t.Fatalf("x.one.test = %s", got)
	}
	if got := resolveA(t, p1, "y.two.test."); got != "10.0.0.3" {
		t.Fatalf("y.two.test = %s", got)
	}

	p2, set2, err := reg.Build(context.Background(), cfg, pipeline.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if reg.Len() != 1 || len(set2.Fresh) != 0 {
		t.Fatalf("rebuild with unchanged settings: %d backends, %d fresh; want 1, 0", reg.Len(), len(set2.Fresh))
	}
	set1.Release()
	set1.Release() // idempotent
	if reg.Len() != 1 {
		t.Fatalf("backend stopped while the second pipeline still holds it")
	}
	if got := resolveA(t, p2, "x.two.test."); got != "10.0.0.2" {
		t.Fatalf("x.two.test = %s", got)
	}
	set2.Release()
	if reg.Len() != 0 {
		t.Fatalf("%d backends still running after every pipeline released them", reg.Len())
	}
}

// A changed TTL is a new view of the same files: one backend (one
// watcher, the files read once) serves both TTLs; each pipeline answers
// with its own.
func TestHostsTTLChangeSharesFiles(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a.hosts"), []byte("10.0.0.1 x.one.test\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	hk := hosts.NewKind()
	reg := NewRegistry(Options{Kinds: []kind.Kind{hk}})
	defer reg.Close()
	p1, s1, err := reg.Build(context.Background(), load(t, dir, "zones:\n  one.test:\n    - hosts: {files: [a.hosts], ttl: 10s}\n"), pipeline.Options{})
	if err != nil {
		t.Fatal(err)
	}
	p2, s2, err := reg.Build(context.Background(), load(t, dir, "zones:\n  one.test:\n    - hosts: {files: [a.hosts], ttl: 20s}\n"), pipeline.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if hk.Readers() != 1 {
		t.Fatalf("ttl change: %d hosts backends reading the files, want 1", hk.Readers())
	}
	ttl := func(p *pipeline.Pipeline) uint32 {
		m := new(dns.Msg)
		m.SetQuestion("x.one.test.", dns.TypeA)
		r := p.Resolve(context.Background(), &pipeline.Request{Msg: m, Name: "x.one.test.", Type: dns.TypeA})
		if len(r.Msg.Answer) != 1 {
			t.Fatalf("x.one.test: %v", r.Msg)
		}
		return r.Msg.Answer[0].Header().Ttl
	}
	if a, b := ttl(p1), ttl(p2); a != 10 || b != 20 {
		t.Fatalf("ttls %d and %d, want 10 (old pipeline) and 20 (new)", a, b)
	}
	s1.Release()
	if hk.Readers() != 1 || ttl(p2) != 20 {
		t.Fatal("the files' backend went away with the old view")
	}
	// A change of the file reaches the remaining view.
	if err := os.WriteFile(filepath.Join(dir, "a.hosts"), []byte("10.0.0.9 x.one.test\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for resolveA(t, p2, "x.one.test.") != "10.0.0.9" {
		if time.Now().After(deadline) {
			t.Fatal("a change of the file did not reach the 20s view")
		}
		time.Sleep(10 * time.Millisecond)
	}
	s2.Release()
	if hk.Readers() != 0 || reg.Len() != 0 {
		t.Fatalf("%d hosts backends, %d registry backends after every pipeline released them", hk.Readers(), reg.Len())
	}
}

// Names of a hosts file outside the zone are logged once, when the backend
// is loaded.
func TestOutsideNamesLogged(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a.hosts"), []byte("10.0.0.1 x.one.test\n10.0.0.2 y.other.test\n10.0.0.3 z.other.test\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var logs strings.Builder
	reg := NewRegistry(Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	defer reg.Close()
	cfg := load(t, dir, "zones:\n  one.test:\n    - hosts: {files: [a.hosts]}\n")
	p, set, err := reg.Build(context.Background(), cfg, pipeline.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer set.Release()
	if !strings.Contains(logs.String(), "outside the zone") || !strings.Contains(logs.String(), "names=2") || !strings.Contains(logs.String(), "example=y.other.test.") {
		t.Fatalf("want one log line counting 2 outside names, got:\n%s", logs.String())
	}
	if got := resolveA(t, p, "x.one.test."); got != "10.0.0.1" {
		t.Fatalf("x.one.test = %s", got)
	}
	_, set2, err := reg.Build(context.Background(), cfg, pipeline.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer set2.Release()
	if n := strings.Count(logs.String(), "outside the zone"); n != 1 {
		t.Fatalf("logged %d times, want once (at load, not at every reload)", n)
	}
}

// WaitFresh waits for each backend up to its own sources' sync_timeout,
// not the longest of the config: a backend that cannot sync (sync_timeout
// 300ms) is given up on after 300 ms although another source, which has
// synced, allows 8 s.
func TestWaitFreshPerBackendTimeout(t *testing.T) {
	srv := etcdtest.Start(t, etcdtest.Options{})
	dead := fmt.Sprintf("127.0.0.1:%d", etcdtest.FreePort(t)) // nothing listens there
	cfg := load(t, t.TempDir(), fmt.Sprintf("zones:\n  live.test:\n    - etcd: {endpoints: [%q], sync_timeout: 8s}\n  dead.test:\n    - etcd: {endpoints: [\"http://%s\"], sync_timeout: 300ms}\n", srv.Endpoint(), dead))
	reg := NewRegistry(Options{})
	defer reg.Close()
	_, set, err := reg.Build(context.Background(), cfg, pipeline.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer set.Release()
	start := time.Now()
	got := set.WaitFresh(context.Background())
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("WaitFresh took %v: it waited past the unsyncable backend's own 300 ms", took)
	}
	if len(got) != 1 || !strings.Contains(got[0], dead) {
		t.Errorf("unsynced %q, want the dead endpoint's backend only", got)
	}
}

// A reload waits for the backends it starts, not for kept ones: WaitFresh
// reports a new etcd backend that cannot sync, and a rebuild with the same
// settings has nothing to wait for.
func TestWaitFreshOnlyWaitsForNewBackends(t *testing.T) {
	dead := fmt.Sprintf("127.0.0.1:%d", etcdtest.FreePort(t)) // nothing listens there
	dir := t.TempDir()
	cfg := load(t, dir, "zones:\n  one.test:\n    - etcd: {endpoints: [\"http://"+dead+"\"]}\n")
	reg := NewRegistry(Options{})
	defer reg.Close()
	_, set1, err := reg.Build(context.Background(), cfg, pipeline.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer set1.Release()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if got := set1.WaitFresh(ctx); len(got) != 1 {
		t.Fatalf("WaitFresh on a new unreachable etcd backend = %v, want it named", got)
	}
	_, set2, err := reg.Build(context.Background(), cfg, pipeline.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer set2.Release()
	start := time.Now()
	ctx2, cancel2 := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel2()
	if got := set2.WaitFresh(ctx2); len(got) != 0 || time.Since(start) > 2*time.Second {
		t.Fatalf("WaitFresh on a rebuild = %v after %v, want nothing at once (the backend is kept)", got, time.Since(start))
	}
}

// The cache metrics are among those /metrics always has: they
// are registered by the first Build, forward source or not.
func TestCacheMetricsWithoutForward(t *testing.T) {
	dir := t.TempDir()
	cfg := load(t, dir, "zones:\n  one.test:\n    - hosts: {entries: [\"10.0.0.1 x\"]}\n")
	preg := prometheus.NewRegistry()
	reg := NewRegistry(Options{Registerer: preg})
	defer reg.Close()
	_, set, err := reg.Build(context.Background(), cfg, pipeline.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer set.Release()
	mfs, err := preg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, mf := range mfs {
		have[mf.GetName()] = true
	}
	for _, name := range []string{"dnsd_cache_hits_total", "dnsd_cache_misses_total", "dnsd_cache_entries"} {
		if !have[name] {
			t.Errorf("%s not registered by a build without forward sources", name)
		}
	}
}

// The backends the registry builds tell Options.Bulk of their reloads:
// a hosts file and a zone file changed on disk each make a burst, and
// every burst ends.
func TestReloadsToldToBulk(t *testing.T) {
	// Each file in a directory of its own: a backend also looks at the
	// files of its directory that changed.
	dir := t.TempDir()
	for _, sub := range []string{"h", "z"} {
		if err := os.Mkdir(filepath.Join(dir, sub), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	hostsPath, zonePath := filepath.Join(dir, "h", "a.hosts"), filepath.Join(dir, "z", "b.zone")
	zone := "$TTL 60\n@ IN SOA ns admin 1 7200 600 86400 60\n@ IN NS ns\nns IN A 10.0.1.1\n"
	for path, data := range map[string]string{hostsPath: "10.0.0.1 x.one.test\n", zonePath: zone} {
		if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cfg := load(t, dir, `zones:
  one.test:
    - hosts: {files: [h/a.hosts]}
  two.test:
    - file: {path: z/b.zone}
`)
	var mu sync.Mutex
	begun, ended := 0, 0
	counts := func() (int, int) {
		mu.Lock()
		defer mu.Unlock()
		return begun, ended
	}
	reg := NewRegistry(Options{Bulk: func() func() {
		mu.Lock()
		defer mu.Unlock()
		begun++
		return func() {
			mu.Lock()
			defer mu.Unlock()
			ended++
		}
	}})
	defer reg.Close()
	p, set, err := reg.Build(context.Background(), cfg, pipeline.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer set.Release()
	settled := func(what string, more bool, before int) int {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for {
			b, e := counts()
			if b == e && (!more || b > before) {
				return b
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %d bursts begun, %d ended", what, b, e)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	start := settled("start", false, 0)

	if err := os.WriteFile(hostsPath, []byte("10.0.0.9 x.one.test\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); resolveA(t, p, "x.one.test.") != "10.0.0.9"; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("hosts change not served")
		}
	}
	afterHosts := settled("hosts file changed", true, start)

	if err := os.WriteFile(zonePath, []byte(zone+"www IN A 10.0.1.2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); resolveA(t, p, "www.two.test.") != "10.0.1.2"; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("zone file change not served")
		}
	}
	settled("zone file changed", true, afterHosts)
}

// servingKind is the hosts kind, noting each build's env.Serving.
type servingKind struct {
	*hosts.Kind
	seen []bool
}

func (k *servingKind) Build(ctx context.Context, env *kind.Env, z config.Zone, settings any) (pipeline.Source, error) {
	k.seen = append(k.seen, env.Serving)
	return k.Kind.Build(ctx, env, z, settings)
}

// A build is told whether another pipeline serves meanwhile: not at the
// start, yes once one was swapped in (a reload), so backends it opens
// load giving way to queries.
func TestBuildToldWhetherServing(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a.hosts"), []byte("10.0.0.1 x.one.test\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := load(t, dir, "zones:\n  one.test:\n    - hosts: {files: [a.hosts]}\n")
	k := &servingKind{Kind: hosts.NewKind()}
	reg := NewRegistry(Options{Kinds: []kind.Kind{k}})
	defer reg.Close()
	p1, set1, err := reg.Build(context.Background(), cfg, pipeline.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer set1.Release()
	reg.Swapped(cfg, p1, set1)
	_, set2, err := reg.Build(context.Background(), cfg, pipeline.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer set2.Release()
	if want := []bool{false, true}; !slices.Equal(k.seen, want) {
		t.Errorf("env.Serving of a start's build and a reload's: %v, want %v", k.seen, want)
	}
}

// A config loaded while another serves (ServingConfigKinds) parses its
// zone files giving way on one processor; ConfigKinds' parse does not.
func TestServingConfigKindsPaceZoneParses(t *testing.T) {
	var sb strings.Builder
	sb.WriteString("$TTL 60\n")
	for i := range 50000 {
		fmt.Fprintf(&sb, "h%d IN A 10.%d.%d.%d\n", i, i>>16, i>>8&0xff, i&0xff)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "z.zone"), []byte(sb.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "dnsd.yaml")
	if err := os.WriteFile(path, []byte("zones:\n  z.test:\n    - file: {path: z.zone}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	var slept atomic.Int64
	pace := &pacing.Pacing{Sleep: func(d time.Duration) {
		slept.Add(1)
		time.Sleep(d)
	}}
	if _, err := config.Load(path, ServingConfigKinds(pace)); err != nil {
		t.Fatal(err)
	}
	if slept.Load() == 0 {
		t.Error("a zone file of 50,000 records parsed for a reload on one processor never gave way")
	}
	slept.Store(0)
	if _, err := config.Load(path, ConfigKinds()); err != nil {
		t.Fatal(err)
	}
	if n := slept.Load(); n != 0 {
		t.Errorf("ConfigKinds' parse slept %d times", n)
	}
}
