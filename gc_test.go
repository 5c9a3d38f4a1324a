package main

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// percents records the targets a gcPhases sets.
type percents struct {
	mu  sync.Mutex
	got []int
}

func (p *percents) set(v int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.got = append(p.got, v)
}

func (p *percents) list() []int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.got)
}

// waitFor collects until the recorded targets are want (or fails).
func (p *percents) waitFor(t *testing.T, want ...int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !slices.Equal(p.list(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("targets %v, want %v", p.list(), want)
		}
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
}

// The collector's target goes firstGC → startGC at the first collection
// → steadyGC a while after every source synced.
func TestGCPhases(t *testing.T) {
	var p percents
	const after = 100 * time.Millisecond
	g := &gcPhases{set: p.set, after: after}
	g.start()
	if got := p.list(); !slices.Equal(got, []int{firstGC}) {
		t.Fatalf("at start: targets %v, want [%d]", got, firstGC)
	}
	p.waitFor(t, firstGC, startGC)
	began := time.Now()
	g.synced()
	if got := p.list(); !slices.Equal(got, []int{firstGC, startGC}) && time.Since(began) < after {
		t.Errorf("steadyGC set at once: %v", got)
	}
	p.waitFor(t, firstGC, startGC, steadyGC)
	g.synced() // a second call changes nothing
	time.Sleep(30 * time.Millisecond)
	if got := p.list(); !slices.Equal(got, []int{firstGC, startGC, steadyGC}) {
		t.Errorf("targets %v after a second synced", got)
	}
}

// Synced before any collection (a small configuration): steadyGC stays,
// the first collection's cleanup does not bring startGC back.
func TestGCPhasesSyncedFirst(t *testing.T) {
	var p percents
	g := &gcPhases{set: p.set, after: 0}
	g.start()
	g.synced()
	deadline := time.Now().Add(5 * time.Second)
	for !slices.Contains(p.list(), steadyGC) {
		if time.Now().After(deadline) {
			t.Fatalf("targets %v, no steadyGC", p.list())
		}
		time.Sleep(time.Millisecond)
	}
	for range 3 {
		runtime.GC()
		time.Sleep(5 * time.Millisecond)
	}
	if got := p.list(); got[len(got)-1] != steadyGC {
		t.Errorf("targets %v: the last is not steadyGC", got)
	}
}

// stop cancels the pending switch to steadyGC.
func TestGCPhasesStop(t *testing.T) {
	var p percents
	const after = 200 * time.Millisecond
	g := &gcPhases{set: p.set, after: after}
	g.start()
	began := time.Now()
	g.synced()
	g.stop()
	if time.Since(began) >= after {
		t.Skip("the test was descheduled longer than the delay: the timer may have fired before stop")
	}
	time.Sleep(2 * after)
	if slices.Contains(p.list(), steadyGC) {
		t.Errorf("targets %v: steadyGC set after stop", p.list())
	}
}

// The built binary ends start-up at steadyGC (the Go collector's
// go_gc_gogc_percent metric), and leaves a GOGC from the environment be.
func TestGCTargetOfBinary(t *testing.T) {
	for _, tc := range []struct {
		env  []string
		want int
	}{{nil, steadyGC}, {[]string{"GOGC=70"}, 70}} {
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

// Bursts of background work (kind.Bulk) raise the steady target to
// bulkGC while any is under way; before steady they change nothing.
func TestGCPhasesBulk(t *testing.T) {
	var p percents
	g := &gcPhases{set: p.set, after: 0}
	g.start()
	early := g.begin() // start-up: no bulkGC
	p.waitFor(t, firstGC, startGC)
	g.synced() // steady comes while the burst is under way: bulkGC
	p.waitFor(t, firstGC, startGC, bulkGC)
	early()
	p.waitFor(t, firstGC, startGC, bulkGC, steadyGC)

	a, b := g.begin(), g.begin()
	a()
	a() // a second call of one end counts once
	if got := p.list(); !slices.Equal(got, []int{firstGC, startGC, bulkGC, steadyGC, bulkGC}) {
		t.Fatalf("two overlapping bursts, one ended: targets %v", got)
	}
	b()
	if got := p.list(); !slices.Equal(got, []int{firstGC, startGC, bulkGC, steadyGC, bulkGC, steadyGC}) {
		t.Fatalf("both bursts ended: targets %v", got)
	}
}

// A reload is a burst: while the built binary reloads (here it waits for
// a new etcd source that cannot sync, up to its sync_timeout) the
// collector's target is bulkGC; afterwards steadyGC again.
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
	waitTarget(steadyGC, 10*time.Second)

	writeFile(t, filepath.Join(dir, "dnsd.yaml"), conf+fmt.Sprintf(`  etcd.internal:
    - etcd: {endpoints: ["http://127.0.0.1:%d"], sync_timeout: 4s}
`, freePort(t)))
	p.signal(syscall.SIGHUP)
	waitTarget(bulkGC, 3*time.Second)
	p.waitLog("reloaded", 1)
	waitTarget(steadyGC, 2*time.Second)
	p.stop(os.Interrupt)
}

// A burst leaves bulkRoom above the live heap: a small heap may double,
// a large one grows by that room at most.
func TestBulkPercent(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		live uint64
		want int
	}{{0, bulkGC}, {16 * mib, bulkGC}, {64 * mib, bulkGC}, {128 * mib, 50}, {256 * mib, 25}, {1024 * mib, steadyGC}} {
		if got := bulkPercent(c.live); got != c.want {
			t.Errorf("bulkPercent(%d MiB) = %d, want %d", c.live/mib, got, c.want)
		}
	}
	// gcPhases sets it from the live heap when the first burst begins.
	var p percents
	g := &gcPhases{set: p.set, live: func() uint64 { return 256 * mib }, after: 0}
	g.start()
	p.waitFor(t, firstGC, startGC)
	g.synced()
	p.waitFor(t, firstGC, startGC, steadyGC)
	end := g.begin()
	end()
	if got := p.list(); !slices.Equal(got, []int{firstGC, startGC, steadyGC, 25, steadyGC}) {
		t.Errorf("a burst over 256 MiB of live heap: targets %v", got)
	}
	if live := liveHeap(); live == 0 {
		t.Error("liveHeap read 0 bytes in a running test binary")
	}
}
