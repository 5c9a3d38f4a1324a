package config_test

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	. "github.com/dnsd/dnsd/config"
	"github.com/dnsd/dnsd/sources"
	"github.com/dnsd/dnsd/sources/dynamic"
	"github.com/dnsd/dnsd/sources/etcd"
	"github.com/dnsd/dnsd/sources/forward"
	"github.com/dnsd/dnsd/sources/hosts"
	"github.com/dnsd/dnsd/sources/kubernetes"

	"github.com/miekg/dns"
)

// FuzzParse checks that Parse never panics, gives the same result twice
// (no map order leaks into configs or error lists), that every failure is
// an ErrorList whose positions lie within the input, and that a config it
// accepts holds what the types promise (checkConfig).
func FuzzParse(f *testing.F) {
	seeds, _ := filepath.Glob("testdata/*/*.yaml")
	for _, s := range seeds {
		data, err := os.ReadFile(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte("zones:\n  a 10.0.0.0/9 ::/3:\n    - hosts: &h {entries: [\"1.2.3.4 a\"]}\n  b:\n    - hosts: {<<: *h, ttl: 1s}\n"))
	f.Add([]byte("\xef\xbb\xbfzones: {\"\\u00e9\": [forward]}\r\n"))
	// Relative paths in the fixtures resolve against testdata/good.
	const file = "testdata/good/fuzz.yaml"
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Parse(file, data, sources.ConfigKinds())
		cfg2, err2 := Parse(file, data, sources.ConfigKinds())
		if !reflect.DeepEqual(cfg, cfg2) || fmt.Sprint(err) != fmt.Sprint(err2) {
			t.Fatalf("two parses differ:\n%+v %v\n%+v %v", cfg, err, cfg2, err2)
		}
		if err == nil {
			if cfg == nil {
				t.Fatal("nil config without error")
			}
			checkConfig(t, cfg)
			return
		}
		var list ErrorList
		if !errors.As(err, &list) || len(list) == 0 {
			t.Fatalf("error is not a non-empty ErrorList: %T %v", err, err)
		}
		s := string(data)
		maxLine := 1 + strings.Count(s, "\n") + strings.Count(s, "\r") +
			strings.Count(s, "\u0085") + strings.Count(s, "\u2028") + strings.Count(s, "\u2029")
		for _, e := range list {
			if e.Pos.File != file {
				// A zone file's own error: FILE:LINE in that file.
				if st, err := os.Stat(e.Pos.File); err != nil || !st.Mode().IsRegular() || e.Pos.Line < 1 {
					t.Fatalf("position %v is neither in the input nor in a zone file: %v", e.Pos, e)
				}
				continue
			}
			if e.Pos.Line < 1 || e.Pos.Line > maxLine || e.Pos.Col < 1 {
				t.Fatalf("position %v outside the input (%d lines): %v", e.Pos, maxLine, e)
			}
			if e.Msg == "" {
				t.Fatalf("empty message at %v", e.Pos)
			}
		}
	})
}

// checkConfig checks a config Parse accepted: listen addresses are
// host:port with an IP literal or empty host and a port in 1..65535; zone
// names, inline hosts names and forward exceptions are lower-case FQDNs;
// every zone has sources, each of its kind; update items name zones,
// lower-case patterns and no type dnsd keeps.
func checkConfig(t *testing.T, cfg *Config) {
	t.Helper()
	fqdn := func(what, n string) {
		t.Helper()
		if _, ok := dns.IsDomainName(n); !ok || !dns.IsFqdn(n) || strings.ToLower(n) != n {
			t.Fatalf("%s %q is not a lower-case FQDN", what, n)
		}
	}
	for _, l := range cfg.Listen {
		host, port, err := net.SplitHostPort(l.Addr)
		n, perr := strconv.Atoi(port)
		if err != nil || perr != nil || n < 1 || n > 65535 || host != "" && net.ParseIP(host) == nil {
			t.Fatalf("listen address %q is not host:port", l.Addr)
		}
	}
	if len(cfg.Zones) == 0 {
		t.Fatal("a config without zones")
	}
	for _, z := range cfg.Zones {
		if len(z.Names) == 0 || len(z.Sources) == 0 {
			t.Fatalf("zone %q: %d names, %d sources", z.Key, len(z.Names), len(z.Sources))
		}
		for _, n := range z.Names {
			fqdn("zone", n)
		}
		for _, s := range z.Sources {
			var ok bool
			switch s.Kind {
			case "kubernetes":
				_, ok = s.Settings.(*kubernetes.Config)
			case "etcd":
				_, ok = s.Settings.(*etcd.Config)
			case "hosts":
				var h *hosts.Config
				if h, ok = s.Settings.(*hosts.Config); ok {
					for _, e := range h.Entries {
						for _, n := range e.Names {
							fqdn("hosts entry name", n)
						}
					}
				}
			case "dynamic":
				_, ok = s.Settings.(*dynamic.Config)
			case "forward":
				var f *forward.Config
				if f, ok = s.Settings.(*forward.Config); ok {
					for _, n := range f.Except {
						fqdn("forward exception", n)
					}
				}
			}
			if !ok {
				t.Fatalf("zone %q: a %s source with settings %T", z.Key, s.Kind, s.Settings)
			}
		}
	}
	for _, u := range cfg.Updates {
		if len(u.Zones) == 0 || u.TSIG == nil && u.Allow == nil || u.Names != nil && len(u.Names) == 0 || u.Types != nil && len(u.Types) == 0 {
			t.Fatalf("update item %+v", u)
		}
		for _, n := range u.Zones {
			fqdn("update zone", n)
		}
		for _, n := range u.Names {
			fqdn("update name", strings.ReplaceAll(n, "*", "x"))
		}
		for _, ty := range u.Types {
			if ManagedType(ty) || ty == 0 || ty == dns.TypeOPT || ty >= 128 && ty <= 255 {
				t.Fatalf("update item allows type %d", ty)
			}
		}
	}
}
