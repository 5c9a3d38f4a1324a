package hosts

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dnsd/dnsd/internal/dnstest"
	"github.com/dnsd/dnsd/internal/logtest"
	"github.com/dnsd/dnsd/pipeline"
	"github.com/miekg/dns"
)

// syncBuffer is a goroutine-safe log sink.
type syncBuffer = logtest.Buffer

func testLogger(t *testing.T) (*slog.Logger, *syncBuffer) {
	t.Helper()
	buf := &syncBuffer{}
	return slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug})), buf
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func openBackend(t *testing.T, files ...string) *Backend {
	t.Helper()
	logger, _ := testLogger(t)
	b, err := OpenBackend(files, time.Hour, Options{Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return b
}

// records renders a lookup as the user would check it: status and the
// records' type and data, in order.
func records(s *Source, name string) []string {
	res := s.Lookup(context.Background(), &pipeline.Question{Name: name, Type: dns.TypeA})
	switch res.Status {
	case pipeline.NotMine:
		return []string{"NOTMINE"}
	case pipeline.Found:
	default:
		return []string{fmt.Sprintf("status %d", res.Status)}
	}
	out := []string{}
	for _, rr := range res.RRs {
		h := rr.Header()
		if h.Name != name {
			out = append(out, "WRONG OWNER "+h.Name)
		}
		switch rr := rr.(type) {
		case *dns.A:
			out = append(out, "A "+rr.A.String())
		case *dns.AAAA:
			out = append(out, "AAAA "+rr.AAAA.String())
		case *dns.PTR:
			out = append(out, "PTR "+rr.Ptr)
		default:
			out = append(out, rr.String())
		}
	}
	return out
}

func expect(t *testing.T, s *Source, name string, want ...string) {
	t.Helper()
	if want == nil {
		want = []string{}
	}
	if got := records(s, name); !slices.Equal(got, want) {
		t.Errorf("%s: got %q, want %q", name, got, want)
	}
}

// eventually polls until name has the wanted records, for up to 2 s (the
// goal is 100 ms).
func eventually(t *testing.T, s *Source, name string, want ...string) {
	t.Helper()
	eventuallyWithin(t, 2*time.Second, s, name, want...)
}

// eventuallyWithin is eventually with its own bound, for what is no
// latency check (a large file reloaded on one processor, under -race).
func eventuallyWithin(t *testing.T, bound time.Duration, s *Source, name string, want ...string) {
	t.Helper()
	if want == nil {
		want = []string{}
	}
	dnstest.EventuallyNil(t, bound, func() error {
		if got := records(s, name); !slices.Equal(got, want) {
			return fmt.Errorf("%s: got %q, want %q", name, got, want)
		}
		return nil
	})
}

// never checks that name keeps its records for a while (changes are
// normally served within 100 ms, so 300 ms of stability is meaningful).
func never(t *testing.T, s *Source, name string, want ...string) {
	t.Helper()
	deadline := time.Now().Add(300 * time.Millisecond)
	for time.Now().Before(deadline) {
		if got := records(s, name); !slices.Equal(got, want) {
			t.Fatalf("%s: got %q, want it to stay %q", name, got, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestParseLine(t *testing.T) {
	tests := []struct {
		line  string
		addr  string
		names []string
		bad   bool
	}{
		{line: "", names: nil},
		{line: "   \t  ", names: nil},
		{line: "# just a comment", names: nil},
		{line: "   # indented comment", names: nil},
		{line: "10.0.0.1 a", addr: "10.0.0.1", names: []string{"a."}},
		{line: "10.0.0.1\tWeb.Example.Internal. www  # comment", addr: "10.0.0.1", names: []string{"web.example.internal.", "www."}},
		{line: "10.0.0.1 a#comment", addr: "10.0.0.1", names: []string{"a."}},
		{line: "10.0.0.1 a b c\r", addr: "10.0.0.1", names: []string{"a.", "b.", "c."}},
		{line: "::1 localhost ip6-localhost", addr: "::1", names: []string{"localhost.", "ip6-localhost."}},
		{line: "2001:DB8::10 v6.example", addr: "2001:db8::10", names: []string{"v6.example."}},
		{line: "fe80::1%eth0 link", addr: "fe80::1", names: []string{"link."}},
		{line: "::ffff:10.0.0.1 mapped", addr: "10.0.0.1", names: []string{"mapped."}},
		{line: "10.0.0.1 _srv-ok.x", addr: "10.0.0.1", names: []string{"_srv-ok.x."}},
		{line: "10.0.0.1 " + strings.Repeat("a", 63) + ".b", addr: "10.0.0.1", names: []string{strings.Repeat("a", 63) + ".b."}},
		{line: "10.0.0.80 *.Apps.Example.Internal", addr: "10.0.0.80", names: []string{"*.apps.example.internal."}},
		{line: "10.0.0.80 *.x. *", addr: "10.0.0.80", names: []string{"*.x.", "*."}},
		{line: "10.0.0.80 a.*.b", bad: true},
		{line: "10.0.0.80 *a.b", bad: true},
		{line: "10.0.0.80 a*.b", bad: true},
		{line: "10.0.0.80 **.b", bad: true},
		{line: "10.0.0.80 *.*.b", bad: true},
		{line: "10.0.0.80 a.*", bad: true},
		{line: "10.0.0.1", bad: true},
		{line: "10.0.0.1 # no names", bad: true},
		{line: "10.0.0.256 a", bad: true},
		{line: "10.0.0 a", bad: true},
		{line: "010.0.0.1 a", bad: true},
		{line: "10.0.0.1.1 a", bad: true},
		{line: "host 10.0.0.1", bad: true},
		{line: "fe80::1% a", bad: true},
		{line: "2001:db8::zz a", bad: true},
		{line: "10.0.0.1 a..b", bad: true},
		{line: "10.0.0.1 .a", bad: true},
		{line: "10.0.0.1 .", bad: true},
		{line: "10.0.0.1 a/b", bad: true},
		{line: "10.0.0.1 good b@d", bad: true, addr: "10.0.0.1", names: []string{"good."}},
		{line: "10.0.0.1 a..b Good c/d other.x # c", bad: true, addr: "10.0.0.1", names: []string{"good.", "other.x."}},
		{line: "10.0.0.1 a..b c/d", bad: true},
		{line: "10.0.0.1 " + strings.Repeat("a", 64), bad: true},
		{line: "10.0.0.1 " + strings.Repeat("abcdefg.", 32) + "x", bad: true}, // 257 characters
	}
	for _, tt := range tests {
		addr, names, err := ParseLine([]byte(tt.line))
		if tt.bad {
			if err == nil || !errors.Is(err, ErrBadLine) {
				t.Errorf("%q: err = %v, want ErrBadLine", tt.line, err)
			}
			// A bad name's good neighbours are kept; a bad line gives nothing.
			want := netip.Addr{}
			if tt.addr != "" {
				want = netip.MustParseAddr(tt.addr)
			}
			if addr != want || !slices.Equal(names, tt.names) {
				t.Errorf("%q: got %v %q, want %v %q", tt.line, addr, names, want, tt.names)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tt.line, err)
			continue
		}
		if tt.addr == "" {
			if addr.IsValid() || names != nil {
				t.Errorf("%q: got %v %q, want nothing", tt.line, addr, names)
			}
			continue
		}
		if addr != netip.MustParseAddr(tt.addr) || !slices.Equal(names, tt.names) {
			t.Errorf("%q: got %v %q, want %s %q", tt.line, addr, names, tt.addr, tt.names)
		}
	}
}

func TestLoadFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "hosts")
	writeFile(t, path, `# test hosts
127.0.0.1   localhost
::1         localhost ip6-localhost
10.0.0.1    web.example.internal  WWW.Example.Internal.   # two names
10.0.0.2    web.example.internal
999.0.0.1   broken.example.internal
10.0.0.3    bad!name.example.internal
2001:db8::1 web.example.internal
10.0.0.4`+"\r\n"+`10.0.0.5 crlf.example.internal`+"\r\n"+`10.0.0.6 kept.example.internal b@d.example.internal also.example.internal
`)
	logger, logs := testLogger(t)
	b, err := OpenBackend([]string{path}, 30*time.Second, Options{Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	s := NewSource(b, nil, 30*time.Second, true, nil)

	expect(t, s, "localhost.", "A 127.0.0.1", "AAAA ::1")
	expect(t, s, "ip6-localhost.", "AAAA ::1")
	expect(t, s, "web.example.internal.", "A 10.0.0.1", "A 10.0.0.2", "AAAA 2001:db8::1")
	expect(t, s, "www.example.internal.", "A 10.0.0.1")
	expect(t, s, "crlf.example.internal.", "A 10.0.0.5")
	expect(t, s, "broken.example.internal.", "NOTMINE")
	expect(t, s, "bad!name.example.internal.", "NOTMINE")
	expect(t, s, "nope.example.internal.", "NOTMINE")
	// A bad name is left out; the other names of its line are served.
	expect(t, s, "kept.example.internal.", "A 10.0.0.6")
	expect(t, s, "also.example.internal.", "A 10.0.0.6")
	expect(t, s, "6.0.0.10.in-addr.arpa.", "PTR kept.example.internal.", "PTR also.example.internal.")
	if !regexp.MustCompile(`msg="hosts: skipping bad name" .*at=` + regexp.QuoteMeta(path) + `:11 .*field=b@d\.example\.internal`).MatchString(logs.String()) {
		t.Errorf("the bad name of line 11 is not logged as one:\n%s", logs)
	}

	res := s.Lookup(context.Background(), &pipeline.Question{Name: "www.example.internal."})
	if h := res.RRs[0].Header(); h.Ttl != 30 || h.Class != dns.ClassINET || h.Rrtype != dns.TypeA {
		t.Errorf("header = %+v, want TTL 30, class IN, type A", h)
	}
	if s.Kind() != "hosts" || s.TTL() != 30 {
		t.Errorf("Kind, TTL = %q, %d", s.Kind(), s.TTL())
	}
	for _, want := range []string{path + ":6", path + ":7", path + ":9"} {
		if !strings.Contains(logs.String(), "at="+want+" ") {
			t.Errorf("log does not mention %s:\n%s", want, logs)
		}
	}
	if strings.Contains(logs.String(), path+":8 ") {
		t.Errorf("good line 8 logged as bad:\n%s", logs)
	}
}

func TestOpenUnreadableFile(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing")
	_, err := OpenBackend([]string{missing}, time.Hour, Options{})
	if err == nil || !strings.Contains(err.Error(), missing) || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("err = %v, want not-exist error naming %s", err, missing)
	}
}

func TestMergeFiles(t *testing.T) {
	dir := t.TempDir()
	other := t.TempDir()
	f1 := filepath.Join(dir, "one")
	f2 := filepath.Join(other, "two")
	writeFile(t, f1, "10.0.0.1 a.example b.example\n10.0.0.1 a.example\n")
	writeFile(t, f2, "10.0.0.1 a.example\n10.0.0.2 a.example\n10.0.0.3 c.example\n")
	b := openBackend(t, f1, f2, f1)
	s := NewSource(b, nil, time.Hour, true, nil)
	expect(t, s, "a.example.", "A 10.0.0.1", "A 10.0.0.2")
	expect(t, s, "b.example.", "A 10.0.0.1")
	expect(t, s, "c.example.", "A 10.0.0.3")
	expect(t, s, "1.0.0.10.in-addr.arpa.", "PTR a.example.", "PTR b.example.")
	if got := b.Records(); got != 4+4 {
		t.Errorf("Records = %d, want 8 (4 A + 4 PTR, duplicates removed)", got)
	}

	// Both files are watched: an edit in the second directory is served.
	writeFile(t, f2, "10.0.0.9 c.example\n")
	eventually(t, s, "c.example.", "A 10.0.0.9")
	expect(t, s, "a.example.", "A 10.0.0.1")
}

func TestManyRecordsAtOneName(t *testing.T) {
	var sb strings.Builder
	var want []string
	for round := range 2 { // every line twice: the second round is all duplicates
		for i := range 50 {
			fmt.Fprintf(&sb, "10.0.1.%d big.example\n", i)
			fmt.Fprintf(&sb, "10.0.9.9 n%d.example\n", i)
			if round == 0 {
				want = append(want, fmt.Sprintf("A 10.0.1.%d", i))
			}
		}
	}
	path := filepath.Join(t.TempDir(), "hosts")
	writeFile(t, path, sb.String())
	s := NewSource(openBackend(t, path), nil, time.Hour, true, nil)
	expect(t, s, "big.example.", want...)
	if got := len(records(s, "9.9.0.10.in-addr.arpa.")); got != 50 {
		t.Errorf("PTR records of 10.9.9.9 = %d, want 50", got)
	}
}

func TestReverse(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hosts")
	writeFile(t, path, "10.1.2.3 web.example.internal www.example.internal\n2001:db8::1 v6.example.internal\n")
	b := openBackend(t, path)

	on := NewSource(b, nil, time.Hour, true, nil)
	expect(t, on, "3.2.1.10.in-addr.arpa.", "PTR web.example.internal.", "PTR www.example.internal.")
	v6 := "1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.8.b.d.0.1.0.0.2.ip6.arpa."
	expect(t, on, v6, "PTR v6.example.internal.")
	expect(t, on, "2.1.10.in-addr.arpa.")      // ENT
	expect(t, on, "10.in-addr.arpa.")          // ENT
	expect(t, on, "8.b.d.0.1.0.0.2.ip6.arpa.") // ENT
	expect(t, on, "4.2.1.10.in-addr.arpa.", "NOTMINE")

	off := NewSource(b, nil, time.Hour, false, nil)
	expect(t, off, "3.2.1.10.in-addr.arpa.", "NOTMINE")
	expect(t, off, v6, "NOTMINE")
	expect(t, off, "10.in-addr.arpa.", "NOTMINE")
	expect(t, off, "web.example.internal.", "A 10.1.2.3")
}

func TestEmptyNonTerminals(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hosts")
	writeFile(t, path, "10.0.0.1 a.b.c.example.internal\n10.0.0.2 c.example.internal\n")
	s := NewSource(openBackend(t, path), nil, time.Hour, true, nil)
	expect(t, s, "a.b.c.example.internal.", "A 10.0.0.1")
	expect(t, s, "b.c.example.internal.")
	expect(t, s, "c.example.internal.", "A 10.0.0.2") // a name with records below it keeps them
	expect(t, s, "example.internal.")
	expect(t, s, "x.b.c.example.internal.", "NOTMINE")
	expect(t, s, "b.example.internal.", "NOTMINE")
}

func entry(addr string, names ...string) Entry {
	return Entry{Line: addr + " " + strings.Join(names, " "), Addr: netip.MustParseAddr(addr), Names: names}
}

func TestInlineEntries(t *testing.T) {
	entries := []Entry{
		entry("10.0.0.10", "db.example.internal.", "x.y.example.internal."),
		entry("2001:db8::10", "db.example.internal."),
		entry("10.0.0.10", "db.example.internal."),
	}
	only := NewSource(nil, entries, 10*time.Minute, true, nil)
	expect(t, only, "db.example.internal.", "A 10.0.0.10", "AAAA 2001:db8::10")
	expect(t, only, "y.example.internal.")
	expect(t, only, "10.0.0.10.in-addr.arpa.", "PTR db.example.internal.", "PTR x.y.example.internal.")
	expect(t, only, "web.example.internal.", "NOTMINE")
	if serial := only.Serial(); only.TTL() != 600 || serial == 0 || only.Serial() != serial {
		t.Errorf("TTL, Serial = %d, %d (then %d)", only.TTL(), serial, only.Serial())
	}
	res := only.Lookup(context.Background(), &pipeline.Question{Name: "db.example.internal."})
	if res.RRs[0].Header().Ttl != 600 {
		t.Errorf("inline TTL = %d, want 600", res.RRs[0].Header().Ttl)
	}

	path := filepath.Join(t.TempDir(), "hosts")
	writeFile(t, path, "10.0.0.11 db.example.internal\n10.0.0.12 web.example.internal\n10.0.0.10 files.example.internal\n")
	b := openBackend(t, path)
	both := NewSource(b, entries, time.Hour, true, nil)
	expect(t, both, "db.example.internal.", "A 10.0.0.10", "AAAA 2001:db8::10", "A 10.0.0.11")
	expect(t, both, "web.example.internal.", "A 10.0.0.12")
	expect(t, both, "10.0.0.10.in-addr.arpa.", "PTR db.example.internal.", "PTR x.y.example.internal.", "PTR files.example.internal.")
	if both.Serial() < b.Serial() {
		t.Errorf("Serial = %d, below the backend's %d", both.Serial(), b.Serial())
	}
	// The shared slices are not modified by a concatenation.
	expect(t, both, "db.example.internal.", "A 10.0.0.10", "AAAA 2001:db8::10", "A 10.0.0.11")
	expect(t, NewSource(b, nil, time.Hour, true, nil), "db.example.internal.", "A 10.0.0.11")
}

// TestSerialNewSource: a reload makes a new Source (new inline entries,
// kept backend); its serial is larger than the old Source's, even within
// one second, and a change of the files after it raises it again (the
// SOA serial increases whenever the data changes).
func TestSerialNewSource(t *testing.T) {
	var clock pipeline.SerialClock // one per process, as the registry has
	e1 := []Entry{entry("10.0.0.1", "inline.example.internal.")}
	e2 := []Entry{entry("10.0.0.2", "inline.example.internal.")}
	a, b := NewSource(nil, e1, time.Hour, true, &clock), NewSource(nil, e2, time.Hour, true, &clock)
	if b.Serial() <= a.Serial() {
		t.Errorf("inline only: new Source serial %d, old %d", b.Serial(), a.Serial())
	}
	path := filepath.Join(t.TempDir(), "hosts")
	writeFile(t, path, "10.0.0.11 db.example.internal\n")
	be, err := OpenBackend([]string{path}, time.Hour, Options{Serials: &clock})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = be.Close() })
	s1 := NewSource(be, e1, time.Hour, true, &clock)
	s2 := NewSource(be, e2, time.Hour, true, &clock)
	if s2.Serial() <= s1.Serial() {
		t.Errorf("with a kept backend: new Source serial %d, old %d", s2.Serial(), s1.Serial())
	}
	prev := s2.Serial()
	writeFile(t, path, "10.0.0.12 db.example.internal\n")
	deadline := time.Now().Add(5 * time.Second)
	for s2.Serial() <= prev && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if s2.Serial() <= prev {
		t.Errorf("serial %d after a file change, was %d", s2.Serial(), prev)
	}
}

// TestRecordsBuiltInTheBackground: a new index answers at once, its
// records built ahead in the background; records built for older data
// never replace newer data's, and Close waits for the builders.
func TestRecordsBuiltInTheBackground(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hosts")
	writeFile(t, path, "10.0.0.1 web.example.internal\n")
	b := openBackend(t, path) // closed below too: Close is idempotent
	s := NewSource(b, nil, time.Hour, true, nil)
	expect(t, s, "web.example.internal.", "A 10.0.0.1") // built ahead or not yet: the same answer
	b.WaitBuilt()
	if s.data.Load().pre == nil {
		t.Fatal("records not built ahead after WaitBuilt")
	}
	v := b.defaultView()
	old := v.cur.Load()
	for range 50 { // older data, then newer, each built in the background
		b.mu.Lock()
		b.store(v, old.ix, old.serial+1)
		b.store(v, old.ix, old.serial+2)
		b.mu.Unlock()
		b.WaitBuilt()
		if got := v.cur.Load(); got.serial != old.serial+2 || got.pre == nil {
			t.Fatalf("after two stores: serial %d (want %d), built %v", got.serial, old.serial+2, got.pre != nil)
		}
	}
	// Data replaced faster than its records are built: the builders of
	// replaced data give up instead of piling up.
	var sb strings.Builder
	for i := range 60000 {
		fmt.Fprintf(&sb, "10.%d.%d.%d h%d.example.internal\n", i>>16, i>>8&255, i&255, i)
	}
	big := buildIndex(parseData("big", []byte(sb.String()), slog.New(slog.DiscardHandler)), nil)
	builds := b.built.Load()
	b.mu.Lock()
	for i := range 20 {
		b.store(v, big, old.serial+10+uint32(i))
	}
	b.mu.Unlock()
	b.prebuilds.Wait() // every builder: given up or done
	if n := b.built.Load() - builds; n < 1 || n > 3 {
		t.Errorf("20 indexes stored in a row: %d built ahead, want the last one (and at most a couple more)", n)
	}
	if got := v.cur.Load(); got.serial != old.serial+29 || got.pre == nil {
		t.Errorf("after 20 stores: serial %d (want %d), built %v", got.serial, old.serial+29, got.pre != nil)
	}
	b.mu.Lock()
	b.store(v, old.ix, old.serial+30)
	b.mu.Unlock()
	if err := b.Close(); err != nil { // waits for the builder
		t.Fatal(err)
	}
	select {
	case <-v.cur.Load().built:
	default:
		t.Fatal("Close returned before the records' builder")
	}
}

func TestLookupHitDoesNotAllocate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hosts")
	writeFile(t, path, "10.0.0.1 web.example.internal\n2001:db8::1 web6.example.internal\n")
	b := openBackend(t, path)
	s := NewSource(b, []Entry{entry("10.0.0.2", "inline.example.internal.")}, time.Hour, true, nil)
	b.WaitBuilt() // records are built ahead in the background
	ctx := context.Background()
	for _, name := range []string{"web.example.internal.", "web6.example.internal.", "inline.example.internal.", "example.internal.", "miss.example.internal.", "1.0.0.10.in-addr.arpa."} {
		q := &pipeline.Question{Name: name, Type: dns.TypeA}
		allocs := testing.AllocsPerRun(1000, func() {
			if s.Lookup(ctx, q).Status == pipeline.Failed {
				t.Fatal("failed")
			}
		})
		if allocs != 0 {
			t.Errorf("Lookup(%s) allocates %.1f times, want 0", name, allocs)
		}
	}
}

// A file saved with a UTF-8 byte order mark (and CRLF line ends) loads
// its first line.
func TestByteOrderMark(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hosts")
	writeFile(t, path, "\uFEFF10.0.0.1 bom.example.internal\r\n10.0.0.2 two.example.internal\r\n")
	s := NewSource(openBackend(t, path), nil, time.Hour, true, nil)
	expect(t, s, "bom.example.internal.", "A 10.0.0.1")
	expect(t, s, "two.example.internal.", "A 10.0.0.2")
}

// TestList: a transfer lists the inline entries and the files' names in
// the zone, PTR records only in reverse zones and only with reverse on.
func TestList(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "hosts")
	writeFile(t, path, "10.0.0.1 a.example.internal\n10.0.0.2 b.other.internal\n")
	entries := []Entry{{Addr: netip.MustParseAddr("10.0.0.3"), Names: []string{"c.example.internal."}}}
	list := func(s *Source, zone string) []string {
		var out []string
		if err := s.List(zone, func(rr dns.RR) bool {
			out = append(out, strings.Join(strings.Fields(rr.String()), " "))
			return true
		}); err != nil {
			t.Fatal(err)
		}
		slices.Sort(out)
		return out
	}
	s := NewSource(openBackend(t, path), entries, time.Hour, true, nil)
	if got, want := list(s, "example.internal."), []string{"a.example.internal. 3600 IN A 10.0.0.1", "c.example.internal. 3600 IN A 10.0.0.3"}; !slices.Equal(got, want) {
		t.Errorf("forward zone: %q, want %q", got, want)
	}
	if got, want := list(s, "10.in-addr.arpa."), []string{
		"1.0.0.10.in-addr.arpa. 3600 IN PTR a.example.internal.",
		"2.0.0.10.in-addr.arpa. 3600 IN PTR b.other.internal.",
		"3.0.0.10.in-addr.arpa. 3600 IN PTR c.example.internal.",
	}; !slices.Equal(got, want) {
		t.Errorf("reverse zone: %q, want %q", got, want)
	}
	// In a zone key with a forward zone the names are that zone's:
	// b.other.internal is outside it, so it gets no PTR.
	within := NewSource(openBackend(t, path), entries, time.Hour, true, nil).Within([]string{"example.internal.", "10.in-addr.arpa."})
	if got, want := list(within, "10.in-addr.arpa."), []string{
		"1.0.0.10.in-addr.arpa. 3600 IN PTR a.example.internal.",
		"3.0.0.10.in-addr.arpa. 3600 IN PTR c.example.internal.",
	}; !slices.Equal(got, want) {
		t.Errorf("reverse zone of a key with a forward zone: %q, want %q", got, want)
	}
	expect(t, within, "2.0.0.10.in-addr.arpa.", "NOTMINE")
	// A key of reverse zones only lists every address in them, whatever
	// zone the names are in.
	revOnly := NewSource(openBackend(t, path), entries, time.Hour, true, nil).Within([]string{"10.in-addr.arpa."})
	if got, want := list(revOnly, "10.in-addr.arpa."), []string{
		"1.0.0.10.in-addr.arpa. 3600 IN PTR a.example.internal.",
		"2.0.0.10.in-addr.arpa. 3600 IN PTR b.other.internal.",
		"3.0.0.10.in-addr.arpa. 3600 IN PTR c.example.internal.",
	}; !slices.Equal(got, want) {
		t.Errorf("a reverse-only key: %q, want %q", got, want)
	}
	expect(t, revOnly, "2.0.0.10.in-addr.arpa.", "PTR b.other.internal.")
	// A forward zone that holds reverse names (arpa.) gives no PTR to a
	// name outside the key.
	arpa := NewSource(openBackend(t, path), entries, time.Hour, true, nil).Within([]string{"arpa.", "example.internal."})
	if got, want := list(arpa, "arpa."), []string{
		"1.0.0.10.in-addr.arpa. 3600 IN PTR a.example.internal.",
		"3.0.0.10.in-addr.arpa. 3600 IN PTR c.example.internal.",
	}; !slices.Equal(got, want) {
		t.Errorf("forward zone arpa., names outside the key ignored: %q, want %q", got, want)
	}
	expect(t, arpa, "2.0.0.10.in-addr.arpa.", "NOTMINE")
	noRev := NewSource(openBackend(t, path), nil, time.Hour, false, nil)
	if got := list(noRev, "10.in-addr.arpa."); len(got) != 0 {
		t.Errorf("reverse off: %q listed", got)
	}
}

// A name whose first label is "*" is stored under its literal name with
// its parent as an empty non-terminal, gets no PTR, and makes the source
// report wildcards, from files and from inline entries; the pipeline
// answers names below it.
func TestWildcards(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "hosts")
	writeFile(t, path, "10.0.0.80 *.apps.example.internal\n10.0.0.81 db.example.internal\n")
	b := openBackend(t, path)
	s := NewSource(b, nil, time.Hour, true, nil)
	if !s.Wildcards() {
		t.Error("Wildcards() = false with *.apps.example.internal in the file")
	}
	expect(t, s, "*.apps.example.internal.", "A 10.0.0.80")
	expect(t, s, "apps.example.internal.")
	expect(t, s, "x.apps.example.internal.", "NOTMINE") // the pipeline matches, never the source
	expect(t, s, "80.0.0.10.in-addr.arpa.", "NOTMINE")
	expect(t, s, "81.0.0.10.in-addr.arpa.", "PTR db.example.internal.")

	plain := NewSource(nil, []Entry{entry("10.0.0.1", "www.example.internal.")}, time.Hour, true, nil)
	if plain.Wildcards() {
		t.Error("Wildcards() = true without a wildcard")
	}
	inline := NewSource(nil, []Entry{entry("fd00::80", "*.web.example.internal.")}, time.Hour, true, nil)
	if !inline.Wildcards() {
		t.Error("Wildcards() = false with an inline wildcard")
	}
	expect(t, inline, "*.web.example.internal.", "AAAA fd00::80")
	rev6, err := dns.ReverseAddr("fd00::80")
	if err != nil {
		t.Fatal(err)
	}
	expect(t, inline, rev6, "NOTMINE")
	expect(t, NewSource(nil, []Entry{entry("fd00::80", "web.example.internal.")}, time.Hour, true, nil),
		rev6, "PTR web.example.internal.") // the same name without "*" has one

	// The file loses its wildcard: the source stops reporting one.
	writeFile(t, path, "10.0.0.81 db.example.internal\n")
	eventually(t, s, "*.apps.example.internal.", "NOTMINE")
	if s.Wildcards() {
		t.Error("Wildcards() = true after the wildcard was removed from the file")
	}

	// Through a pipeline: the wildcard answers names below it.
	var p *pipeline.Pipeline
	writeFile(t, path, "10.0.0.80 *.apps.example.internal\n10.0.0.81 db.example.internal\n")
	eventually(t, s, "*.apps.example.internal.", "A 10.0.0.80")
	p, err = pipeline.New([]pipeline.ZoneSpec{{Names: []string{"example.internal."}, Sources: []pipeline.SourceEntry{{Source: s}}}}, pipeline.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]int{
		"x.apps.example.internal.":   dns.RcodeSuccess,
		"a.b.apps.example.internal.": dns.RcodeSuccess,
		"x.db.example.internal.":     dns.RcodeNameError,
	} {
		m := new(dns.Msg)
		m.SetQuestion(name, dns.TypeA)
		resp := p.Resolve(context.Background(), &pipeline.Request{Msg: m, Name: name, Type: dns.TypeA})
		if resp.Msg.Rcode != want || (want == dns.RcodeSuccess) != (len(resp.Msg.Answer) == 1) {
			t.Errorf("%s: rcode %s answer %v", name, dns.RcodeToString[resp.Msg.Rcode], resp.Msg.Answer)
		}
	}
}

// filesKey: the same files in any order share a key; other sets do not,
// commas in names included; the key is printable (it names the backend
// in metrics).
func TestFilesKey(t *testing.T) {
	if filesKey([]string{"b", "a"}) != filesKey([]string{"a", "b"}) {
		t.Error("order matters")
	}
	keys := map[string][]string{}
	for _, set := range [][]string{{"a", "b"}, {"a,b"}, {"a\x00b"}, {`a"`, "b"}, {"a", `"b`}, {"a"}} {
		k := filesKey(set)
		if prev, ok := keys[k]; ok {
			t.Errorf("%q and %q have the same key %q", prev, set, k)
		}
		keys[k] = set
		if strings.ContainsFunc(k, func(r rune) bool { return !strconv.IsPrint(r) }) {
			t.Errorf("key %q of %q is not printable", k, set)
		}
	}
}
