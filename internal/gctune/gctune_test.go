package gctune

import (
	"fmt"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/dnsd/dnsd/internal/dnstest"
)

// percents records the targets a Phases sets.
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

// waitFor collects (a collection each poll) until the recorded targets
// are want, or fails.
func (p *percents) waitFor(t *testing.T, want ...int) {
	t.Helper()
	dnstest.EventuallyNil(t, 5*time.Second, func() error {
		runtime.GC()
		if got := p.list(); !slices.Equal(got, want) {
			return fmt.Errorf("targets %v, want %v", got, want)
		}
		return nil
	})
}

// The collector's target goes First → Startup at the first collection
// → Steady a while after every source synced.
func TestGCPhases(t *testing.T) {
	var p percents
	const after = 100 * time.Millisecond
	g := &Phases{set: p.set, after: after}
	g.start()
	if got := p.list(); !slices.Equal(got, []int{First}) {
		t.Fatalf("at start: targets %v, want [%d]", got, First)
	}
	p.waitFor(t, First, Startup)
	began := time.Now()
	g.Synced()
	if got := p.list(); !slices.Equal(got, []int{First, Startup}) && time.Since(began) < after {
		t.Errorf("Steady set at once: %v", got)
	}
	p.waitFor(t, First, Startup, Steady)
	g.Synced() // a second call changes nothing
	time.Sleep(30 * time.Millisecond)
	if got := p.list(); !slices.Equal(got, []int{First, Startup, Steady}) {
		t.Errorf("targets %v after a second synced", got)
	}
}

// Synced before any collection (a small configuration): Steady stays,
// the first collection's cleanup does not bring Startup back.
func TestGCPhasesSyncedFirst(t *testing.T) {
	var p percents
	g := &Phases{set: p.set, after: 0}
	g.start()
	g.Synced()
	deadline := time.Now().Add(5 * time.Second)
	for !slices.Contains(p.list(), Steady) {
		if time.Now().After(deadline) {
			t.Fatalf("targets %v, no Steady", p.list())
		}
		time.Sleep(time.Millisecond)
	}
	for range 3 {
		runtime.GC()
		time.Sleep(5 * time.Millisecond)
	}
	if got := p.list(); got[len(got)-1] != Steady {
		t.Errorf("targets %v: the last is not Steady", got)
	}
}

// stop cancels the pending switch to Steady.
func TestGCPhasesStop(t *testing.T) {
	var p percents
	const after = 200 * time.Millisecond
	g := &Phases{set: p.set, after: after}
	g.start()
	began := time.Now()
	g.Synced()
	g.Stop()
	if time.Since(began) >= after {
		t.Skip("the test was descheduled longer than the delay: the timer may have fired before stop")
	}
	time.Sleep(2 * after)
	if slices.Contains(p.list(), Steady) {
		t.Errorf("targets %v: Steady set after stop", p.list())
	}
}

// Bursts of background work (kind.Bulk) raise the steady target to
// Bulk while any is under way; before steady they change nothing.
func TestGCPhasesBulk(t *testing.T) {
	var p percents
	g := &Phases{set: p.set, after: 0}
	g.start()
	early := g.Begin() // start-up: no Bulk
	p.waitFor(t, First, Startup)
	g.Synced() // steady comes while the burst is under way: Bulk
	p.waitFor(t, First, Startup, Bulk)
	early()
	p.waitFor(t, First, Startup, Bulk, Steady)

	a, b := g.Begin(), g.Begin()
	a()
	a() // a second call of one end counts once
	if got := p.list(); !slices.Equal(got, []int{First, Startup, Bulk, Steady, Bulk}) {
		t.Fatalf("two overlapping bursts, one ended: targets %v", got)
	}
	b()
	if got := p.list(); !slices.Equal(got, []int{First, Startup, Bulk, Steady, Bulk, Steady}) {
		t.Fatalf("both bursts ended: targets %v", got)
	}
}

// A burst leaves BulkRoom above the live heap: a small heap may double,
// a large one grows by that room at most.
func TestBulkPercent(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		live uint64
		want int
	}{{0, Bulk}, {16 * mib, Bulk}, {64 * mib, Bulk}, {128 * mib, 50}, {256 * mib, 25}, {1024 * mib, Steady}} {
		if got := bulkPercent(c.live); got != c.want {
			t.Errorf("bulkPercent(%d MiB) = %d, want %d", c.live/mib, got, c.want)
		}
	}
	// Phases sets it from the live heap when the first burst begins.
	var p percents
	g := &Phases{set: p.set, live: func() uint64 { return 256 * mib }, after: 0}
	g.start()
	p.waitFor(t, First, Startup)
	g.Synced()
	p.waitFor(t, First, Startup, Steady)
	end := g.Begin()
	end()
	if got := p.list(); !slices.Equal(got, []int{First, Startup, Steady, 25, Steady}) {
		t.Errorf("a burst over 256 MiB of live heap: targets %v", got)
	}
	if live := liveHeap(); live == 0 {
		t.Error("liveHeap read 0 bytes in a running test binary")
	}
}
