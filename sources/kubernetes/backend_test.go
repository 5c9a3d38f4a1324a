package kubernetes

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dnsd/dnsd/internal/dnstest"
	"github.com/dnsd/dnsd/internal/logtest"
)

type lockedBuffer = logtest.Buffer

// An unreachable API server: opening does not block, the source stays
// unsynced (SERVFAIL), and the outage is logged once, not per retry.
func TestUnreachableAPIServer(t *testing.T) {
	var logs lockedBuffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kc, []byte(strings.ReplaceAll(twoContexts, "10.0.0.1:6443", "127.0.0.1:1")), 0o600); err != nil {
		t.Fatal(err)
	}
	rc, err := RESTConfig(ClientConfig{Kubeconfig: kc, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	api, err := NewAPI(rc)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	b := NewBackend(api, BackendOptions{Logger: logger})
	defer b.Close()
	src, err := NewSource(b, Options{Zones: []string{zones}})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	if d := time.Since(start); d > time.Second {
		t.Fatalf("opening took %s", d)
	}
	dnstest.EventuallyNil(t, 10*time.Second, func() error {
		if !strings.Contains(logs.String(), "kubernetes API server unreachable") {
			return errors.New("the outage is not logged:\n" + logs.String())
		}
		return nil
	})
	time.Sleep(2 * time.Second) // retries: still one line
	if src.Synced() {
		t.Fatal("synced without an API server")
	}
	if n := strings.Count(logs.String(), "unreachable"); n != 1 {
		t.Errorf("%d outage lines, want 1:\n%s", n, logs.String())
	}
}

// Close does not wait for an informer longer than closeWait: client-go's
// reflector sleeps out its retry backoff (up to 30 s while the API server
// is down) without looking at its context, and SIGTERM must stop the
// daemon within 10 s. Here an informer that never ends stands for it.
func TestCloseBoundedWait(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	b := &Backend{logger: slog.New(slog.DiscardHandler), cancel: cancel}
	b.running.Go(func() { <-ctx.Done(); time.Sleep(time.Hour) })
	start := time.Now()
	b.Close()
	if took := time.Since(start); took < closeWait || took > closeWait+2*time.Second {
		t.Errorf("Close took %v, want about %v", took, closeWait)
	}
}
