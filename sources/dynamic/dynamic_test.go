package dynamic

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/dnsd/dnsd/config"
	"github.com/dnsd/dnsd/internal/dnstest"
	"github.com/dnsd/dnsd/pipeline"
)

var testZones = []string{"corp.internal.", "10.in-addr.arpa."}

func mustRR(t testing.TB, s string) dns.RR {
	t.Helper()
	rr, err := dns.NewRR(s)
	if err != nil {
		t.Fatal(err)
	}
	return rr
}

func openStore(t testing.TB, path string, opts Options) *Backend {
	t.Helper()
	b, err := Open(path, testZones, opts)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func newSource(b *Backend, maxRecords int) *Source {
	return NewSource(b, &Config{MaxRecords: maxRecords, TTL: time.Minute})
}

func commit(t testing.TB, s *Source, zone string, sets map[string][]dns.RR) error {
	t.Helper()
	tx, err := s.BeginUpdate(context.Background(), zone)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Abort()
	return tx.Commit(context.Background(), sets)
}

func lookup(s *Source, name string) pipeline.Result {
	return s.Lookup(context.Background(), &pipeline.Question{Name: name, Type: dns.TypeA, Zone: "corp.internal."})
}

func TestCommitThenLookup(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state", "dynamic", StoreName(testZones))
	b := openStore(t, path, Options{})
	defer b.Close()
	s := newSource(b, DefaultMaxRecords)
	if r := lookup(s, "a.b.corp.internal."); r.Status != pipeline.NotMine {
		t.Fatalf("empty store: %+v", r)
	}
	was := s.Serial()
	a := mustRR(t, "a.b.corp.internal. 300 IN A 10.0.0.1")
	ptr := mustRR(t, "1.0.0.10.in-addr.arpa. 300 IN PTR a.b.corp.internal.")
	if err := commit(t, s, "corp.internal.", map[string][]dns.RR{"a.b.corp.internal.": {a}, "1.0.0.10.in-addr.arpa.": {ptr}}); err != nil {
		t.Fatal(err)
	}
	if !pipeline.SerialLess(was, s.Serial()) {
		t.Errorf("serial %d after a commit, was %d", s.Serial(), was)
	}
	r := lookup(s, "a.b.corp.internal.")
	if r.Status != pipeline.Found || len(r.RRs) != 1 || r.RRs[0].String() != a.String() {
		t.Fatalf("after commit: %+v", r)
	}
	for _, ent := range []string{"b.corp.internal.", "corp.internal.", "0.0.10.in-addr.arpa.", "10.in-addr.arpa."} {
		if r := lookup(s, ent); r.Status != pipeline.Found || len(r.RRs) != 0 {
			t.Errorf("%s: want an empty non-terminal, got %+v", ent, r)
		}
	}
	if r := lookup(s, "in-addr.arpa."); r.Status != pipeline.NotMine {
		t.Errorf("above the zone: %+v", r)
	}
	if s.Records() != 2 {
		t.Errorf("records %d, want 2", s.Records())
	}
	// The transaction reads what is served; an empty set removes the name
	// and the empty non-terminals it made.
	tx, err := s.BeginUpdate(context.Background(), "corp.internal.")
	if err != nil {
		t.Fatal(err)
	}
	if got := tx.Records("a.b.corp.internal."); len(got) != 1 {
		t.Fatalf("txn records: %v", got)
	}
	if err := tx.Commit(context.Background(), map[string][]dns.RR{"a.b.corp.internal.": nil}); err != nil {
		t.Fatal(err)
	}
	for _, gone := range []string{"a.b.corp.internal.", "b.corp.internal.", "corp.internal."} {
		if r := lookup(s, gone); r.Status != pipeline.NotMine {
			t.Errorf("%s after delete: %+v", gone, r)
		}
	}
	if r := lookup(s, "10.in-addr.arpa."); r.Status != pipeline.Found {
		t.Errorf("reverse apex still has a name below: %+v", r)
	}
	if err := tx.Commit(context.Background(), nil); err == nil {
		t.Error("second Commit of one update succeeded")
	}
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode().Perm()&^0o640 != 0 {
		t.Errorf("store mode %v, want at most 0640", info.Mode().Perm())
	}
	dir, err := os.Stat(filepath.Dir(path))
	if err != nil {
		t.Fatal(err)
	}
	if dir.Mode().Perm()&^0o750 != 0 {
		t.Errorf("store dir mode %v, want at most 0750", dir.Mode().Perm())
	}
}

func TestCommitAllOrNothing(t *testing.T) {
	path := filepath.Join(t.TempDir(), StoreName(testZones))
	b := openStore(t, path, Options{})
	s := newSource(b, DefaultMaxRecords)
	keep := mustRR(t, "keep.corp.internal. 60 IN TXT \"v1\"")
	if err := commit(t, s, "corp.internal.", map[string][]dns.RR{"keep.corp.internal.": {keep}}); err != nil {
		t.Fatal(err)
	}
	serial := s.Serial()
	good := mustRR(t, "new.corp.internal. 60 IN A 10.0.0.2")
	// A name outside the store's zones fails the whole update.
	err := commit(t, s, "corp.internal.", map[string][]dns.RR{
		"new.corp.internal.": {good},
		"x.example.org.":     {mustRR(t, "x.example.org. 60 IN A 10.0.0.3")},
	})
	if err == nil {
		t.Fatal("update with a name outside the zones committed")
	}
	// The store fails inside its transaction, after the writes.
	b.failCommit = func() error { return errors.New("disk on fire") }
	err = commit(t, s, "corp.internal.", map[string][]dns.RR{
		"new.corp.internal.":  {good},
		"keep.corp.internal.": nil,
	})
	if err == nil || !strings.Contains(err.Error(), "disk on fire") {
		t.Fatalf("failing commit: %v", err)
	}
	b.failCommit = nil
	check := func(s *Source, what string) {
		t.Helper()
		if r := lookup(s, "new.corp.internal."); r.Status != pipeline.NotMine {
			t.Errorf("%s: a failed update's name is served: %+v", what, r)
		}
		if r := lookup(s, "keep.corp.internal."); r.Status != pipeline.Found || len(r.RRs) != 1 {
			t.Errorf("%s: a failed update's delete applied: %+v", what, r)
		}
	}
	check(s, "served")
	if s.Serial() != serial {
		t.Errorf("serial moved on a failed commit: %d, was %d", s.Serial(), serial)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b = openStore(t, path, Options{})
	defer b.Close()
	check(newSource(b, DefaultMaxRecords), "reopened")
}

func TestReopenLoadsStore(t *testing.T) {
	path := filepath.Join(t.TempDir(), StoreName(testZones))
	b := openStore(t, path, Options{})
	s := newSource(b, DefaultMaxRecords)
	sets := map[string][]dns.RR{
		"h1.corp.internal.":              {mustRR(t, "h1.corp.internal. 300 IN A 10.0.0.1"), mustRR(t, "h1.corp.internal. 300 IN AAAA fd00::1")},
		"*.apps.corp.internal.":          {mustRR(t, "*.apps.corp.internal. 60 IN CNAME ingress.corp.internal.")},
		"_acme-challenge.corp.internal.": {mustRR(t, "_acme-challenge.corp.internal. 60 IN TXT \"token\"")},
	}
	if err := commit(t, s, "corp.internal.", sets); err != nil {
		t.Fatal(err)
	}
	serial := s.Serial()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b = openStore(t, path, Options{})
	defer b.Close()
	s = newSource(b, DefaultMaxRecords)
	if s.Records() != 4 {
		t.Errorf("reopened store holds %d records, want 4", s.Records())
	}
	if !pipeline.SerialLess(serial, s.Serial()) {
		t.Errorf("serial after reopen %d, not above %d", s.Serial(), serial)
	}
	if !s.Wildcards() {
		t.Error("reopened store lost its wildcard")
	}
	var listed []string
	if err := s.List("corp.internal.", func(rr dns.RR) bool { listed = append(listed, rr.String()); return true }); err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, rrs := range sets {
		for _, rr := range rrs {
			want = append(want, rr.String())
		}
	}
	if len(listed) != len(want) {
		t.Fatalf("listed %q, want %q", listed, want)
	}
	for _, w := range want {
		if !strings.Contains(strings.Join(listed, "\n"), w) {
			t.Errorf("List lacks %s", w)
		}
	}
}

func TestNoChangeKeepsSerial(t *testing.T) {
	b := openStore(t, filepath.Join(t.TempDir(), "s.db"), Options{})
	defer b.Close()
	s := newSource(b, DefaultMaxRecords)
	a := mustRR(t, "a.corp.internal. 300 IN A 10.0.0.1")
	if err := commit(t, s, "corp.internal.", map[string][]dns.RR{"a.corp.internal.": {a}}); err != nil {
		t.Fatal(err)
	}
	serial := s.Serial()
	if err := commit(t, s, "corp.internal.", map[string][]dns.RR{"a.corp.internal.": {dns.Copy(a)}, "gone.corp.internal.": nil}); err != nil {
		t.Fatal(err)
	}
	if s.Serial() != serial {
		t.Errorf("an update that changed nothing raised the serial: %d → %d", serial, s.Serial())
	}
	// Another TTL is a change.
	a2 := dns.Copy(a)
	a2.Header().Ttl = 60
	if err := commit(t, s, "corp.internal.", map[string][]dns.RR{"a.corp.internal.": {a2}}); err != nil {
		t.Fatal(err)
	}
	if s.Serial() == serial {
		t.Error("a TTL change kept the serial")
	}
}

func TestTooManyRecords(t *testing.T) {
	b := openStore(t, filepath.Join(t.TempDir(), "s.db"), Options{})
	defer b.Close()
	s := newSource(b, 3)
	sets := map[string][]dns.RR{
		"a.corp.internal.": {mustRR(t, "a.corp.internal. 60 IN A 10.0.0.1"), mustRR(t, "a.corp.internal. 60 IN A 10.0.0.2")},
		"b.corp.internal.": {mustRR(t, "b.corp.internal. 60 IN A 10.0.0.3")},
	}
	if err := commit(t, s, "corp.internal.", sets); err != nil {
		t.Fatal(err)
	}
	err := commit(t, s, "corp.internal.", map[string][]dns.RR{"c.corp.internal.": {mustRR(t, "c.corp.internal. 60 IN A 10.0.0.4")}})
	if !errors.Is(err, pipeline.ErrTooManyRecords) {
		t.Fatalf("fourth record: %v", err)
	}
	if r := lookup(s, "c.corp.internal."); r.Status != pipeline.NotMine {
		t.Errorf("refused record served: %+v", r)
	}
	// A replacement within the bound passes; so do deletions of a store
	// over its bound (max_records lowered).
	if err := commit(t, s, "corp.internal.", map[string][]dns.RR{"b.corp.internal.": {mustRR(t, "b.corp.internal. 60 IN A 10.0.0.9")}}); err != nil {
		t.Errorf("replacement at the bound: %v", err)
	}
	if err := commit(t, newSource(b, 1), "corp.internal.", map[string][]dns.RR{"b.corp.internal.": nil}); err != nil {
		t.Errorf("deletion over the bound: %v", err)
	}
}

func TestSecondOpenTimesOut(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.db")
	b := openStore(t, path, Options{})
	defer b.Close()
	start := time.Now()
	_, err := Open(path, testZones, Options{OpenTimeout: 200 * time.Millisecond})
	if err == nil {
		t.Fatal("second open of a held store succeeded")
	}
	if !errors.Is(err, bolterrors.ErrTimeout) || !strings.Contains(err.Error(), "held by another process") || !strings.Contains(err.Error(), path) {
		t.Errorf("error does not say the store is held: %v", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("second open took %s", d)
	}
}

func TestBeginUpdateTakesTurns(t *testing.T) {
	b := openStore(t, filepath.Join(t.TempDir(), "s.db"), Options{})
	defer b.Close()
	s := newSource(b, DefaultMaxRecords)
	tx, err := s.BeginUpdate(context.Background(), "corp.internal.")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := s.BeginUpdate(ctx, "10.in-addr.arpa."); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("second update while one is open: %v", err)
	}
	// Lookups never wait for the open update.
	done := make(chan struct{})
	go func() { lookup(s, "a.corp.internal."); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Lookup waited for an open update")
	}
	tx.Abort()
	tx.Abort() // idempotent
	tx2, err := s.BeginUpdate(context.Background(), "10.in-addr.arpa.")
	if err != nil {
		t.Fatalf("update after Abort: %v", err)
	}
	tx2.Abort()
	if _, err := s.BeginUpdate(context.Background(), "example.org."); err == nil {
		t.Error("BeginUpdate of a zone the store does not hold succeeded")
	}
}

func TestConcurrentReadersDuringCommits(t *testing.T) {
	b := openStore(t, filepath.Join(t.TempDir(), "s.db"), Options{})
	defer b.Close()
	s := newSource(b, DefaultMaxRecords)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var seen atomic.Int64
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				r := lookup(s, "n.corp.internal.")
				if r.Status == pipeline.Found {
					if len(r.RRs) != 2 {
						t.Errorf("a reader saw half an update: %v", r.RRs)
						return
					}
					seen.Add(1)
				}
				_ = s.List("corp.internal.", func(dns.RR) bool { return true })
			}
		}()
	}
	for i := range 50 {
		var sets map[string][]dns.RR
		if i%2 == 0 {
			sets = map[string][]dns.RR{"n.corp.internal.": {
				mustRR(t, "n.corp.internal. 60 IN A 10.0.0.1"), mustRR(t, "n.corp.internal. 60 IN TXT \"x\""),
			}}
		} else {
			sets = map[string][]dns.RR{"n.corp.internal.": nil}
		}
		if err := commit(t, s, "corp.internal.", sets); err != nil {
			t.Fatal(err)
		}
	}
	cancel()
	wg.Wait()
}

func TestBadStoredRecordSkipped(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.db")
	b := openStore(t, path, Options{})
	s := newSource(b, DefaultMaxRecords)
	if err := commit(t, s, "corp.internal.", map[string][]dns.RR{"ok.corp.internal.": {mustRR(t, "ok.corp.internal. 60 IN A 10.0.0.1")}}); err != nil {
		t.Fatal(err)
	}
	b.Close()
	db, err := bolt.Open(path, 0o640, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		n := tx.Bucket(bucketNames)
		if err := n.Put([]byte("bad.corp.internal."), []byte{0, 5, 1, 2, 3, 4, 5}); err != nil {
			return err
		}
		return n.Put([]byte("x.example.org."), nil)
	})
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	b = openStore(t, path, Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	defer b.Close()
	s = newSource(b, DefaultMaxRecords)
	if r := lookup(s, "ok.corp.internal."); r.Status != pipeline.Found {
		t.Errorf("good record lost beside a bad one: %+v", r)
	}
	if r := lookup(s, "bad.corp.internal."); r.Status != pipeline.NotMine {
		t.Errorf("bad record served: %+v", r)
	}
	if n := strings.Count(logs.String(), "skipped"); n != 1 {
		t.Errorf("skipped records logged %d times, want once:\n%s", n, logs.String())
	}
	if !strings.Contains(logs.String(), "records=2") {
		t.Errorf("log does not count both skipped records:\n%s", logs.String())
	}
}

func TestStoreName(t *testing.T) {
	cases := map[string][]string{
		"10.in-addr.arpa,corp.internal.db": {"corp.internal.", "10.in-addr.arpa."},
		"@.db":                             {"."},
		"a%2fb.example.db":                 {`a/b.example.`},
		"a%2cb.example.db":                 {`a,b.example.`},
	}
	for want, zones := range cases {
		if got := StoreName(zones); got != want {
			t.Errorf("StoreName(%q) = %q, want %q", zones, got, want)
		}
	}
	if StoreName([]string{"a.", "b."}) != StoreName([]string{"b.", "a."}) {
		t.Error("the order of a key's zones changes its store")
	}
	if StoreName([]string{"a,b."}) == StoreName([]string{"a.", "b."}) {
		t.Error("two sets of zones share a store")
	}
	long := []string{strings.Repeat("a", 63) + "." + strings.Repeat("b", 63) + ".", strings.Repeat("c", 63) + "." + strings.Repeat("d", 63) + "."}
	if n := len(StoreName(long)); n > 255 {
		t.Errorf("long store name has %d bytes", n)
	}
}

func TestOrphans(t *testing.T) {
	dir := t.TempDir()
	cfg := &config.Config{StateDir: dir, Zones: []config.Zone{
		{Key: "corp.internal", Names: []string{"corp.internal."}, Sources: []config.Source{{Kind: "dynamic"}}},
		{Key: "other.internal", Names: []string{"other.internal."}, Sources: []config.Source{{Kind: "file"}}},
	}}
	if got, err := Orphans(cfg); err != nil || len(got) != 0 {
		t.Fatalf("no store dir: %v, %v", got, err)
	}
	for _, zs := range [][]string{{"corp.internal."}, {"other.internal."}, {"gone.internal."}} {
		b := openStore(t, StorePath(dir, zs), Options{})
		b.Close()
	}
	got, err := Orphans(cfg)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{StorePath(dir, []string{"gone.internal."}), StorePath(dir, []string{"other.internal."})}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("orphans %q, want %q", got, want)
	}
}

func TestLookupAllocations(t *testing.T) {
	b := openStore(t, filepath.Join(t.TempDir(), "s.db"), Options{})
	defer b.Close()
	s := newSource(b, DefaultMaxRecords)
	if err := commit(t, s, "corp.internal.", map[string][]dns.RR{"a.corp.internal.": {mustRR(t, "a.corp.internal. 60 IN A 10.0.0.1")}}); err != nil {
		t.Fatal(err)
	}
	q := &pipeline.Question{Name: "a.corp.internal.", Type: dns.TypeA, Zone: "corp.internal."}
	ctx := context.Background()
	if n := testing.AllocsPerRun(100, func() { s.Lookup(ctx, q) }); n != 0 {
		t.Errorf("Lookup allocates %v times", n)
	}
}

// Commits tell the process of a burst of background work (kind.Bulk): one
// burst however many commits follow each other, ended burstIdle after the
// last, or at Close.
func TestCommitsAreABurst(t *testing.T) {
	var mu sync.Mutex
	begun, ended := 0, 0
	bulk := func() func() {
		mu.Lock()
		begun++
		mu.Unlock()
		return func() { mu.Lock(); ended++; mu.Unlock() }
	}
	counts := func() (int, int) { mu.Lock(); defer mu.Unlock(); return begun, ended }
	b := openStore(t, filepath.Join(t.TempDir(), "s.db"), Options{Bulk: bulk})
	s := newSource(b, 100)
	for i := range 5 {
		name := fmt.Sprintf("h%d.corp.internal.", i)
		if err := commit(t, s, "corp.internal.", map[string][]dns.RR{name: {mustRR(t, name+" 60 IN A 10.0.0.1")}}); err != nil {
			t.Fatal(err)
		}
	}
	if b, e := counts(); b != 1 || e != 0 {
		t.Fatalf("after 5 commits: %d bursts begun, %d ended; want 1, 0", b, e)
	}
	dnstest.Eventually(t, "the burst to end after its last commit", burstIdle+3*time.Second, func() bool { _, e := counts(); return e == 1 })
	if err := commit(t, s, "corp.internal.", map[string][]dns.RR{"x.corp.internal.": {mustRR(t, "x.corp.internal. 60 IN A 10.0.0.2")}}); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if b, e := counts(); b != 2 || e != 2 {
		t.Errorf("a commit then Close: %d bursts begun, %d ended; want 2, 2", b, e)
	}
}
