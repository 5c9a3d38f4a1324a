package secondary_test

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dnsd/dnsd/config"
	"github.com/dnsd/dnsd/pipeline"
	"github.com/dnsd/dnsd/sources"
	"github.com/dnsd/dnsd/sources/secondary"
)

func loadConfig(t *testing.T, yaml string) (*config.Config, error) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "xfr.key"), []byte("c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "dnsd.yaml")
	if err := os.WriteFile(file, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	return config.Load(file, sources.ConfigKinds())
}

func TestSettings(t *testing.T) {
	cfg, err := loadConfig(t, `zones:
  partner.example:
    - secondary:
        primaries: ["10.0.0.5", "10.0.0.6:5300", "2001:db8::5"]
        tsig: {name: xfr-key, algorithm: hmac-sha256, secret_file: xfr.key}
`)
	if err != nil {
		t.Fatal(err)
	}
	sc := cfg.Zones[0].Sources[0]
	c := sc.Settings.(*secondary.Config)
	want := []netip.AddrPort{netip.MustParseAddrPort("10.0.0.5:53"), netip.MustParseAddrPort("10.0.0.6:5300"), netip.MustParseAddrPort("[2001:db8::5]:53")}
	if c.Zone != "partner.example." || len(c.Primaries) != 3 || c.Primaries[0] != want[0] || c.Primaries[1] != want[1] || c.Primaries[2] != want[2] {
		t.Errorf("settings %+v", c)
	}
	if c.Key == nil || c.Key.Name != "xfr-key." || c.Key.Algorithm != "hmac-sha256." || c.Key.Secret == "" {
		t.Errorf("tsig %v", c.Key)
	}
	if sc.Fallthrough {
		t.Error("fallthrough defaults to true, want false")
	}
	if cfg.StateDir != config.DefaultStateDir {
		t.Errorf("state_dir %q, want %q", cfg.StateDir, config.DefaultStateDir)
	}
}

// TestCheckErrors: what `dnsd check` reports of a secondary block.
func TestCheckErrors(t *testing.T) {
	for _, c := range []struct{ block, want string }{
		{`{}`, "secondary needs primaries"},
		{`{primaries: []}`, "secondary needs primaries"},
		{`{primaries: ["ns1.example.com"]}`, `primaries[0]: primary "ns1.example.com": "ns1.example.com" is not an IP address (primaries are IP addresses, not hostnames)`},
		{`{primaries: ["10.0.0.5:99999"]}`, `bad port "99999"`},
		{`{primaries: ["10.0.0.5", "10.0.0.5:53"]}`, "primary 10.0.0.5:53 is listed twice"},
		{`{primaries: ["10.0.0.5"], tsig: {name: xfr-key, algorithm: md5, secret_file: xfr.key}}`, "algorithm"},
		{`{primaries: ["10.0.0.5"], tsig: {name: xfr-key, algorithm: hmac-sha256}}`, "tsig needs secret_file"},
		{`{primaries: ["10.0.0.5"], tsig: {name: xfr-key, algorithm: hmac-sha256, secret_file: missing.key}}`, "missing.key"},
		{`{primaries: ["10.0.0.5"], master: x}`, `unknown key "master"`},
	} {
		_, err := loadConfig(t, "zones:\n  partner.example:\n    - secondary: "+c.block+"\n")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %q", c.block, err, c.want)
		}
	}
	_, err := loadConfig(t, "zones:\n  a.example b.example:\n    - secondary: {primaries: [\"10.0.0.5\"]}\n")
	if err == nil || !strings.Contains(err.Error(), "secondary copies one zone") {
		t.Errorf("two zones: %v", err)
	}
}

// TestDryRun: `dnsd check` builds a secondary source without touching
// the network or state_dir.
func TestDryRun(t *testing.T) {
	cfg, err := loadConfig(t, "state_dir: state\nzones:\n  partner.example:\n    - secondary: {primaries: [\"192.0.2.1\"]}\n")
	if err != nil {
		t.Fatal(err)
	}
	reg := sources.NewRegistry(sources.Options{DryRun: true})
	defer reg.Close()
	p, set, err := reg.Build(context.Background(), cfg, pipeline.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer set.Release()
	for _, s := range p.Sources() {
		if tr, ok := s.(pipeline.Troubled); ok {
			_ = tr.Problem()
		}
	}
	if _, err := os.Stat(cfg.StateDir); !os.IsNotExist(err) {
		t.Errorf("a dry run touched state_dir: %v", err)
	}
}

// TestOneCopyPerZone: a zone that is a secondary in two views must name
// the same primaries and key in both (dnsd keeps one copy of it); the
// same settings twice share one copy.
func TestOneCopyPerZone(t *testing.T) {
	for _, c := range []struct {
		other string
		ok    bool
	}{
		{`["192.0.2.1"]`, true},
		{`["192.0.2.2"]`, false},
	} {
		cfg, err := loadConfig(t, `state_dir: state
zones:
  partner.example:
    - secondary: {primaries: ["192.0.2.1"]}
views:
  - name: office
    clients: [10.1.0.0/16]
    zones:
      partner.example:
        - secondary: {primaries: `+c.other+`}
`)
		if err != nil {
			t.Fatal(err)
		}
		reg := sources.NewRegistry(sources.Options{DryRun: true})
		_, set, err := reg.Build(context.Background(), cfg, pipeline.Options{})
		set.Release()
		reg.Close()
		if c.ok && err != nil {
			t.Errorf("same primaries in two views: %v", err)
		}
		if !c.ok && (err == nil || !strings.Contains(err.Error(), "zone partner.example is a secondary elsewhere with other primaries or tsig")) {
			t.Errorf("other primaries in two views: %v, want an error", err)
		}
	}
}
