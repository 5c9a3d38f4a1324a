package sources

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/dnsd/dnsd/pipeline"
)

// A file source's start line and its dnsd_source_synced name say what an
// operator needs: the file's path and zones, and (in the start line) the
// records it loaded. The inline records' count and hash, which tell
// backends apart, are in neither; two sources that differ only in their
// inline records are still two backends.
func TestFileBackendNamedByPathAndZones(t *testing.T) {
	dir := t.TempDir()
	zone := "$ORIGIN corp.test.\n$TTL 300\n@ IN SOA ns1 hostmaster 1 3600 600 86400 300\n@ IN NS ns1\nns1 IN A 10.0.0.1\nwww IN A 10.0.0.2\n"
	if err := os.WriteFile(filepath.Join(dir, "corp.zone"), []byte(zone), 0o644); err != nil {
		t.Fatal(err)
	}
	var logs strings.Builder
	reg := NewRegistry(Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	defer reg.Close()
	cfg := load(t, dir, `zones:
  corp.test:
    - file: {path: corp.zone}
views:
  - name: office
    clients: [10.1.0.0/16]
    zones:
      corp.test:
        - file: {path: corp.zone, records: ["extra IN A 10.0.0.9"]}
`)
	_, set, err := reg.Build(context.Background(), cfg, pipeline.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer set.Release()
	if reg.Len() != 2 {
		t.Fatalf("%d backends, want 2 (other inline records: another backend)", reg.Len())
	}
	path := filepath.Join(dir, "corp.zone")
	name := `file path=` + strconv.Quote(path) + ` zones="corp.test."`
	var started []string
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "backend started") {
			started = append(started, l)
		}
	}
	if len(started) != 2 {
		t.Fatalf("want 2 start lines, got:\n%s", logs.String())
	}
	wantRecords := map[string]bool{"records=5": false, "records=4": false}
	for _, l := range started {
		if !strings.Contains(l, "source="+strconv.Quote(name)) || strings.Contains(l, "inline=") {
			t.Errorf("start line %q: want source=%s", l, strconv.Quote(name))
		}
		for r := range wantRecords {
			if strings.Contains(l, " "+r+" ") {
				wantRecords[r] = true
			}
		}
	}
	for r, seen := range wantRecords {
		if !seen {
			t.Errorf("no start line with %s (what the file and its inline records loaded):\n%s", r, strings.Join(started, "\n"))
		}
	}
	var names []string
	reg.Synced(func(n string, _ bool) { names = append(names, n) })
	if len(names) != 1 || names[0] != name {
		t.Errorf("dnsd_source_synced names %q, want [%q]", names, name)
	}
}

// Name cuts at a secrets= or inline= part (what follows it too) only: a
// quoted path or zone that happens to hold those words stays whole.
func TestName(t *testing.T) {
	for key, want := range map[string]string{
		`file path="a.zone" zones="a."`:                           `file path="a.zone" zones="a."`,
		`file path="a.zone" zones="a." inline=2/cbf29ce484222325`: `file path="a.zone" zones="a."`,
		`file path="x inline=1/ab" zones="a."`:                    `file path="x inline=1/ab" zones="a."`,
		`etcd endpoints=e prefix=/p user= secrets=0123abcd`:       `etcd endpoints=e prefix=/p user=`,
		`secondary zone=a. state_dir="s secrets=ab"`:              `secondary zone=a. state_dir="s secrets=ab"`,
		`hosts files=a.hosts`:                                     `hosts files=a.hosts`,
	} {
		if got := Name(key); got != want {
			t.Errorf("Name(%q) = %q, want %q", key, got, want)
		}
	}
}
