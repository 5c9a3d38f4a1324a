package sources

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/miekg/dns"

	"github.com/dnsd/dnsd/internal/logtest"
	"github.com/dnsd/dnsd/pipeline"
)

// resolvePTR is the first PTR name of an answer to a PTR query, else the
// rcode.
func resolvePTR(t *testing.T, p *pipeline.Pipeline, name string) string {
	t.Helper()
	m := new(dns.Msg)
	m.SetQuestion(name, dns.TypePTR)
	r := p.Resolve(context.Background(), &pipeline.Request{Msg: m, Name: name, Type: dns.TypePTR})
	for _, rr := range r.Msg.Answer {
		if p, ok := rr.(*dns.PTR); ok {
			return p.Ptr
		}
	}
	return dns.RcodeToString[r.Msg.Rcode]
}

// A CIDR zone key beside a forward key over the same hosts file answers
// PTR for the file's addresses in it, and the forward key its names; no
// warning is given.
func TestHostsReverseZoneKey(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "corp.hosts"), []byte("10.20.1.5 app.corp.internal\n10.20.1.6 db.corp.internal\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := load(t, dir, "zones:\n  corp.internal:\n    - hosts: {files: [corp.hosts]}\n  10.20.0.0/16:\n    - hosts: {files: [corp.hosts]}\n")
	logs := &logtest.Buffer{}
	var warnings []string
	reg := NewRegistry(Options{Logger: slog.New(slog.NewTextHandler(logs, nil)), Warnings: func(l string) { warnings = append(warnings, l) }})
	defer reg.Close()
	p, set, err := reg.Build(context.Background(), cfg, pipeline.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer set.Release()
	if got := resolvePTR(t, p, "5.1.20.10.in-addr.arpa."); got != "app.corp.internal." {
		t.Errorf("PTR 10.20.1.5: %s", got)
	}
	if got := resolveA(t, p, "db.corp.internal."); got != "10.20.1.6" {
		t.Errorf("A db.corp.internal: %s", got)
	}
	if got := resolvePTR(t, p, "9.1.20.10.in-addr.arpa."); got != "NXDOMAIN" {
		t.Errorf("PTR 10.20.1.9: %s", got)
	}
	if len(warnings) > 0 || strings.Contains(logs.String(), "outside") {
		t.Errorf("warnings %q, logs:\n%s", warnings, logs.String())
	}
}

// A hosts source whose entries are all outside its zone key (names in no
// forward zone of it, addresses in no reverse zone of it) is warned of:
// a WARN log and a warning line for `dnsd check`, at the build and at a
// reload that moves the zone key off the same file; a source that serves
// some of them is not.
func TestHostsAllOutsideWarned(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "corp.hosts"), []byte("10.20.1.5 app.corp.internal\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	logs := &logtest.Buffer{}
	var (
		mu       sync.Mutex
		warnings []string
	)
	reg := NewRegistry(Options{Logger: slog.New(slog.NewTextHandler(logs, nil)), Warnings: func(l string) {
		mu.Lock()
		warnings = append(warnings, l)
		mu.Unlock()
	}})
	defer reg.Close()
	build := func(yaml string) {
		t.Helper()
		_, set, err := reg.Build(context.Background(), load(t, dir, yaml), pipeline.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(set.Release)
	}
	build("zones:\n  corp.internal:\n    - hosts: {files: [corp.hosts]}\n")
	if len(warnings) != 0 {
		t.Fatalf("warned of a source that serves its names: %q", warnings)
	}
	build("zones:\n  corp.internal:\n    - hosts: {files: [corp.hosts]}\n  10.30.0.0/16:\n    - hosts: {files: [corp.hosts]}\n")
	mu.Lock()
	got := strings.Join(warnings, "\n")
	mu.Unlock()
	if len(warnings) != 1 || !strings.Contains(got, "all outside") || !strings.Contains(got, "zone=10.30.0.0/16") || !strings.Contains(got, "example=app.corp.internal.") {
		t.Errorf("warnings: %q", warnings)
	}
	if !strings.Contains(logs.String(), "level=WARN msg=\"hosts entries are all outside") {
		t.Errorf("no WARN log:\n%s", logs.String())
	}
	warnings = nil
	build("zones:\n  other.test:\n    - hosts: {entries: [\"10.1.1.1 x.corp.internal\"]}\n")
	if len(warnings) != 1 || !strings.Contains(warnings[0], "zone=other.test") || !strings.Contains(warnings[0], "names=1") {
		t.Errorf("inline entries all outside: %q", warnings)
	}
}
