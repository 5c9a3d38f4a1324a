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

	"github.com/miekg/dns"
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

// TestLoadedOnceServing: Options.Loaded (main drops its start-up ballast
// there) is called once, when the in-memory sources answer already.
func TestLoadedOnceServing(t *testing.T) {
	addr := freeAddr(t)
	cfgPath := filepath.Join(t.TempDir(), "dnsd.yaml")
	cfg := fmt.Sprintf("listen: [%q]\nzones:\n  example.internal:\n    - hosts: {entries: [\"10.0.0.1 a\"]}\n", addr)
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	var loaded atomic.Int32
	var answer string
	onLoaded := func() {
		if loaded.Add(1) > 1 {
			return
		}
		q := new(dns.Msg).SetQuestion("a.example.internal.", dns.TypeA)
		c := &dns.Client{Timeout: 2 * time.Second}
		r, _, err := c.Exchange(q, addr)
		switch {
		case err != nil:
			answer = err.Error()
		case len(r.Answer) != 1:
			answer = r.String()
		default:
			answer = r.Answer[0].(*dns.A).A.String()
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	started := make(chan struct{})
	go func() {
		done <- Run(ctx, Options{ConfigPath: cfgPath, LogOutput: io.Discard, Loaded: onLoaded, Started: func() { close(started) }}, make(chan os.Signal))
	}()
	defer func() {
		cancel()
		<-done
	}()
	select {
	case <-started:
	case err := <-done:
		t.Fatalf("Run: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("never started")
	}
	if n := loaded.Load(); n != 1 {
		t.Fatalf("Loaded called %d times, want once", n)
	}
	if answer != "10.0.0.1" {
		t.Errorf("a query asked from Loaded got %q, want 10.0.0.1", answer)
	}
}
