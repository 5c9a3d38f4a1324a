package daemon

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

// TestStartedBeforeReady: Options.Started (main tightens the garbage
// collector there) is called once start-up is over, before READY=1.
func TestStartedBeforeReady(t *testing.T) {
	msgs := listenNotify(t)
	cfgPath := filepath.Join(t.TempDir(), "dnsd.yaml")
	cfg := fmt.Sprintf("listen: [%q]\nzones:\n  example.internal:\n    - hosts: {entries: [\"10.0.0.1 a\"]}\n", freeAddr(t))
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	var started atomic.Int32
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Options{ConfigPath: cfgPath, LogOutput: io.Discard, Started: func() { started.Add(1) }}, make(chan os.Signal))
	}()
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
	if n := started.Load(); n != 1 {
		t.Errorf("Started called %d times by READY=1, want once", n)
	}
}
