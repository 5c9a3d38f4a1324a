package config_test

import (
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/miekg/dns"

	. "github.com/dnsd/dnsd/config"
	"github.com/dnsd/dnsd/sources"
)

func TestUpdateFixture(t *testing.T) {
	file := "testdata/good/update.yaml"
	cfg := mustLoad(t, file)
	want := []Update{
		{
			Zones: []string{"corp.internal.", "10.in-addr.arpa."},
			Allow: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fd00::1/128")},
			// The third pattern is the first again.
			Names: []string{"*.dhcp.corp.internal.", "*.10.in-addr.arpa."},
			Types: []uint16{dns.TypeA, dns.TypeAAAA, dns.TypePTR, dns.TypeDHCID, dns.TypeTXT, 65280},
			Pos:   Pos{file, 15, 5},
		},
		{
			Zones: []string{"corp.internal."},
			Names: []string{"_acme-challenge.*."},
			Types: []uint16{dns.TypeTXT},
			Pos:   Pos{file, 20, 5},
		},
		{
			Zones: []string{"lab.internal."},
			Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")},
			Pos:   Pos{file, 24, 5},
		},
	}
	if len(cfg.Updates) != len(want) {
		t.Fatalf("%d update items, want %d: %+v", len(cfg.Updates), len(want), cfg.Updates)
	}
	tsig := []string{"dhcp-key.", "acme-key.", ""}
	for i, u := range cfg.Updates {
		name := ""
		if u.TSIG != nil {
			name = u.TSIG.Name
			if u.TSIG.Secret == "" || u.TSIG.Algorithm == "" {
				t.Errorf("item %d: tsig %+v", i, u.TSIG)
			}
		}
		if name != tsig[i] {
			t.Errorf("item %d: tsig name %q, want %q", i, name, tsig[i])
		}
		u.TSIG = nil
		if !reflect.DeepEqual(u, want[i]) {
			t.Errorf("item %d:\ngot  %+v\nwant %+v", i, u, want[i])
		}
	}
	if k := cfg.Updates[1].TSIG; k.Algorithm != "hmac-sha512." || k.SecretFile != abs(t, "acme.key") {
		t.Errorf("acme key = %v", k)
	}
	if cfg.Limits.MaxUpdateSize != 4096 || cfg.Limits.MaxUpdateRRs != 50 {
		t.Errorf("limits = %+v", cfg.Limits)
	}
}

// TestUpdateDefaults: without an update key there are no items, and the
// limits take their defaults.
func TestUpdateDefaults(t *testing.T) {
	cfg := mustLoad(t, "testdata/good/minimal.yaml")
	if cfg.Updates != nil {
		t.Errorf("updates = %#v, want nil", cfg.Updates)
	}
	if cfg.Limits.MaxUpdateSize != DefaultMaxUpdateSize || cfg.Limits.MaxUpdateRRs != DefaultMaxUpdateRRs ||
		DefaultMaxUpdateSize != 65535 || DefaultMaxUpdateRRs != 1000 {
		t.Errorf("limits = %+v", cfg.Limits)
	}
	// The bounds of the limits, both ends.
	for _, tc := range []struct {
		limits string
		ok     bool
	}{
		{"max_update_size: 512", true}, {"max_update_size: 65535", true},
		{"max_update_size: 511", false}, {"max_update_size: 65536", false},
		{"max_update_rrs: 1", true}, {"max_update_rrs: 65535", true},
		{"max_update_rrs: 0", false}, {"max_update_rrs: 65536", false},
	} {
		_, err := Parse("l.yaml", []byte("limits: {"+tc.limits+"}\nzones: {a.test: [dynamic]}\n"), sources.ConfigKinds())
		if (err == nil) != tc.ok {
			t.Errorf("%s: %v", tc.limits, err)
		}
	}
}

// writableKind is a source kind whose sources are writable when their
// settings say so.
type writableKind struct{ s *Settings }

type writableSettings struct {
	Writable bool `dnsd:"writable" doc:"Whether updates may write here."`
}

func (writableKind) Name() string               { return "scratch" }
func (writableKind) DefaultFallthrough() bool   { return true }
func (k writableKind) Settings() *Settings      { return k.s }
func (writableKind) Writable(settings any) bool { return settings.(*writableSettings).Writable }

// TestUpdateWritableKind: a source is writable when its kind says so for
// its settings; a zone needs exactly one.
func TestUpdateWritableKind(t *testing.T) {
	kinds := append(sources.ConfigKinds(), writableKind{NewSettings(Description[writableSettings]{})})
	key := filepath.Join(t.TempDir(), "k.key")
	if err := os.WriteFile(key, []byte("c2VjcmV0LXNlY3JldC1zZWNyZXQtMzItYnl0ZXMhIQ==\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		sources string
		err     string // "": valid
	}{
		{"[{scratch: {writable: true}}, dynamic: {}]", `u.yaml:3:13: update[0].zones[0]: zone a.test. has 2 writable sources (scratch at u.yaml:1:18, dynamic at u.yaml:1:47): updates need exactly one to write to`},
		{"[{scratch: {writable: true}}, {scratch: {writable: false}}]", ""},
		{"[{scratch: {writable: false}}, {hosts: {entries: [\"10.0.0.1 a\"]}}]", `u.yaml:3:13: update[0].zones[0]: zone a.test. has no writable source: add "- dynamic: {}" to its sources, or set updates: true on its etcd source (update writes to it)`},
		{"[dynamic, {etcd: {}}]", ""},
		{"[{etcd: {updates: true}}]", ""},
		{"[dynamic, {etcd: {updates: true}}]", `u.yaml:3:13: update[0].zones[0]: zone a.test. has 2 writable sources (dynamic at u.yaml:1:18, etcd at u.yaml:1:27): updates need exactly one to write to`},
		{"[dynamic, {scratch: {writable: true}}]", `u.yaml:3:13: update[0].zones[0]: zone a.test. has 2 writable sources (dynamic at u.yaml:1:18, scratch at u.yaml:1:27): updates need exactly one to write to`},
	} {
		data := "zones: {a.test: " + tc.sources + "}\nupdate:\n  - zones: [a.test]\n    tsig: {name: k, algorithm: hmac-sha256, secret_file: " + key + "}\n"
		cfg, err := Parse("u.yaml", []byte(data), kinds)
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%s: %v", tc.sources, err)
		case tc.err == "" && (len(cfg.Updates) != 1 || cfg.Updates[0].TSIG.Name != "k."):
			t.Errorf("%s: updates %+v", tc.sources, cfg.Updates)
		case tc.err != "" && errString(err) != tc.err:
			t.Errorf("%s:\n got %v\nwant %s", tc.sources, err, tc.err)
		}
	}
}

// TestUpdateRules: the rules across an item's keys, and what one zone
// may have in several items.
func TestUpdateRules(t *testing.T) {
	dir := t.TempDir()
	for name, secret := range map[string]string{"a.key": "YWFhYWFhYWFhYWFhYWFhYQ==", "b.key": "YmJiYmJiYmJiYmJiYmJiYg=="} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(secret+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	file := filepath.Join(dir, "dnsd.yaml")
	const zones = "zones:\n  corp.internal 10.in-addr.arpa:\n    - dynamic\n    - hosts: {entries: [\"10.0.0.1 gw\"]}\n  lab.internal:\n    - hosts: {entries: [\"10.1.0.1 gw\"]}\n"
	for _, tc := range []struct {
		name, update string
		err          string // "": valid
	}{
		{"a zone in several items, one key twice", `
  - {zones: [corp.internal], tsig: {name: k1, algorithm: hmac-sha256, secret_file: a.key}}
  - {zones: [corp.internal, 10.in-addr.arpa], tsig: {name: k2, algorithm: hmac-sha256, secret_file: b.key}}
  - {zones: [corp.internal], tsig: {name: k1, algorithm: hmac-sha256, secret_file: a.key}, allow: [10.0.0.0/8]}
`, ""},
		{"allow alone", "\n  - {zones: [corp.internal], allow: [10.0.0.0/8]}\n", ""},
		{"the same key name with another secret", `
  - {zones: [corp.internal], tsig: {name: k1, algorithm: hmac-sha256, secret_file: a.key}}
  - {zones: [corp.internal], tsig: {name: k1, algorithm: hmac-sha256, secret_file: b.key}}
`, `:10:43: update[1].tsig.name: tsig key k1. is already written with another algorithm or secret (secret_file ` + filepath.Join(dir, "a.key") + `): a key name stands for one key`},
		{"neither tsig nor allow", "\n  - {zones: [corp.internal], names: [www.corp.internal]}\n",
			`:9:5: update[0]: an update item needs tsig or allow: without either, anyone who reaches dnsd could change the zones`},
		{"tsig null is no tsig", "\n  - {zones: [corp.internal], tsig: }\n",
			`:9:5: update[0]: an update item needs tsig or allow: without either, anyone who reaches dnsd could change the zones`},
		{"not writable, reported once", "\n  - {zones: [lab.internal], allow: [10.0.0.0/8]}\n  - {zones: [lab.internal], allow: [10.1.0.0/16]}\n",
			`:9:14: update[0].zones[0]: zone lab.internal. has no writable source: add "- dynamic: {}" to its sources, or set updates: true on its etcd source (update writes to it)`},
		{"a name outside", "\n  - {zones: [corp.internal], allow: [10.0.0.0/8], names: [a.10.in-addr.arpa]}\n",
			`:9:59: update[0].names[0]: name "a.10.in-addr.arpa" is outside the item's zones (corp.internal.)`},
		{"a pattern whose fixed labels lie elsewhere", "\n  - {zones: [corp.internal], allow: [10.0.0.0/8], names: [\"*.lab.internal\"]}\n",
			`:9:59: update[0].names[0]: name "*.lab.internal" is outside the item's zones (corp.internal.)`},
		{"a bad pattern is named as written", "\n  - {zones: [corp.internal], allow: [10.0.0.0/8], names: [\"*..Corp.internal\"]}\n",
			`:9:59: update[0].names[0]: bad name pattern: "*..Corp.internal" has an empty label`},
		{"update is a list", "\n  zones: [corp.internal]\n", `:9:3: update: expected a list, got a mapping`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := os.WriteFile(file, []byte(zones+"listen: [\"127.0.0.1:53\"]\nupdate:"+tc.update), 0o644); err != nil {
				t.Fatal(err)
			}
			cfg, err := Load(file, sources.ConfigKinds())
			if tc.err == "" {
				if err != nil {
					t.Fatal(err)
				}
				if len(cfg.Updates) == 0 {
					t.Fatal("no update items")
				}
				return
			}
			var list ErrorList
			if !errors.As(err, &list) || len(list) != 1 || strings.TrimPrefix(list[0].Error(), file) != tc.err {
				t.Errorf("got %v\nwant %s%s", err, file, tc.err)
			}
		})
	}
}

func TestManagedType(t *testing.T) {
	var managed []uint16
	for ty := range uint16(300) {
		if ManagedType(ty) {
			managed = append(managed, ty)
		}
	}
	want := []uint16{dns.TypeSOA, dns.TypeRRSIG, dns.TypeNSEC, dns.TypeDNSKEY, dns.TypeNSEC3, dns.TypeNSEC3PARAM, dns.TypeCDS, dns.TypeCDNSKEY}
	slices.Sort(want)
	if !slices.Equal(managed, want) {
		t.Errorf("managed types %v, want %v", managed, want)
	}
}
