package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dnsd/dnsd/internal/gctune"
)

// The built binary ends start-up at gctune.Steady (the Go collector's
// go_gc_gogc_percent metric), and leaves a GOGC from the environment be.
func TestGCTargetOfBinary(t *testing.T) {
	for _, tc := range []struct {
		env  []string
		want int
	}{{nil, gctune.Steady}, {[]string{"GOGC=70"}, 70}} {
		dir := t.TempDir()
		hport := freePort(t)
		writeFile(t, filepath.Join(dir, "dnsd.yaml"), fmt.Sprintf(`listen: ["127.0.0.1:%d"]
http: "127.0.0.1:%d"
zones:
  example.internal:
    - hosts: {entries: ["10.0.0.1 a"]}
`, freePort(t), hport))
		p := startBinary(t, dnsdBin, tc.env, dir, "-config", "dnsd.yaml")
		p.waitLog("dnsd started", 1)
		want := fmt.Sprintf("\ngo_gc_gogc_percent %d\n", tc.want)
		deadline := time.Now().Add(10 * time.Second)
		for {
			_, body := httpGet(t, fmt.Sprintf("http://127.0.0.1:%d/metrics", hport))
			if strings.Contains(body, want) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("env %v: no %q in the metrics: %s", tc.env, strings.TrimSpace(want), grep(body, "go_gc_gogc_percent"))
			}
			time.Sleep(50 * time.Millisecond)
		}
		p.stop(os.Interrupt)
	}
}

// A reload is a burst: while the built binary reloads (here it waits for
// a new etcd source that cannot sync, up to its sync_timeout) the
// collector's target is gctune.Bulk; afterwards gctune.Steady again.
func TestGCTargetDuringReload(t *testing.T) {
	dir := t.TempDir()
	hport := freePort(t)
	conf := fmt.Sprintf(`listen: ["127.0.0.1:%d"]
http: "127.0.0.1:%d"
zones:
  example.internal:
    - hosts: {entries: ["10.0.0.1 a"]}
`, freePort(t), hport)
	writeFile(t, filepath.Join(dir, "dnsd.yaml"), conf)
	p := startBinary(t, dnsdBin, nil, dir, "-config", "dnsd.yaml")
	p.waitLog("dnsd started", 1)
	metricsURL := fmt.Sprintf("http://127.0.0.1:%d/metrics", hport)
	waitTarget := func(want int, within time.Duration) {
		t.Helper()
		line := fmt.Sprintf("\ngo_gc_gogc_percent %d\n", want)
		deadline := time.Now().Add(within)
		for {
			_, body := httpGet(t, metricsURL)
			if strings.Contains(body, line) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("no %q within %s: %s", strings.TrimSpace(line), within, grep(body, "go_gc_gogc_percent"))
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitTarget(gctune.Steady, 10*time.Second)

	writeFile(t, filepath.Join(dir, "dnsd.yaml"), conf+fmt.Sprintf(`  etcd.internal:
    - etcd: {endpoints: ["http://127.0.0.1:%d"], sync_timeout: 4s}
`, freePort(t)))
	p.signal(syscall.SIGHUP)
	waitTarget(gctune.Bulk, 3*time.Second)
	p.waitLog("reloaded", 1)
	waitTarget(gctune.Steady, 2*time.Second)
	p.stop(os.Interrupt)
}
