package forward_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/dnsd/dnsd/config"
	"github.com/dnsd/dnsd/pipeline"
	"github.com/dnsd/dnsd/sources"
	"github.com/dnsd/dnsd/sources/forward"
)

func load(t *testing.T, dir, yaml string) *config.Config {
	t.Helper()
	path := filepath.Join(dir, "dnsd.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path, sources.ConfigKinds())
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func resolve(t *testing.T, p *pipeline.Pipeline, name string) *dns.Msg {
	t.Helper()
	m := new(dns.Msg)
	m.SetQuestion(name, dns.TypeA)
	return p.Resolve(context.Background(), &pipeline.Request{Msg: m, Name: name, Type: dns.TypeA}).Msg
}

func gauge(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.Metric[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

// One pool for two zones with the same forward settings, kept by a reload;
// the cache survives the reload, and drops the entries of names that no
// longer reach a forward source (zone changed, new except).
func TestRegistryForwardSharingAndCacheRetention(t *testing.T) {
	u := forward.StartTestUpstream(t)
	dir := t.TempDir()
	cfgText := func(corp, except string) string {
		return fmt.Sprintf(`listen: ["127.0.0.1:1053"]
zones:
  example.internal:
    - hosts: {entries: ["10.0.0.1 db"]}
  corp.test:
%s
  .:
    - forward: {upstreams: ["%s"], except: [%s]}
`, corp, u.Addr(), except)
	}
	fwd := fmt.Sprintf(`    - forward: {upstreams: ["%s"]}`, u.Addr())
	promReg := prometheus.NewRegistry()
	reg := sources.NewRegistry(sources.Options{Registerer: promReg})
	defer reg.Close()

	cfg := load(t, dir, cfgText(fwd, ""))
	p1, set1, err := reg.Build(context.Background(), cfg, pipeline.Options{})
	if err != nil {
		t.Fatal(err)
	}
	reg.Swapped(cfg, p1, nil)
	if reg.Len() != 1 {
		t.Fatalf("two zones with the same forward settings: %d backends, want 1 pool", reg.Len())
	}
	for _, n := range []string{"www.example.", "x.corp.test.", "drop.example."} {
		if m := resolve(t, p1, n); len(m.Answer) != 1 {
			t.Fatalf("%s: %v", n, m)
		}
	}
	if m := resolve(t, p1, "db.example.internal."); !m.Authoritative || len(m.Answer) != 1 {
		t.Fatalf("local name: %v", m)
	}
	if got := gauge(t, promReg, "dnsd_cache_entries"); got != 3 {
		t.Fatalf("dnsd_cache_entries = %v, want 3 (local answers are not cached)", got)
	}

	// Reload with the same settings: same pool, cache kept.
	p2, set2, err := reg.Build(context.Background(), cfg, pipeline.Options{})
	if err != nil {
		t.Fatal(err)
	}
	reg.Swapped(cfg, p2, nil)
	set1.Release()
	if reg.Len() != 1 || len(set2.Fresh) != 0 {
		t.Fatalf("reload: %d backends, %d fresh", reg.Len(), len(set2.Fresh))
	}
	resolve(t, p2, "www.example.")
	resolve(t, p2, "x.corp.test.")
	if u.Count("www.example.") != 1 || u.Count("x.corp.test.") != 1 {
		t.Fatal("the cache did not survive the reload")
	}

	// corp.test no longer forwards; drop.example. is excepted.
	cfg3 := load(t, dir, cfgText(`    - hosts: {entries: ["10.0.0.2 y"]}`, `"drop.example."`))
	p3, set3, err := reg.Build(context.Background(), cfg3, pipeline.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer set3.Release()
	reg.Swapped(cfg3, p3, nil)
	set2.Release()
	if got := gauge(t, promReg, "dnsd_cache_entries"); got != 1 {
		t.Fatalf("after the reload: dnsd_cache_entries = %v, want 1 (www.example.)", got)
	}
	resolve(t, p3, "www.example.")
	if u.Count("www.example.") != 1 {
		t.Fatal("an entry still reachable was dropped")
	}
	if m := resolve(t, p3, "drop.example."); m.Rcode != dns.RcodeNameError {
		t.Fatalf("excepted name: %v", m)
	}
}

// New cache settings apply at the swap, keeping entries that fit.
func TestRegistryCacheSettingsApplied(t *testing.T) {
	u := forward.StartTestUpstream(t)
	dir := t.TempDir()
	text := func(size int) string {
		return fmt.Sprintf("cache: {size: %d}\nzones:\n  .:\n    - forward: {upstreams: [\"%s\"]}\n", size, u.Addr())
	}
	promReg := prometheus.NewRegistry()
	reg := sources.NewRegistry(sources.Options{Registerer: promReg})
	defer reg.Close()
	cfg := load(t, dir, text(100))
	p, set, err := reg.Build(context.Background(), cfg, pipeline.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer set.Release()
	reg.Swapped(cfg, p, nil)
	for i := 0; i < 10; i++ {
		resolve(t, p, fmt.Sprintf("n%d.example.", i))
	}
	cfg2 := load(t, dir, text(4))
	reg.Swapped(cfg2, p, nil)
	if got := gauge(t, promReg, "dnsd_cache_entries"); got != 4 {
		t.Fatalf("size 100 -> 4: %v entries", got)
	}
}

// An upstream that is dnsd's own listen address is a configuration error
// with its position.
func TestRegistryForwardToSelf(t *testing.T) {
	l, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.LocalAddr().String()
	l.Close()
	cfg := load(t, t.TempDir(), fmt.Sprintf("listen: [\"%s\"]\nzones:\n  .:\n    - forward: {upstreams: [\"192.0.2.1\", \"%s\"]}\n", addr, addr))
	reg := sources.NewRegistry(sources.Options{})
	defer reg.Close()
	_, _, err = reg.Build(context.Background(), cfg, pipeline.Options{})
	if err == nil || !strings.Contains(err.Error(), "dnsd.yaml:4:7") || !strings.Contains(err.Error(), "loop") {
		t.Fatalf("forward to ourselves: %v", err)
	}
	if reg.Len() != 0 {
		t.Fatal("a failed build left a pool running")
	}
}

// `dnsd check` (dry run) validates without starting a pool.
func TestRegistryDryRun(t *testing.T) {
	cfg := load(t, t.TempDir(), "zones:\n  .:\n    - forward: {upstreams: [\"192.0.2.1\"]}\n")
	reg := sources.NewRegistry(sources.Options{DryRun: true})
	defer reg.Close()
	_, set, err := reg.Build(context.Background(), cfg, pipeline.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer set.Release()
	if reg.Len() != 0 {
		t.Fatal("a dry run started a pool")
	}
}
