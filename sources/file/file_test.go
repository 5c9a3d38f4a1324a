package file

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/dnsd/dnsd/config"
	"github.com/dnsd/dnsd/internal/dnstest"
	"github.com/dnsd/dnsd/internal/fsutil"
	"github.com/dnsd/dnsd/internal/logtest"
	"github.com/dnsd/dnsd/internal/pacing"
	"github.com/dnsd/dnsd/internal/pacing/pacingtest"
	"github.com/dnsd/dnsd/internal/quote"
	"github.com/dnsd/dnsd/pipeline"
)

func lookup(t *testing.T, s *Source, name string) pipeline.Result {
	t.Helper()
	return s.Lookup(context.Background(), &pipeline.Question{Name: name, Type: dns.TypeA})
}

func types(rrs []dns.RR) string {
	var out []string
	for _, rr := range rrs {
		out = append(out, dns.TypeToString[rr.Header().Rrtype])
	}
	return strings.Join(out, " ")
}

func open(t *testing.T, c *Config, watch bool) *Backend {
	t.Helper()
	b, err := Open(c, watch, slog.New(slog.DiscardHandler), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// The example zone: relative names, $TTL, a per-record TTL, an owner
// carried over from the line above, $INCLUDE relative to the file, the
// apex SOA and NS, and empty non-terminals.
func TestLoadZoneFile(t *testing.T) {
	c := &Config{Path: "testdata/example.internal.zone", Origin: "example.internal.", Zones: []string{"example.internal."}}
	s := NewSource(open(t, c, false))
	cases := map[string]string{
		"example.internal.":            "SOA NS MX",
		"web.example.internal.":        "A AAAA",
		"www.example.internal.":        "CNAME",
		"extra.example.internal.":      "A",
		"_http._tcp.example.internal.": "SRV",
		"a.b.c.example.internal.":      "A",
	}
	for name, want := range cases {
		r := lookup(t, s, name)
		if r.Status != pipeline.Found || types(r.RRs) != want {
			t.Errorf("%s: status %d, types %q; want Found %q", name, r.Status, types(r.RRs), want)
		}
	}
	for _, ent := range []string{"b.c.example.internal.", "c.example.internal.", "_tcp.example.internal."} {
		if r := lookup(t, s, ent); r.Status != pipeline.Found || len(r.RRs) != 0 {
			t.Errorf("%s: want an empty non-terminal, got status %d %v", ent, r.Status, r.RRs)
		}
	}
	if r := lookup(t, s, "nope.example.internal."); r.Status != pipeline.NotMine {
		t.Errorf("unknown name: status %d", r.Status)
	}
	if ttl := lookup(t, s, "web.example.internal.").RRs[0].Header().Ttl; ttl != 300 {
		t.Errorf("$TTL: ttl %d, want 300", ttl)
	}
	if ttl := lookup(t, s, "www.example.internal.").RRs[0].Header().Ttl; ttl != 600 {
		t.Errorf("own ttl: %d, want 600", ttl)
	}
	if soa, own := s.SOA("example.internal."); soa == nil || soa.Serial != 2024010101 || !own {
		t.Fatalf("file SOA %v (its serial the zone's: %v), want serial 2024010101, the zone's", soa, own)
	}
	if s.TTL() != 60 {
		t.Errorf("negative TTL %d, want the SOA minimum 60", s.TTL())
	}
}

// Inline records are relative to the zone, take the file's $TTL (else 1h)
// and add to the file's records at the same name.
func TestInlineRecords(t *testing.T) {
	c := &Config{Path: "testdata/example.internal.zone", Origin: "example.internal.", Zones: []string{"example.internal."},
		Records: []Record{{Text: "web IN TXT \"inline\""}, {Text: "*.apps 60 IN A 10.0.0.80"}, {Text: "@ IN TXT \"apex\""}}}
	s := NewSource(open(t, c, false))
	if r := lookup(t, s, "web.example.internal."); types(r.RRs) != "A AAAA TXT" {
		t.Errorf("file and inline records at one name: %q", types(r.RRs))
	}
	if r := lookup(t, s, "*.apps.example.internal."); r.Status != pipeline.Found || r.RRs[0].Header().Ttl != 60 {
		t.Errorf("wildcard owner: %v", r)
	}
	if r := lookup(t, s, "apps.example.internal."); r.Status != pipeline.Found || len(r.RRs) != 0 {
		t.Errorf("the wildcard's parent is an empty non-terminal: %v", r)
	}
	if !s.b.snapshot().z.wildcards {
		t.Error("the zone does not know it holds a wildcard")
	}
	// With inline records beside it, the file's SOA is the zone's but its
	// serial is not: it cannot follow changes made in dnsd.yaml.
	if soa, own := s.SOA("example.internal."); soa == nil || soa.Serial != 2024010101 || own {
		t.Errorf("a zone file with inline records: SOA %v, its serial the zone's %v; want the file's SOA, dnsd's serial", soa, own)
	}
	only := NewSource(open(t, &Config{Origin: "example.internal.", Zones: []string{"example.internal."}, Records: []Record{{Text: "db IN A 10.0.0.5"}}}, false))
	if r := lookup(t, only, "db.example.internal."); r.Status != pipeline.Found || r.RRs[0].Header().Ttl != 3600 {
		t.Errorf("inline only, default ttl: %v", r.RRs)
	}
}

// Parse errors name the zone file and line; inline ones point into
// dnsd.yaml.
func TestParseErrors(t *testing.T) {
	_, err := load(&Config{Path: "testdata/bad.zone", Origin: "example.internal.", Zones: []string{"example.internal."}}, nil)
	var pe *parseError
	if !asParseError(err, &pe) || pe.pos.File != "testdata/bad.zone" || pe.pos.Line != 3 {
		t.Fatalf("bad zone file: %v, want testdata/bad.zone:3", err)
	}
	at := config.Pos{File: "dnsd.yaml", Line: 7, Col: 9}
	_, err = load(&Config{Origin: "example.internal.", Zones: []string{"example.internal."}, Records: []Record{{Text: "x IN A nope", Pos: at}}}, nil)
	if !asParseError(err, &pe) || pe.pos != at {
		t.Fatalf("bad inline record: %v, want at %s", err, at)
	}
}

// Records outside the zone key's zones are ignored (and counted).
func TestOutsideIgnored(t *testing.T) {
	z, err := load(&Config{Origin: "example.internal.", Zones: []string{"example.internal."},
		Records: []Record{{Text: "in IN A 10.0.0.1"}, {Text: "other.test. IN A 10.0.0.2"}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if z.outside != 1 || z.records != 1 || z.names["other.test."] != nil {
		t.Fatalf("outside %d, records %d", z.outside, z.records)
	}
}

// A changed file is applied (new serial); a file that turns bad or empty
// keeps the last good zone; an included file's change is applied too.
func TestWatch(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "z.zone")
	write := func(p, s string) {
		t.Helper()
		tmp := p + ".tmp"
		if err := os.WriteFile(tmp, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, p); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(dir, "inc.zone"), "inc IN A 10.0.0.7\n")
	write(path, "$TTL 60\na IN A 10.0.0.1\n$INCLUDE inc.zone\n")
	c := &Config{Path: path, Origin: "z.test.", Zones: []string{"z.test."}}
	s := NewSource(open(t, c, true))
	serial := s.Serial()
	write(path, "$TTL 60\na IN A 10.0.0.2\n$INCLUDE inc.zone\n")
	dnstest.Eventually(t, "the change", 5*time.Second, func() bool {
		r := lookup(t, s, "a.z.test.")
		return r.Status == pipeline.Found && r.RRs[0].(*dns.A).A.String() == "10.0.0.2"
	})
	if s.Serial() <= serial {
		t.Errorf("serial %d did not rise from %d", s.Serial(), serial)
	}
	write(filepath.Join(dir, "inc.zone"), "inc IN A 10.0.0.8\n")
	dnstest.Eventually(t, "the included file's change", 5*time.Second, func() bool {
		r := lookup(t, s, "inc.z.test.")
		return r.Status == pipeline.Found && r.RRs[0].(*dns.A).A.String() == "10.0.0.8"
	})
	serial = s.Serial()
	write(path, "$TTL 60\na IN A 10.0.0.999\n")
	write(path+".marker", "x") // an event after the bad write, to know it was seen
	time.Sleep(200 * time.Millisecond)
	if r := lookup(t, s, "a.z.test."); r.Status != pipeline.Found || r.RRs[0].(*dns.A).A.String() != "10.0.0.2" || s.Serial() != serial {
		t.Fatalf("bad file: %v serial %d (was %d); want the last good zone", r.RRs, s.Serial(), serial)
	}
	emptied := time.Now()
	write(path, "")
	time.Sleep(200 * time.Millisecond)
	if r := lookup(t, s, "a.z.test."); r.Status != pipeline.Found {
		t.Fatal("an emptied file dropped the zone at once")
	}
	// ... unless it stays empty: then it is applied a second later.
	dnstest.Eventually(t, "the emptied file applied", 5*time.Second, func() bool {
		return lookup(t, s, "a.z.test.").Status == pipeline.NotMine
	})
	if took := time.Since(emptied); took < emptyGrace {
		t.Errorf("the emptied file was applied after %v, before it stayed empty for %v", took, emptyGrace)
	}
}

// A file of the zone that turns empty waits emptyGrace even when the zone
// keeps records from elsewhere: inline records beside the file, or the
// zone file beside an included file that is emptied (an in-place rewrite
// truncates first).
func TestEmptiedFileBesideOtherRecords(t *testing.T) {
	for _, tc := range []struct {
		name    string
		records []Record
		empty   string // the file emptied, relative to the directory
		gone    string // a name it held
	}{
		{name: "inline records", records: []Record{{Text: "inl IN A 10.0.0.50"}}, empty: "z.zone", gone: "a.z.test."},
		{name: "included file", empty: "inc.zone", gone: "inc.z.test."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "z.zone")
			if err := os.WriteFile(filepath.Join(dir, "inc.zone"), []byte("inc IN A 10.0.0.7\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte("$TTL 60\na IN A 10.0.0.1\n$INCLUDE inc.zone\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			s := NewSource(open(t, &Config{Path: path, Origin: "z.test.", Zones: []string{"z.test."}, Records: tc.records}, true))
			emptied := time.Now()
			if err := os.Truncate(filepath.Join(dir, tc.empty), 0); err != nil { // in place, as a rewrite begins
				t.Fatal(err)
			}
			time.Sleep(300 * time.Millisecond)
			if r := lookup(t, s, tc.gone); r.Status != pipeline.Found {
				t.Fatalf("%s emptied: %s dropped after 300 ms, before it stayed empty for %v", tc.empty, tc.gone, emptyGrace)
			}
			dnstest.Eventually(t, "the emptied file applied", 5*time.Second, func() bool {
				return lookup(t, s, tc.gone).Status == pipeline.NotMine
			})
			if took := time.Since(emptied); took < emptyGrace {
				t.Errorf("the emptied file was applied after %v, before it stayed empty for %v", took, emptyGrace)
			}
		})
	}
}

// What a watched file's changes log: a breakage once per change — again
// when the file was good in between, even if it breaks the same way —
// and records outside the zone at every load that has them.
func TestWatchLogs(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "z.zone")
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(path+".tmp", []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(path+".tmp", path); err != nil {
			t.Fatal(err)
		}
	}
	good, bad := "a IN A 10.0.0.1\n", "a IN A 10.0.0.999\n"
	write(good)
	logs := &logtest.Buffer{}
	b, err := Open(&Config{Path: path, Origin: "z.test.", Zones: []string{"z.test."}}, true, slog.New(slog.NewTextHandler(logs, nil)), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	s := NewSource(b)
	wait := func(what string, n int) {
		t.Helper()
		dnstest.Eventually(t, what, 5*time.Second, func() bool { return logs.Count(what) == n })
	}
	write(bad)
	wait("zone file not applied", 1)
	write(good)
	time.Sleep(300 * time.Millisecond) // read, and nothing to say
	write(bad)
	wait("zone file not applied", 2)
	write("a IN A 10.0.0.2\nelsewhere.test. IN A 10.0.0.3\n")
	wait("outside the zone key's zones are ignored", 1)
	if r := lookup(t, s, "a.z.test."); r.Status != pipeline.Found || r.RRs[0].(*dns.A).A.String() != "10.0.0.2" {
		t.Errorf("after the last change: %v", r.RRs)
	}
	// A SOA serial that goes back is served as written (the operator's)
	// and logged: secondaries ignore the zone until it passes theirs.
	soa := "@ IN SOA ns.z.test. h.z.test. %d 3600 600 86400 60\na IN A 10.0.0.2\n"
	write(fmt.Sprintf(soa, 2024010103))
	dnstest.Eventually(t, "the SOA applied", 5*time.Second, func() bool { soa, _ := s.SOA("z.test."); return soa != nil })
	write(fmt.Sprintf(soa, 2024010100))
	wait("SOA serial went back", 1)
	if soa, _ := s.SOA("z.test."); soa.Serial != 2024010100 {
		got := soa.Serial
		t.Errorf("serial %d, want the file's 2024010100", got)
	}
}

// List yields every record of the zone, owners in the order they first
// appear in the file, wildcards as they
// are, and stops when told to.
func TestList(t *testing.T) {
	c := &Config{Path: "testdata/example.internal.zone", Origin: "example.internal.", Zones: []string{"example.internal."},
		Records: []Record{{Text: "*.apps 60 IN A 10.0.0.80"}}}
	s := NewSource(open(t, c, false))
	var owners []string
	if err := s.List("example.internal.", func(rr dns.RR) bool {
		owners = append(owners, rr.Header().Name+" "+dns.TypeToString[rr.Header().Rrtype])
		return true
	}); err != nil {
		t.Fatal(err)
	}
	if len(owners) != 13 || owners[0] != "example.internal. SOA" || owners[len(owners)-1] != "*.apps.example.internal. A" {
		t.Fatalf("listed %d records: %q", len(owners), owners)
	}
	n := 0
	_ = s.List("example.internal.", func(dns.RR) bool { n++; return n < 3 })
	if n != 3 {
		t.Fatalf("yield false did not stop the listing: %d records", n)
	}
	n = 0
	_ = s.List("b.c.example.internal.", func(dns.RR) bool { n++; return true })
	if n != 1 {
		t.Fatalf("a zone below the origin lists %d records, want 1 (a.b.c)", n)
	}
}

// An $INCLUDE that is not a regular file (a FIFO would block the parser)
// or is missing is an error naming it; nested includes are read too.
func TestIncludes(t *testing.T) {
	dir := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(dir, "inner.zone"), []byte("inner IN A 10.0.0.2\n"), 0o644))
	must(os.WriteFile(filepath.Join(dir, "mid.zone"), []byte("mid IN A 10.0.0.1\n$INCLUDE inner.zone\n"), 0o644))
	must(os.WriteFile(filepath.Join(dir, "z.zone"), []byte("$INCLUDE mid.zone\n"), 0o644))
	c := &Config{Path: filepath.Join(dir, "z.zone"), Origin: "z.test.", Zones: []string{"z.test."}}
	z, err := load(c, nil)
	if err != nil {
		t.Fatal(err)
	}
	if z.names["inner.z.test."] == nil || len(z.files) != 3 {
		t.Fatalf("nested include: names %v, files %v", z.order, z.files)
	}
	must(os.Remove(filepath.Join(dir, "inner.zone")))
	must(syscall.Mkfifo(filepath.Join(dir, "inner.zone"), 0o644))
	if _, err := load(c, nil); err == nil || !strings.Contains(err.Error(), "inner.zone") {
		t.Fatalf("a FIFO include: %v, want an error naming it", err)
	}
	// A missing include is reported where it is named: the including
	// file, its line, the column of the name.
	must(os.Remove(filepath.Join(dir, "inner.zone")))
	at := filepath.Join(dir, "mid.zone") + ":2:10: $INCLUDE "
	if _, err := load(c, nil); err == nil || !strings.HasPrefix(err.Error(), at) || !strings.Contains(err.Error(), "no such file") {
		t.Fatalf("a missing include: %v, want %s...", err, at)
	}
}

// The backend opened right after a config parse starts from that parse
// (the file is not read twice at start) and the config lets go of it.
func TestOpenTakesTheConfigParse(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "z.zone")
	if err := os.WriteFile(path, []byte("a IN A 10.0.0.1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c := &Config{Path: path, Origin: "z.test.", Zones: []string{"z.test."}}
	z, err := load(c, nil)
	if err != nil {
		t.Fatal(err)
	}
	c.parsed = z
	if err := os.Remove(path); err != nil { // a second read would fail
		t.Fatal(err)
	}
	b, err := Open(c, false, slog.New(slog.DiscardHandler), nil, nil)
	if err != nil {
		t.Fatalf("Open read the file again: %v", err)
	}
	defer b.Close()
	if b.snapshot().z != z || c.parsed != nil {
		t.Fatalf("Open did not take over the config's parse (kept by the config: %v)", c.parsed != nil)
	}
}

// On one processor a zone file's reload gives way to the server (it
// sleeps now and then: see package pacing); with two processors, and at
// the start, nothing sleeps.
func TestReloadPacedOnOneProcessor(t *testing.T) {
	var sb strings.Builder
	sb.WriteString("$TTL 60\n")
	for i := range 50000 {
		fmt.Fprintf(&sb, "h%d IN A 10.%d.%d.%d\n", i, i>>16, i>>8&0xff, i&0xff)
	}
	for _, procs := range []int{1, 2} {
		t.Run(fmt.Sprint(procs), func(t *testing.T) {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
			path := filepath.Join(t.TempDir(), "z.zone")
			if err := os.WriteFile(path, []byte(sb.String()), 0o644); err != nil {
				t.Fatal(err)
			}
			c := &Config{Path: path, Origin: "z.test.", Zones: []string{"z.test."}}
			b := open(t, c, true)
			var slept pacingtest.Sleeps
			b.pacing.Store(&pacing.Pacing{Sleep: slept.Sleep})
			s := NewSource(b)
			if err := os.WriteFile(path, []byte(sb.String()+"added IN A 10.9.9.9\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			dnstest.Eventually(t, "the change", 5*time.Second, func() bool {
				return lookup(t, s, "added.z.test.").Status == pipeline.Found
			})
			slept.Expect(t, "a reload of 50,000 records", true)
		})
	}
}

// Other files of the zone file's directory changing make no reload (the
// zone's files are only looked at: stat, not parse); a change of the
// file, or of where a symlink to it leads (a ConfigMap's ..data swapped),
// does.
func TestUnrelatedChangesNoReload(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []string{"v1", "v2"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "v1", "z.zone"), []byte("$TTL 60\na IN A 10.0.0.1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "v2", "z.zone"), []byte("$TTL 60\na IN A 10.0.0.2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// dir/z.zone -> ..data/z.zone, ..data -> v1: as a Kubernetes volume.
	if err := os.Symlink("v1", filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join("..data", "z.zone"), filepath.Join(dir, "z.zone")); err != nil {
		t.Fatal(err)
	}
	var reloads atomic.Int32 // each reload is one burst
	c := &Config{Path: filepath.Join(dir, "z.zone"), Origin: "z.test.", Zones: []string{"z.test."}}
	b, err := Open(c, true, slog.New(slog.DiscardHandler), nil, func() func() {
		reloads.Add(1)
		return func() {}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	s := NewSource(b)
	for i := range 5 {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("other%d", i)), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(4 * debounce)
	if n := reloads.Load(); n != 0 {
		t.Errorf("other files of the directory written: %d reloads, want 0", n)
	}
	// Swap ..data to v2, as the kubelet does: rename a new link over it.
	if err := os.Symlink("v2", filepath.Join(dir, "..data_tmp")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	dnstest.Eventually(t, "the swapped file", 5*time.Second, func() bool {
		r := lookup(t, s, "a.z.test.")
		return r.Status == pipeline.Found && r.RRs[0].(*dns.A).A.String() == "10.0.0.2"
	})
}

// A zone file that is a symlink into another directory: a change of the
// file it names is applied.
func TestSymlinkIntoAnotherDirectory(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"conf", "data"} {
		if err := os.Mkdir(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	real := filepath.Join(root, "data", "z.zone")
	if err := os.WriteFile(real, []byte("a IN A 10.0.0.1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(root, "conf", "z.zone")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	s := NewSource(open(t, &Config{Path: link, Origin: "z.test.", Zones: []string{"z.test."}}, true))
	if err := os.WriteFile(real+".tmp", []byte("a IN A 10.0.0.2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(real+".tmp", real); err != nil {
		t.Fatal(err)
	}
	dnstest.Eventually(t, "the change of the file the link names", 5*time.Second, func() bool {
		r := lookup(t, s, "a.z.test.")
		return r.Status == pipeline.Found && r.RRs[0].(*dns.A).A.String() == "10.0.0.2"
	})
}

// The zone file's directory removed and made again (the kernel drops
// its watch with it): the last zone is served meanwhile, and the new file
// is read within a few seconds, with no reload; then edits as usual.
func TestDirectoryRemovedAndBack(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "d")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "z.zone")
	if err := os.WriteFile(path, []byte("a IN A 10.0.0.1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := NewSource(open(t, &Config{Path: path, Origin: "z.test.", Zones: []string{"z.test."}}, true))
	addr := func() string {
		r := lookup(t, s, "a.z.test.")
		if r.Status != pipeline.Found || len(r.RRs) == 0 {
			return ""
		}
		return r.RRs[0].(*dns.A).A.String()
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	if got := addr(); got != "10.0.0.1" {
		t.Fatalf("with the directory gone: %q, want the last zone's 10.0.0.1", got)
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("a IN A 10.0.0.2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	dnstest.Eventually(t, "the file in the directory made again", 10*time.Second, func() bool { return addr() == "10.0.0.2" })
	if err := os.WriteFile(path, []byte("a IN A 10.0.0.3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	dnstest.Eventually(t, "an edit after", 5*time.Second, func() bool { return addr() == "10.0.0.3" })
}

// A zone key of several names: each apex's own SOA is that zone's.
func TestSOAPerApex(t *testing.T) {
	c := &Config{Origin: "two.test.", Zones: []string{"two.test.", "sub.two.test."}, Records: []Record{
		{Text: "@ IN SOA ns1 hostmaster 55 7200 3600 1209600 60"},
		{Text: "sub.two.test. IN SOA ns1.two.test. hostmaster.two.test. 66 7200 3600 1209600 60"},
	}}
	s := NewSource(open(t, c, false))
	for zone, want := range map[string]uint32{"two.test.": 55, "sub.two.test.": 66} {
		if soa, own := s.SOA(zone); soa == nil || soa.Serial != want || !own {
			t.Errorf("SOA(%s) = %v, want serial %d", zone, soa, want)
		}
	}
	if soa, _ := s.SOA("other.test."); soa != nil {
		t.Error("a SOA for a zone the key does not name")
	}
}

// A name's data is kept valid whatever the file says: one copy of a
// record, one TTL per RRset (the first's), a TTL above 2^31-1 read as 0,
// no CNAME beside other data (the first written stays; both logged
// once); names written with escapes or raw UTF-8 are found as queries
// spell them.
func TestRecordsMadeValid(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "z.zone")
	zone := "$TTL 300\n" +
		"dup A 10.0.0.1\ndup A 10.0.0.1\n" +
		"ttl 300 A 10.0.0.2\nttl 600 A 10.0.0.3\n" +
		"big 2147483648 A 10.0.0.4\n" +
		"both CNAME dup\nboth A 10.0.0.5\n" +
		"data A 10.0.0.6\ndata CNAME dup\n" +
		"\\065bc A 10.0.0.7\n" +
		"uni\xc3\xa9 A 10.0.0.8\n" +
		"alias CNAME \\065bc\n"
	if err := os.WriteFile(path, []byte(zone), 0o644); err != nil {
		t.Fatal(err)
	}
	logs := &logtest.Buffer{}
	b, err := Open(&Config{Path: path, Origin: "z.test.", Zones: []string{"z.test."}}, false, slog.New(slog.NewTextHandler(logs, nil)), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	s := NewSource(b)
	get := func(name string) []string {
		var out []string
		for _, rr := range s.Lookup(context.Background(), &pipeline.Question{Name: name, Type: dns.TypeA}).RRs {
			out = append(out, strings.Join(strings.Fields(rr.String()), " "))
		}
		return out
	}
	for name, want := range map[string][]string{
		"dup.z.test.":           {"dup.z.test. 300 IN A 10.0.0.1"},
		"ttl.z.test.":           {"ttl.z.test. 300 IN A 10.0.0.2", "ttl.z.test. 300 IN A 10.0.0.3"},
		"big.z.test.":           {"big.z.test. 0 IN A 10.0.0.4"},
		"both.z.test.":          {"both.z.test. 300 IN CNAME dup.z.test."},
		"data.z.test.":          {"data.z.test. 300 IN A 10.0.0.6"},
		"abc.z.test.":           {"abc.z.test. 300 IN A 10.0.0.7"},
		"uni\\195\\169.z.test.": {"uni\\195\\169.z.test. 300 IN A 10.0.0.8"},
		"alias.z.test.":         {"alias.z.test. 300 IN CNAME Abc.z.test."},
	} {
		if got := get(name); !slices.Equal(got, want) {
			t.Errorf("%s: %q, want %q", name, got, want)
		}
	}
	for _, want := range []string{"beside a CNAME", "records=2", "another TTL", "example=ttl.z.test."} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, logs)
		}
	}
}

// $TTL applies from its line on: a record before it (naming no TTL) gets
// the default hour, as documented; inline records take the file's $TTL.
func TestTTLBeforeDollarTTL(t *testing.T) {
	path := filepath.Join(t.TempDir(), "z.zone")
	if err := os.WriteFile(path, []byte("early A 10.0.0.1\n$TTL 300\nlate A 10.0.0.2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := NewSource(open(t, &Config{Path: path, Origin: "z.test.", Zones: []string{"z.test."}, Records: []Record{{Text: "inline A 10.0.0.3"}}}, false))
	for name, want := range map[string]uint32{"early.z.test.": 3600, "late.z.test.": 300, "inline.z.test.": 300} {
		if r := lookup(t, s, name); len(r.RRs) != 1 || r.RRs[0].Header().Ttl != want {
			t.Errorf("%s: %v, want TTL %d", name, r.RRs, want)
		}
	}
	// Without a SOA, the file's $TTL is also the TTL of its negative
	// answers (the synthesized SOA's), not an hour.
	if got := s.TTL(); got != 300 {
		t.Errorf("TTL() of a file without SOA and with $TTL 300: %d", got)
	}
	if got := NewSource(open(t, &Config{Origin: "z.test.", Zones: []string{"z.test."}, Records: []Record{{Text: "x A 10.0.0.4"}}}, false)).TTL(); got != 3600 {
		t.Errorf("TTL() of inline records alone: %d, want 3600", got)
	}
}

// A line over fsutil.MaxLine, in the zone file or a file it includes, is
// an error at its FILE:LINE; the zone is not parsed, and the error does
// not quote the line.
func TestLongLine(t *testing.T) {
	dir := t.TempDir()
	long := strings.Repeat("a", fsutil.MaxLine+1)
	zone := filepath.Join(dir, "z.zone")
	inc := filepath.Join(dir, "inc.zone")
	for _, c := range []struct {
		zone, inc, at string
	}{
		{"@ 300 IN A 10.0.0.1\n" + long + " IN A 10.0.0.2\n", "", zone + ":2:1"},
		{"@ 300 IN A 10.0.0.1\n" + long, "", zone + ":2:1"},
		{"@ 300 IN TXT \"" + long + "\"\n", "", zone + ":1:1"},
		{"$INCLUDE inc.zone\n", "www IN A 10.0.0.3\n\n" + long, inc + ":3:1"},
	} {
		writeTestFile(t, zone, c.zone)
		writeTestFile(t, inc, c.inc)
		_, err := load(&Config{Path: zone, Origin: "example.internal.", Zones: []string{"example.internal."}}, nil)
		if err == nil || !strings.Contains(err.Error(), c.at+": "+fsutil.ErrLongLine.Error()) || len(err.Error()) > 1024 {
			t.Fatalf("error %.300v, want %s: %v", err, c.at, fsutil.ErrLongLine)
		}
	}
}

// A zone file's error quotes at most quote.Max bytes of the token, and
// never a key: a zone file that is, or includes, a key, password or
// certificate file (configured as one, or looking like one) is named.
func TestErrorsDoNotQuoteFiles(t *testing.T) {
	dir := t.TempDir()
	const secret = "c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0LXNlY3JldA=="
	zone := filepath.Join(dir, "z.zone")
	c := &Config{Path: zone, Origin: "example.internal.", Zones: []string{"example.internal."}}
	writeTestFile(t, filepath.Join(dir, "bind.key"), "key \"xfr\" {\n\talgorithm hmac-sha256;\n\tsecret \""+secret+"\";\n};\n")
	writeTestFile(t, filepath.Join(dir, "tls.key"), "-----BEGIN PRIVATE KEY-----\n"+secret+"\n-----END PRIVATE KEY-----\n")
	writeTestFile(t, filepath.Join(dir, "xfr.secret"), secret+"\n")
	for _, inc := range []string{"bind.key", "tls.key", "xfr.secret"} {
		writeTestFile(t, zone, "@ 300 IN A 10.0.0.1\n$INCLUDE "+inc+"\n")
		c.secrets = config.Secrets{filepath.Join(dir, "xfr.secret"): true}
		_, err := load(c, nil)
		if err == nil || strings.Contains(err.Error(), secret[:16]) || !strings.Contains(err.Error(), zone+":2:10: $INCLUDE "+filepath.Join(dir, inc)+": a key") {
			t.Fatalf("$INCLUDE %s: %v", inc, err)
		}
	}
	c.Path = filepath.Join(dir, "tls.key")
	if _, err := load(c, nil); err == nil || strings.Contains(err.Error(), secret[:16]) || !strings.Contains(err.Error(), "not a zone file") {
		t.Fatalf("a key as the zone file: %v", err)
	}
	c.Path = zone
	writeTestFile(t, zone, "@ 300 IN A 10.0.0.1\n"+strings.Repeat("b", 60000)+" IN A 10.0.0.1\n")
	_, err := load(c, nil)
	if err == nil || len(err.Error()) > 512 || !strings.Contains(err.Error(), quote.Ellipsis) {
		t.Fatalf("a long token: %d bytes: %.300v", len(fmt.Sprint(err)), err)
	}
}

func writeTestFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestPresignedZone: a zone file signed beforehand exposes its DNSSEC
// records to the pipeline (pipeline.Presigned): whether a zone is signed
// (a DNSKEY at its apex), and the NSEC and NSEC3 records matching or
// covering a name; an RRSIG keeps the TTL of the RRset it covers.
func TestPresignedZone(t *testing.T) {
	nsec := NewSource(open(t, &Config{Path: "../../pipeline/testdata/signed.example.signed", Origin: "signed.example.", Zones: []string{"signed.example."}}, false))
	nsec3 := NewSource(open(t, &Config{Path: "../../pipeline/testdata/nsec3.example.signed", Origin: "nsec3.example.", Zones: []string{"nsec3.example."}}, false))
	plain := NewSource(open(t, &Config{Path: "testdata/example.internal.zone", Origin: "example.internal.", Zones: []string{"example.internal."}}, false))
	if !nsec.Presigned("signed.example.") || !nsec3.Presigned("nsec3.example.") || plain.Presigned("example.internal.") || nsec.Presigned("example.internal.") {
		t.Fatal("Presigned: want true for the signed zones only")
	}
	owner := func(rrs []dns.RR, typ uint16) string {
		for _, rr := range rrs {
			if rr.Header().Rrtype == typ {
				return rr.Header().Name
			}
		}
		return ""
	}
	for name, want := range map[string]string{
		"signed.example.":         "signed.example.", // matches
		"mail.signed.example.":    "mail.signed.example.",
		"nope.signed.example.":    "mail.signed.example.", // covers: mail < nope < ns1
		"deep.signed.example.":    "*.apps.signed.example.",
		"a.alias.signed.example.": "alias.signed.example.",
		"zzz.signed.example.":     "www.signed.example.", // the last: it wraps to the apex
	} {
		if got := owner(nsec.NSEC("signed.example.", name), dns.TypeNSEC); got != want {
			t.Errorf("NSEC(%s) at %q, want %q", name, got, want)
		}
	}
	if rrs := plain.NSEC("example.internal.", "web.example.internal."); rrs != nil {
		t.Errorf("NSEC of an unsigned zone: %v", rrs)
	}
	param := lookup(t, nsec3, "nsec3.example.").RRs
	var p *dns.NSEC3PARAM
	for _, rr := range param {
		if x, ok := rr.(*dns.NSEC3PARAM); ok {
			p = x
		}
	}
	if p == nil {
		t.Fatal("no NSEC3PARAM at the apex")
	}
	for _, name := range []string{"nsec3.example.", "www.nsec3.example.", "deep.nsec3.example.", "nope.nsec3.example.", "*.nsec3.example.", "zz.yy.nsec3.example."} {
		h := strings.ToLower(dns.HashName(name, p.Hash, p.Iterations, p.Salt))
		var n3 *dns.NSEC3
		for _, rr := range nsec3.NSEC3("nsec3.example.", h) {
			if x, ok := rr.(*dns.NSEC3); ok {
				n3 = x
			}
		}
		if n3 == nil || !n3.Match(name) && !n3.Cover(name) {
			t.Errorf("NSEC3(%s = %s): %v neither matches nor covers it", name, h, n3)
		}
	}
	for _, rr := range lookup(t, nsec, "mail.signed.example.").RRs {
		if sig, ok := rr.(*dns.RRSIG); ok && sig.Hdr.Ttl != sig.OrigTtl {
			t.Errorf("RRSIG over %s has TTL %d, want its RRset's %d", dns.TypeToString[sig.TypeCovered], sig.Hdr.Ttl, sig.OrigTtl)
		}
	}
}
