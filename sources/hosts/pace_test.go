package hosts

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dnsd/dnsd/internal/pacing"
	"github.com/dnsd/dnsd/internal/pacing/pacingtest"
)

// On one processor a reload gives way to the server (it sleeps now and
// then, so that the network poller runs: see package pacing); with two processors
// nothing sleeps. (The start never paces: OpenBackend loads without.) The sleeps are counted; what
// they buy (queries answered during a reload of a large file on one core
// within ~1 ms instead of up to ~30) is measured by hand, see
// docs/performance.md.
func TestReloadPacedOnOneProcessor(t *testing.T) {
	lines := numberedHosts(50000)
	for _, procs := range []int{1, 2} {
		t.Run(fmt.Sprint(procs), func(t *testing.T) {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
			path := filepath.Join(t.TempDir(), "hosts")
			writeFile(t, path, lines)
			b := openBackend(t, path)
			var slept pacingtest.Sleeps
			b.mu.Lock() // a reload reads it under mu
			b.pacing = &pacing.Pacing{Sleep: slept.Sleep}
			b.mu.Unlock()
			s := NewSource(b, nil, time.Hour, true, nil)
			expect(t, s, "host49999.example.internal.", "A 10.0.195.79")

			appendLine(t, path, "10.9.9.9 added.example.internal")
			// 50,000 lines on one processor under -race on a busy
			// machine took over 2 s once: this counts sleeps, it times
			// nothing.
			eventuallyWithin(t, 20*time.Second, s, "added.example.internal.", "A 10.9.9.9")
			slept.Expect(t, "a reload of 50,000 lines", true)
		})
	}
}

// A backend opened while queries are answered (Options.Paced: by a
// reload of the configuration) gives way on one processor from its first
// load on; one opened at a start does not.
func TestOpenPacedOnOneProcessor(t *testing.T) {
	lines := numberedHosts(50000)
	path := filepath.Join(t.TempDir(), "hosts")
	writeFile(t, path, lines)
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	for _, paced := range []bool{false, true} {
		var slept pacingtest.Sleeps
		b, err := OpenBackend([]string{path}, time.Hour, Options{Paced: paced, sleep: slept.Sleep})
		if err != nil {
			t.Fatal(err)
		}
		// The load is over: only it has paced yet.
		slept.Expect(t, fmt.Sprintf("an open of 50,000 lines (paced %t)", paced), paced)
		b.Close()
	}
}

// A reload is one burst of background work (kind.Bulk) from its first
// read to the last of its records built ahead, so the process can make
// room for it (dnsd raises the collector's target meanwhile).
func TestReloadIsOneBurst(t *testing.T) {
	lines := numberedHosts(50000)
	path := filepath.Join(t.TempDir(), "hosts")
	writeFile(t, path, lines)
	var (
		mu      sync.Mutex
		b       *Backend
		open    int   // bursts under way
		bursts  int   // times open went from 0 to 1
		builtAt int64 // b.built when open last went to 0
	)
	bulk := func() func() {
		mu.Lock()
		defer mu.Unlock()
		if open++; open == 1 {
			bursts++
		}
		return func() {
			mu.Lock()
			defer mu.Unlock()
			if open--; open == 0 && b != nil {
				builtAt = b.built.Load()
			}
		}
	}
	state := func() (int, int, int64) {
		mu.Lock()
		defer mu.Unlock()
		return open, bursts, builtAt
	}
	bk, err := OpenBackend([]string{path}, time.Hour, Options{Bulk: bulk})
	if err != nil {
		t.Fatal(err)
	}
	defer bk.Close()
	mu.Lock()
	b = bk
	mu.Unlock()
	waitBursts := func(built int64) (int, int64) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for {
			o, n, at := state()
			if o == 0 && b.built.Load() == built {
				return n, at
			}
			if time.Now().After(deadline) {
				t.Fatalf("bursts under way %d, records built %d times, want 0 and %d", o, b.built.Load(), built)
			}
			time.Sleep(time.Millisecond)
		}
	}
	if n, _ := waitBursts(1); n != 1 {
		t.Fatalf("the start's record build: %d bursts, want 1", n)
	}

	// On one processor the reload's read, parse and index sleep now and
	// then (see package pacing): each sleep must fall within a burst.
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	var sleeps, outside atomic.Int64
	b.mu.Lock()
	b.pacing = &pacing.Pacing{Sleep: func(d time.Duration) {
		sleeps.Add(1)
		if o, _, _ := state(); o == 0 {
			outside.Add(1)
		}
		time.Sleep(d)
	}}
	b.mu.Unlock()
	appendLine(t, path, "10.9.9.9 added.example.internal")
	s := NewSource(b, nil, time.Hour, true, nil)
	eventually(t, s, "added.example.internal.", "A 10.9.9.9")
	n, at := waitBursts(2)
	if sleeps.Load() == 0 {
		t.Error("the reload never paced itself on one processor")
	}
	if k := outside.Load(); k > 0 {
		t.Errorf("%d of the reload's %d pacing sleeps came outside a burst", k, sleeps.Load())
	}
	if n != 2 {
		t.Errorf("the start and one reload made %d bursts, want 2 (the reload's read, index and record build in one)", n)
	}
	if at != 2 {
		t.Errorf("the reload's burst ended before its records were built (built %d times then)", at)
	}
}

// numberedHosts is a hosts file of n lines, host0.example.internal at
// 10.0.0.0 on.
func numberedHosts(n int) string {
	var sb strings.Builder
	for i := range n {
		fmt.Fprintf(&sb, "10.%d.%d.%d host%d.example.internal\n", i>>16, i>>8&0xff, i&0xff, i)
	}
	return sb.String()
}

// appendLine appends line to the file at path.
func appendLine(t *testing.T, path, line string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(line + "\n"); err != nil {
		t.Fatal(err)
	}
}
