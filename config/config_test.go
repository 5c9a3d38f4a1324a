package config_test

import (
	"errors"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/dnsd/dnsd/config"
	"github.com/dnsd/dnsd/sources"
	"github.com/dnsd/dnsd/sources/etcd"
	"github.com/dnsd/dnsd/sources/forward"
	"github.com/dnsd/dnsd/sources/hosts"
	"github.com/dnsd/dnsd/sources/kubernetes"
)

// wants returns the "# want: " lines of a bad fixture: the exact errors
// expected, in order, without the file name.
func wants(t *testing.T, file string) []string {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for line := range strings.Lines(string(data)) {
		if w, ok := strings.CutPrefix(strings.TrimRight(line, "\n"), "# want: "); ok {
			out = append(out, w)
		}
	}
	return out
}

func TestBadFixtures(t *testing.T) {
	files, err := filepath.Glob("testdata/bad/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no bad fixtures: %v", err)
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			want := wants(t, file)
			if len(want) == 0 {
				t.Fatalf("%s has no # want: lines", file)
			}
			cfg, err := Load(file, sources.ConfigKinds())
			if err == nil {
				t.Fatalf("Load succeeded, want errors:\n%s", strings.Join(want, "\n"))
			}
			if cfg != nil {
				t.Errorf("Load returned a config along with errors")
			}
			var list ErrorList
			if !errors.As(err, &list) {
				t.Fatalf("error is %T, want ErrorList: %v", err, err)
			}
			// Missing files are named by their absolute path: the
			// want lines hold it relative to this directory.
			wd, err := os.Getwd()
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, e := range list {
				got = append(got, strings.ReplaceAll(strings.TrimPrefix(e.Error(), file), wd+string(filepath.Separator), ""))
			}
			if !slices.Equal(got, want) {
				t.Errorf("errors differ\ngot:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
		})
	}
}

// TestAllErrorsReported checks that one file with many problems in
// different blocks reports every one of them, sorted by position, and
// that the joined message is one FILE:LINE:COL line per problem.
func TestAllErrorsReported(t *testing.T) {
	file := "testdata/bad/types.yaml"
	_, err := Load(file, sources.ConfigKinds())
	var list ErrorList
	if !errors.As(err, &list) {
		t.Fatalf("want ErrorList, got %v", err)
	}
	if len(list) != 8 {
		t.Errorf("got %d errors, want 8 (one per broken key):\n%v", len(list), err)
	}
	for i := 1; i < len(list); i++ {
		a, b := list[i-1].Pos, list[i].Pos
		if a.Line > b.Line || a.Line == b.Line && a.Col > b.Col {
			t.Errorf("errors not sorted: %v before %v", a, b)
		}
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != len(list) {
		t.Errorf("Error() has %d lines for %d errors", len(lines), len(list))
	}
	for _, l := range lines {
		if !strings.HasPrefix(l, file+":") {
			t.Errorf("line %q does not start with the file name", l)
		}
	}
	// errors.As reaches the individual errors too.
	var one *Error
	if !errors.As(err, &one) || one.Path != "listen" {
		t.Errorf("errors.As(*Error) = %v, want the listen error first", one)
	}
}

func TestLoadUnreadable(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "dnsd.yaml")
	_, err := Load(missing, sources.ConfigKinds())
	if err == nil || !strings.Contains(err.Error(), missing) {
		t.Fatalf("Load(missing, sources.ConfigKinds()) = %v, want an error naming %s", err, missing)
	}
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("error %v does not wrap os.ErrNotExist", err)
	}
}

func mustLoad(t *testing.T, file string) *Config {
	t.Helper()
	cfg, err := Load(file, sources.ConfigKinds())
	if err != nil {
		t.Fatalf("Load(%s, sources.ConfigKinds()):\n%v", file, err)
	}
	return cfg
}

func abs(t *testing.T, rel string) string {
	t.Helper()
	return filepath.Join("testdata", "files", rel)
}

// TestDefaults loads the smallest file and checks every default.
func TestDefaults(t *testing.T) {
	file := "testdata/good/minimal.yaml"
	cfg := mustLoad(t, file)
	want := &Config{
		File:   file,
		Listen: []Listen{{Addr: "127.0.0.1:53"}},
		Log:    Log{Level: slog.LevelInfo, Format: "text"},
		ACL:    ACL{Default: true},
		Limits: Limits{UDPBuffer: 1232, MaxTCPConnections: 1000, MaxTCPPerClient: 64, MaxTCPPipeline: 16, UDPRcvBuf: 4 << 20, TCPIdleTimeout: 10 * time.Second, MaxTransfers: 10,
			MaxUpdateSize: 65535, MaxUpdateRRs: 1000},
		Blocks: map[string]any{forward.CacheKey: &forward.CacheConfig{Size: 100000, MaxTTL: time.Hour, NegativeTTL: 5 * time.Minute,
			ServeStale: time.Hour, Prefetch: true}},
		StateDir: DefaultStateDir,
		Zones: []Zone{{
			Key:   "home.arpa",
			Names: []string{"home.arpa."},
			Pos:   Pos{file, 3, 3},
			Sources: []Source{{
				Kind: "hosts", Fallthrough: true, Pos: Pos{file, 4, 7},
				Settings: &hosts.Config{
					TTL: time.Hour, Reverse: true,
					Entries: []hosts.Entry{
						{Line: "192.168.1.1 router", Addr: netip.MustParseAddr("192.168.1.1"),
							Names: []string{"router.home.arpa."}, Pos: Pos{file, 5, 19}},
						{Line: "192.168.1.10 nas", Addr: netip.MustParseAddr("192.168.1.10"),
							Names: []string{"nas.home.arpa."}, Pos: Pos{file, 5, 41}},
					},
				},
			}},
		}},
	}
	if !reflect.DeepEqual(cfg, want) {
		t.Errorf("defaults differ\ngot:  %+v\nwant: %+v", cfg, want)
	}
}

// TestSourceDefaults checks the defaults of every source kind, written
// with empty settings.
func TestSourceDefaults(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "dnsd.yaml")
	data := `zones:
  cluster.local:
    - kubernetes:
  skydns.local:
    - etcd: {}
  .:
    - forward: {upstreams: [resolv.conf]}
`
	if err := os.WriteFile(file, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := mustLoad(t, file)
	k := cfg.Zones[0].Sources[0]
	if k.Fallthrough || !reflect.DeepEqual(*k.Settings.(*kubernetes.Config), kubernetes.Config{Pods: "disabled", Expose: "cluster_ip",
		TTL: 5 * time.Second, SyncTimeout: 5 * time.Second}) {
		t.Errorf("kubernetes defaults: fallthrough=%v %+v", k.Fallthrough, *k.Settings.(*kubernetes.Config))
	}
	e := cfg.Zones[1].Sources[0]
	if !e.Fallthrough || !reflect.DeepEqual(*e.Settings.(*etcd.Config), etcd.Config{Endpoints: []string{"http://127.0.0.1:2379"},
		Prefix: "/skydns", TTL: 5 * time.Minute, SyncTimeout: 5 * time.Second}) {
		t.Errorf("etcd defaults: fallthrough=%v %+v", e.Fallthrough, *e.Settings.(*etcd.Config))
	}
	f := cfg.Zones[2].Sources[0]
	wantF := forward.Config{
		Upstreams: []forward.UpstreamConfig{{ResolvConf: true, Raw: "resolv.conf", Pos: Pos{file, 7, 29}}},
		Policy:    "random", Timeout: 2 * time.Second, HealthCheck: 500 * time.Millisecond,
		MaxFails: 2, MaxConcurrent: 1000,
	}
	if !f.Fallthrough || !reflect.DeepEqual(*f.Settings.(*forward.Config), wantF) {
		t.Errorf("forward defaults: fallthrough=%v\ngot  %+v\nwant %+v", f.Fallthrough, *f.Settings.(*forward.Config), wantF)
	}
}

func TestSpecExample(t *testing.T) {
	file := "testdata/good/spec.yaml"
	cfg := mustLoad(t, file)
	if got := []string{cfg.Listen[0].String(), cfg.Listen[1].String()}; !slices.Equal(got, []string{"127.0.0.1:53", "tls://127.0.0.1:853"}) {
		t.Errorf("listen = %v", got)
	}
	if cfg.TLS == nil || cfg.TLS.Cert != abs(t, "server.crt") || cfg.TLS.Key != abs(t, "server.key") {
		t.Errorf("tls = %+v", cfg.TLS)
	}
	if cfg.HTTP != "127.0.0.1:9153" {
		t.Errorf("http = %q", cfg.HTTP)
	}
	wantAllow := []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128"), netip.MustParsePrefix("10.0.0.0/8")}
	if cfg.ACL.Default || !slices.Equal(cfg.ACL.Allow, wantAllow) || cfg.ACL.Deny != nil {
		t.Errorf("acl = %+v", cfg.ACL)
	}
	var names [][]string
	var kinds []string
	for _, z := range cfg.Zones {
		names = append(names, z.Names)
		for _, s := range z.Sources {
			kinds = append(kinds, s.Kind)
		}
	}
	wantNames := [][]string{{"cluster.local.", "10.in-addr.arpa."}, {"example.internal."}, {"."}}
	if !reflect.DeepEqual(names, wantNames) {
		t.Errorf("zone names = %v, want %v", names, wantNames)
	}
	if !slices.Equal(kinds, []string{"kubernetes", "hosts", "etcd", "hosts", "forward"}) {
		t.Errorf("source kinds = %v", kinds)
	}
	k := cfg.Zones[0].Sources[0].Settings.(*kubernetes.Config)
	if k.Kubeconfig != abs(t, "kubeconfig") || k.Namespaces != nil {
		t.Errorf("kubernetes = %+v", k)
	}
	h := cfg.Zones[1].Sources[0].Settings.(*hosts.Config)
	if !slices.Equal(h.Files, []string{abs(t, "example.hosts")}) ||
		!slices.Equal(h.Entries[0].Names, []string{"db.example.internal.", "db.example.internal."}) {
		t.Errorf("hosts = %+v", h)
	}
	f := cfg.Zones[2].Sources[1].Settings.(*forward.Config)
	var ups []string
	for _, u := range f.Upstreams {
		ups = append(ups, u.Proto+" "+u.Addr+" "+u.ServerName)
	}
	wantUps := []string{"udp 1.1.1.1:53 ", "udp 10.0.0.2:5353 ", "tcp 8.8.8.8:53 ", "tls 9.9.9.9:853 dns.quad9.net", "  "}
	if !slices.Equal(ups, wantUps) || !f.Upstreams[4].ResolvConf {
		t.Errorf("upstreams = %q, want %q", ups, wantUps)
	}
	if !slices.Equal(f.Except, []string{"corp.internal."}) {
		t.Errorf("except = %v", f.Except)
	}
}

func TestProductionExample(t *testing.T) {
	cfg := mustLoad(t, "testdata/good/production.yaml")
	var listen []string
	for _, l := range cfg.Listen {
		listen = append(listen, l.String())
	}
	if want := []string{"10.20.0.53:53", "[fd12:3456:789a::53]:53", "tls://10.20.0.53:853", "tcp://127.0.0.1:5353"}; !slices.Equal(listen, want) {
		t.Errorf("listen = %v, want %v", listen, want)
	}
	if cfg.Log != (Log{Level: slog.LevelWarn, Format: "json", Queries: true}) {
		t.Errorf("log = %+v", cfg.Log)
	}
	if !cfg.ACL.Drop || !slices.Equal(cfg.ACL.Allow, []netip.Prefix{netip.MustParsePrefix("10.20.0.0/16"),
		netip.MustParsePrefix("fd12:3456:789a::/48"), netip.MustParsePrefix("127.0.0.1/32")}) {
		t.Errorf("acl = %+v", cfg.ACL)
	}
	if cfg.Limits != (Limits{UDPBuffer: 4096, MaxTCPConnections: 250, MaxTCPPerClient: 16, MaxTCPPipeline: 4, UDPRcvBuf: 8 << 20, TCPIdleTimeout: 3 * time.Second, RatePerClient: 200, RateDrop: true, MaxTransfers: 4,
		MaxUpdateSize: DefaultMaxUpdateSize, MaxUpdateRRs: DefaultMaxUpdateRRs}) {
		t.Errorf("limits = %+v", cfg.Limits)
	}
	if c := cfg.Blocks[forward.CacheKey].(*forward.CacheConfig); *c != (forward.CacheConfig{Size: 0, MinTTL: 30 * time.Second, MaxTTL: 24 * time.Hour, NegativeTTL: time.Minute}) {
		t.Errorf("cache = %+v", *c)
	}
	corp := cfg.Zones[0]
	if len(corp.Names) != 1+16+1 || corp.Names[0] != "corp.internal." || corp.Names[1] != "0.20.10.in-addr.arpa." ||
		corp.Names[16] != "15.20.10.in-addr.arpa." || corp.Names[17] != "a.9.8.7.6.5.4.3.2.1.d.f.ip6.arpa." {
		t.Errorf("corp zone names = %v", corp.Names)
	}
	h := corp.Sources[0].Settings.(*hosts.Config)
	if h.Reverse || h.TTL != 10*time.Minute || len(h.Files) != 2 ||
		!slices.Equal(h.Entries[0].Names, []string{"ns1.corp.internal.", "dns.corp.internal."}) {
		t.Errorf("hosts = %+v", h)
	}
	e := corp.Sources[1]
	if e.Fallthrough || e.Settings.(*etcd.Config).Prefix != "/dns/corp" || e.Settings.(*etcd.Config).PasswordFile != abs(t, "etcd.password") ||
		e.Settings.(*etcd.Config).TLS.ServerName != "etcd.corp.internal" || e.Settings.(*etcd.Config).TTL != 30*time.Second || e.Settings.(*etcd.Config).SyncTimeout != 10*time.Second {
		t.Errorf("etcd = %+v", e.Settings.(*etcd.Config))
	}
	k := cfg.Zones[1].Sources[0]
	if !k.Fallthrough || k.Settings.(*kubernetes.Config).Pods != "verified" || k.Settings.(*kubernetes.Config).Expose != "external" || k.Settings.(*kubernetes.Config).TTL != 0 ||
		!slices.Equal(k.Settings.(*kubernetes.Config).Namespaces, []string{"default", "kube-system", "payments"}) {
		t.Errorf("kubernetes = %+v", k.Settings.(*kubernetes.Config))
	}
	f := cfg.Zones[2].Sources[0]
	if f.Fallthrough || f.Settings.(*forward.Config).Policy != "sequential" || f.Settings.(*forward.Config).Timeout != 1500*time.Millisecond ||
		f.Settings.(*forward.Config).Upstreams[1].Addr != "[2606:4700:4700::1111]:853" || f.Settings.(*forward.Config).Upstreams[3].Addr != "[2001:db8::54]:53" ||
		!slices.Equal(f.Settings.(*forward.Config).Except, []string{"corp.internal.", "lab.corp.internal."}) {
		t.Errorf("forward = %+v", f.Settings.(*forward.Config))
	}
}

func TestAnchors(t *testing.T) {
	cfg := mustLoad(t, "testdata/good/anchors.yaml")
	zone := map[string]*hosts.Config{}
	for _, z := range cfg.Zones {
		if h, ok := z.Sources[0].Settings.(*hosts.Config); ok {
			zone[z.Key] = h
		}
	}
	a, b := zone["a.example"], zone["b.example"]
	if a == nil || b == nil || a.TTL != 5*time.Minute || b.TTL != time.Minute || !slices.Equal(a.Files, b.Files) || len(b.Files) != 1 {
		t.Errorf("a = %+v, b = %+v", a, b)
	}
	// Merge keys in zones (the view's zones merged in) and as a whole source.
	if c, d := zone["c.example"], zone["d.example"]; c == nil || d == nil || len(c.Entries) != 1 || len(d.Entries) != 1 || d.Entries[0].Names[0] != "c.d.example." {
		t.Errorf("merged zone c.example = %+v, merged source of d.example = %+v", c, d)
	}
}

func TestReverseZones(t *testing.T) {
	tests := []struct {
		cidr  string
		count int
		first string
		last  string
	}{
		{"10.0.0.0/8", 1, "10.in-addr.arpa.", "10.in-addr.arpa."},
		{"192.168.0.0/16", 1, "168.192.in-addr.arpa.", "168.192.in-addr.arpa."},
		{"192.168.7.0/24", 1, "7.168.192.in-addr.arpa.", "7.168.192.in-addr.arpa."},
		{"10.96.0.0/12", 16, "96.10.in-addr.arpa.", "111.10.in-addr.arpa."},
		{"172.16.0.0/12", 16, "16.172.in-addr.arpa.", "31.172.in-addr.arpa."},
		{"10.20.0.0/20", 16, "0.20.10.in-addr.arpa.", "15.20.10.in-addr.arpa."},
		{"10.0.0.0/9", 128, "0.10.in-addr.arpa.", "127.10.in-addr.arpa."},
		{"10.1.2.128/25", 128, "128.2.1.10.in-addr.arpa.", "255.2.1.10.in-addr.arpa."},
		{"10.1.2.3/32", 1, "3.2.1.10.in-addr.arpa.", "3.2.1.10.in-addr.arpa."},
		{"0.0.0.0/0", 1, "in-addr.arpa.", "in-addr.arpa."},
		{"fd00::/8", 1, "d.f.ip6.arpa.", "d.f.ip6.arpa."},
		{"2001:db8::/32", 1, "8.b.d.0.1.0.0.2.ip6.arpa.", "8.b.d.0.1.0.0.2.ip6.arpa."},
		{"2001:db8::/30", 4, "8.b.d.0.1.0.0.2.ip6.arpa.", "b.b.d.0.1.0.0.2.ip6.arpa."},
		{"fd12:3456:789a::/48", 1, "a.9.8.7.6.5.4.3.2.1.d.f.ip6.arpa.", "a.9.8.7.6.5.4.3.2.1.d.f.ip6.arpa."},
		{"fd00::/7", 2, "c.f.ip6.arpa.", "d.f.ip6.arpa."},
		{"::/0", 1, "ip6.arpa.", "ip6.arpa."},
	}
	for _, tt := range tests {
		got := ReverseZones(netip.MustParsePrefix(tt.cidr))
		if len(got) != tt.count || got[0] != tt.first || got[len(got)-1] != tt.last {
			t.Errorf("ReverseZones(%s) = %d zones %s..%s, want %d zones %s..%s",
				tt.cidr, len(got), got[0], got[len(got)-1], tt.count, tt.first, tt.last)
		}
	}
}

// TestCIDRKey checks a CIDR in a zone key end to end, including that its
// expanded zones collide with a zone written by name.
func TestCIDRKey(t *testing.T) {
	data := `zones:
  cluster.local 10.96.0.0/12:
    - hosts: {entries: ["10.96.0.1 kubernetes"]}
  97.10.in-addr.arpa:
    - hosts: {entries: ["10.97.0.1 x.97.10.in-addr.arpa"]}
`
	_, err := Parse("dnsd.yaml", []byte(data), sources.ConfigKinds())
	want := `dnsd.yaml:4:3: zones."97.10.in-addr.arpa": duplicate zone "97.10.in-addr.arpa.": already declared in key "cluster.local 10.96.0.0/12" at dnsd.yaml:2:17`
	if err == nil || err.Error() != want {
		t.Errorf("got %v\nwant %s", err, want)
	}
}

func TestEntryCompletion(t *testing.T) {
	data := `zones:
  Example.Internal 10.in-addr.arpa:
    - hosts:
        entries:
          - "10.0.0.10 db DB.Example.Internal. db.example.internal"
          - "10.0.0.11 web.example.internal"
          - "10.0.0.12 api.   # absolute, outside the zone"
          - "10.0.0.80 *.apps.example.internal *"
  10.in-addr.arpa. example.test:
    - hosts: {entries: ["10.0.0.13 gw"]}
  .:
    - hosts: {entries: ["::1 localhost", "::ffff:10.0.0.14 mapped"]}
`
	_, err := Parse("dnsd.yaml", []byte(data), sources.ConfigKinds())
	var list ErrorList
	// api. is outside the zone: not an error (the source ignores it, with
	// a warning, as it does such names in hosts files).
	if !errors.As(err, &list) || len(list) != 1 || !strings.Contains(list[0].Error(), "duplicate zone") {
		t.Fatalf("want 1 error (duplicate 10.in-addr.arpa), got %v", err)
	}

	data = strings.Replace(data, "api.   # absolute, outside the zone", "api", 1)
	// A key that begins with reverse zones: dotless names go into its
	// first forward zone.
	data = strings.Replace(data, "10.in-addr.arpa. example.test", "10.96.0.0/12 example.test", 1)
	cfg, err := Parse("dnsd.yaml", []byte(data), sources.ConfigKinds())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, z := range cfg.Zones {
		for _, e := range z.Sources[0].Settings.(*hosts.Config).Entries {
			got = append(got, e.Addr.String()+" "+strings.Join(e.Names, " "))
		}
	}
	want := []string{
		"10.0.0.10 db.example.internal. db.example.internal. db.example.internal.",
		"10.0.0.11 web.example.internal.",
		"10.0.0.12 api.example.internal.",
		"10.0.0.80 *.apps.example.internal. *.example.internal.",
		"10.0.0.13 gw.example.test.",
		"::1 localhost.",
		"10.0.0.14 mapped.",
	}
	if !slices.Equal(got, want) {
		t.Errorf("entries:\ngot  %q\nwant %q", got, want)
	}
}

// TestFilePaths checks ~ expansion and that relative paths are relative
// to the config file's directory, not the working directory.
func TestFilePaths(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	if err := os.MkdirAll(filepath.Join(home, "dns"), 0o755); err != nil {
		t.Fatal(err)
	}
	homeHosts := filepath.Join(home, "dns", "home.hosts")
	if err := os.WriteFile(homeHosts, []byte("10.0.0.1 a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	confDir := t.TempDir()
	local := filepath.Join(confDir, "hosts.d", "local.hosts")
	if err := os.MkdirAll(filepath.Dir(local), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(local, []byte("10.0.0.2 b\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(confDir, "dnsd.yaml")
	data := "zones:\n  example.internal:\n    - hosts: {files: [~/dns/home.hosts, hosts.d/local.hosts]}\n"
	if err := os.WriteFile(file, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := mustLoad(t, file)
	if got := cfg.Zones[0].Sources[0].Settings.(*hosts.Config).Files; !slices.Equal(got, []string{homeHosts, local}) {
		t.Errorf("files = %v, want %v", got, []string{homeHosts, local})
	}
}

// TestYAMLSyntaxErrorPosition: a syntax error points at the line the
// operator has to fix (yaml.v3 gives the line before the list or map a
// parser error is in) and, where it can be told, the column.
func TestYAMLSyntaxErrorPosition(t *testing.T) {
	for _, tc := range []struct{ data, want string }{
		// A scanner error: the line of the problem.
		{"zones:\n  example.internal:\n    - hosts: {entries: [\"10.0.0.1 a\"]}\n\tbad: tab\n", "dnsd.yaml:4:1: invalid YAML: "},
		// A list left open on line 3, found on line 4: its bracket.
		{"log: {level: info}\nhttp: \"127.0.0.1:9153\"\nlisten: [\"127.0.0.1:53\"\nzones:\n  a.test:\n    - hosts: {entries: [\"1.2.3.4 x\"]}\n",
			"dnsd.yaml:3:9: invalid YAML: did not find expected ',' or ']' (the [ list that begins here is not closed)"},
		{"zones: {a.test: [{hosts: {}}, {etcd: {}]\n", "dnsd.yaml:1:31: invalid YAML: did not find expected ',' or '}' (the { map that begins here is not closed)"},
		// A source indented less than its list: the list.
		{"zones:\n  a.test:\n    - hosts:\n        ttl: 5s\n     bad: 1\n", "dnsd.yaml:3:5: invalid YAML: did not find expected '-' indicator"},
		{"zones:\n  a.test:\n    - hosts: {}\n   - etcd: {}\n", "dnsd.yaml:2:3: invalid YAML: did not find expected key"},
		// An alias of no anchor: the alias.
		{"listen: [\"127.0.0.1:53\"]\nzones:\n  a.test: *nope\n", "dnsd.yaml:3:11: invalid YAML: unknown anchor 'nope' referenced"},
	} {
		_, err := Parse("dnsd.yaml", []byte(tc.data), sources.ConfigKinds())
		var list ErrorList
		if !errors.As(err, &list) || len(list) != 1 {
			t.Errorf("%q: want one error, got %v", tc.data, err)
			continue
		}
		if !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%q:\n got %v\nwant %s...", tc.data, err, tc.want)
		}
	}
}

func TestViewsExample(t *testing.T) {
	cfg := mustLoad(t, "testdata/good/views.yaml")
	if !cfg.Rotate || len(cfg.Listen) != 3 || cfg.Listen[2].Proto != "https" {
		t.Fatalf("rotate %v, listen %v", cfg.Rotate, cfg.Listen)
	}
	if len(cfg.Views) != 3 {
		t.Fatalf("%d views", len(cfg.Views))
	}
	if lab := cfg.Views[2]; lab.Name != "lab" || len(lab.Clients) != 1 || len(lab.Listen) != 0 {
		t.Errorf("lab (listen with no value) = %+v, want every listen entry", lab)
	}
	office, vpn := cfg.Views[0], cfg.Views[1]
	if office.Name != "office" || len(office.Clients) != 2 || office.Clients[1] != netip.MustParsePrefix("fd10::/48") || len(office.Listen) != 0 || len(office.Zones) != 1 {
		t.Errorf("office = %+v", office)
	}
	if vpn.Name != "vpn" || len(vpn.Clients) != 0 || len(vpn.Listen) != 1 || vpn.Listen[0].Addr != "10.8.0.1:53" || vpn.Zones[0].Names[0] != "example.internal." {
		t.Errorf("vpn = %+v", vpn)
	}
}

// A character outside a label's alphabet is named as written, also when
// it takes more than one byte in UTF-8.
func TestNormalizeNameNamesTheCharacter(t *testing.T) {
	for name, want := range map[string]string{
		"exa$mple.com": `character '$' is not allowed`,
		"café.test":    `character 'é' is not allowed`,
	} {
		if _, err := NormalizeName(name); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("NormalizeName(%q): %v, want %q", name, err, want)
		}
	}
}

// Merge keys, through every mapping of the file: a key written in the
// mapping wins over a merged one, the first of merged mappings wins, an
// unknown key in a merged mapping is reported, and a merge of something
// else than mappings is reported once, in a source item too.
func TestMergeKeys(t *testing.T) {
	_, err := Parse("m.yaml", []byte(`zones:
  a.test:
    - hosts: &h {entries: ["10.0.0.1 a"], ttl: 1m}
  b.test:
    - hosts: {<<: [*h, {ttl: 5m}], ttl: 2m}
  c.test:
    - hosts: {<<: {entries: ["10.0.0.3 c"], colour: red}}
  d.test:
    - <<: 5
`), sources.ConfigKinds())
	var list ErrorList
	if !errors.As(err, &list) {
		t.Fatalf("err %v", err)
	}
	var got []string
	for _, e := range list {
		got = append(got, e.Error())
	}
	want := []string{
		`m.yaml:7:45: zones."c.test"[0].hosts.colour: unknown key "colour" (known: entries, fallthrough, files, reverse, ttl)`,
		`m.yaml:9:7: zones."d.test"[0]: a source has exactly one kind, got 0 keys (): start each source with its own "- "`,
		`m.yaml:9:11: zones."d.test"[0]: << merges a mapping or a list of mappings, got the number 5`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	cfg, err := Parse("m.yaml", []byte(`zones:
  a.test:
    - hosts: &h {entries: ["10.0.0.1 a"], ttl: 1m}
  b.test:
    - hosts: {<<: [*h, {ttl: 5m}], ttl: 2m}
  c.test:
    - hosts: {<<: [{ttl: 3m}, *h]}
`), sources.ConfigKinds())
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []time.Duration{time.Minute, 2 * time.Minute, 3 * time.Minute} {
		if h := cfg.Zones[i].Sources[0].Settings.(*hosts.Config); h.TTL != want || len(h.Entries) != 1 {
			t.Errorf("%s: ttl %v, %d entries; want %v, 1", cfg.Zones[i].Key, h.TTL, len(h.Entries), want)
		}
	}
}

// TestStateDir: state_dir is relative to dnsd.yaml's directory; an empty
// one is an error.
func TestStateDir(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "dnsd.yaml")
	zones := "zones:\n  home.arpa:\n    - hosts: {entries: [\"10.0.0.1 a\"]}\n"
	if err := os.WriteFile(file, []byte("state_dir: state\n"+zones), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := mustLoad(t, file).StateDir; got != filepath.Join(dir, "state") {
		t.Errorf("state_dir = %q, want %q", got, filepath.Join(dir, "state"))
	}
	if err := os.WriteFile(file, []byte("state_dir: \"\"\n"+zones), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(file, sources.ConfigKinds()); err == nil || !strings.Contains(err.Error(), "state_dir: empty directory name") {
		t.Errorf("empty state_dir: %v", err)
	}
}

// What an error tells an operator beyond the problem: the hours to write
// for days and weeks, that a tab is the character YAML cannot start a
// token with (at its column), and where a relative file name was looked
// for (the config file's directory, as an absolute path).
func TestOperatorHints(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ data, want string }{
		{"zones:\n  a.test:\n    - hosts: {entries: [\"10.0.0.1 x\"], ttl: 1d}\n",
			`dnsd.yaml:3:45: zones."a.test"[0].hosts.ttl: bad duration "1d": unknown unit "d" in duration "1d" (durations have no days or weeks: write 24h)`},
		{"zones:\n  a.test:\n    - hosts: {entries: [\"10.0.0.1 x\"], ttl: 1d12h}\n",
			`dnsd.yaml:3:45: zones."a.test"[0].hosts.ttl: bad duration "1d12h": unknown unit "d" in duration "1d12h" (durations have no days or weeks: write 36h)`},
		{"zones:\n  a.test:\n    - hosts: {entries: [\"10.0.0.1 x\"], ttl: 2w}\n",
			`dnsd.yaml:3:45: zones."a.test"[0].hosts.ttl: bad duration "2w": unknown unit "w" in duration "2w" (durations have no days or weeks: write 336h)`},
		{"zones:\n  a.test:\n    - hosts: {entries: [\"10.0.0.1 x\"], ttl: 5x}\n",
			`dnsd.yaml:3:45: zones."a.test"[0].hosts.ttl: bad duration "5x": unknown unit "x" in duration "5x" (use Go syntax: 500ms, 5s, 1h)`},
		{"zones:\n  a.test:\n    - hosts:\n  \tttl: 5s\n",
			`dnsd.yaml:4:3: invalid YAML: found character that cannot start any token (a tab indents this line: YAML indents with spaces only)`},
		{"zones:\n  a.test:\n    - file: {path: zones/none.zone}\n",
			`dnsd.yaml:3:20: zones."a.test"[0].file.path: file ` + filepath.Join(wd, "zones/none.zone") + `: no such file or directory`},
	} {
		_, err := Parse("dnsd.yaml", []byte(tc.data), sources.ConfigKinds())
		if err == nil || err.Error() != tc.want {
			t.Errorf("%q:\n got %v\nwant %s", tc.data, err, tc.want)
		}
	}
}
