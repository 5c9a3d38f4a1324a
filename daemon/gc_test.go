package daemon

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"testing"
	"time"
)

// TestGCTightenedWhenServing: once started and synced (READY), the
// garbage collector's target is servingGCPercent — unless GOGC is set.
func TestGCTightenedWhenServing(t *testing.T) {
	for _, tc := range []struct {
		gogc string
		want int
	}{{"", servingGCPercent}, {"100", 100}} {
		t.Run("GOGC="+tc.gogc, func(t *testing.T) {
			msgs := listenNotify(t)
			t.Setenv("GOGC", tc.gogc)
			prev := debug.SetGCPercent(100)
			defer debug.SetGCPercent(prev)
			dir := t.TempDir()
			cfgPath := filepath.Join(dir, "dnsd.yaml")
			cfg := fmt.Sprintf("listen: [%q]\nzones:\n  example.internal:\n    - hosts: {entries: [\"10.0.0.1 a\"]}\n", freeAddr(t))
			if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- Run(ctx, Options{ConfigPath: cfgPath, LogOutput: io.Discard}, make(chan os.Signal)) }()
			defer func() {
				cancel()
				<-done
			}()
			for ready := false; !ready; {
				select {
				case m := <-msgs:
					ready = m.text == "READY=1"
				case <-time.After(10 * time.Second):
					t.Fatal("no READY=1")
				}
			}
			if got := debug.SetGCPercent(100); got != tc.want {
				t.Errorf("GC percent %d when serving, want %d", got, tc.want)
			}
		})
	}
}
