package hosts

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// On one processor a reload gives way to the server (it sleeps now and
// then, so that the network poller runs: see pacer); with two processors
// nothing sleeps. (The start never paces: OpenBackend loads without.) The sleeps are counted; what
// they buy (queries answered during a reload of a large file on one core
// within ~1 ms instead of up to ~30) is measured by hand, see
// docs/performance.md.
func TestReloadPacedOnOneProcessor(t *testing.T) {
	var sb strings.Builder
	for i := range 50000 {
		fmt.Fprintf(&sb, "10.%d.%d.%d host%d.example.internal\n", i>>16, i>>8&0xff, i&0xff, i)
	}
	for _, procs := range []int{1, 2} {
		t.Run(fmt.Sprint(procs), func(t *testing.T) {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
			path := filepath.Join(t.TempDir(), "hosts")
			writeFile(t, path, sb.String())
			b := openBackend(t, path)
			var slept atomic.Int64
			b.mu.Lock() // a reload reads it under mu
			b.pacing = &pacing{sleep: func(d time.Duration) {
				slept.Add(1)
				time.Sleep(d)
			}}
			b.mu.Unlock()
			s := NewSource(b, nil, time.Hour, true, nil)
			expect(t, s, "host49999.example.internal.", "A 10.0.195.79")

			f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.WriteString("10.9.9.9 added.example.internal\n"); err != nil {
				t.Fatal(err)
			}
			f.Close()
			eventually(t, s, "added.example.internal.", "A 10.9.9.9")
			switch n := slept.Load(); {
			case procs == 1 && n == 0:
				t.Error("a reload of 50,000 lines on one processor never gave way")
			case procs > 1 && n != 0:
				t.Errorf("a reload with %d processors slept %d times", procs, n)
			}
		})
	}
}
