package daemon

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/dnsd/dnsd/internal/serials"
	"github.com/dnsd/dnsd/pipeline"
)

// A start hands the serials of state_dir/serials to the pipeline as
// floors, and a stop saves the ones served.
func TestSerialsKeptAcrossStarts(t *testing.T) {
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "dnsd.yaml")
	cfg := fmt.Sprintf("listen: [%q]\nstate_dir: state\nzones:\n  example.internal:\n    - hosts: {entries: [\"10.0.0.1 a\"]}\n", freeAddr(t))
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	key := pipeline.ZoneKey{Zone: "example.internal."}
	st, err := serials.Open(filepath.Join(dir, "state"))
	if err != nil {
		t.Fatal(err)
	}
	const floor = 2026120310 // above the clock's serials (RFC 1982)
	st.Note(map[pipeline.ZoneKey]uint32{key: floor})
	if err := st.Save(); err != nil {
		t.Fatal(err)
	}
	d, err := Start(context.Background(), Options{ConfigPath: cfgPath, LogOutput: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	if s := d.current().p.ZoneSOA("example.internal.").Serial; s != floor+1 {
		t.Errorf("serial %d at start, want %d (one above the one kept)", s, floor+1)
	}
	if err := d.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	again, err := serials.Open(filepath.Join(dir, "state"))
	if err != nil {
		t.Fatal(err)
	}
	if got := again.Floors()[key]; got != floor+1 {
		t.Errorf("saved %d at stop, want %d", got, floor+1)
	}
}
