package gctune

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"time"
)

// The targets (GOGC percents) of the phases; see the package comment.
const (
	First       = 400
	Startup     = 100
	Steady      = 20
	Bulk        = 100
	BulkRoom    = 64 << 20
	SteadyAfter = time.Second
)

// bulkPercent is the target that leaves BulkRoom above live bytes of heap,
// within [Steady, Bulk].
func bulkPercent(live uint64) int {
	if live == 0 {
		return Bulk
	}
	return int(min(max(BulkRoom*100/live, Steady), Bulk))
}

// liveHeap is the heap the last collection found live.
func liveHeap() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}

// Phases moves the collector's target through start-up (see First).
type Phases struct {
	set   func(percent int) // debug.SetGCPercent but in tests
	live  func() uint64     // liveHeap but in tests
	after time.Duration     // SteadyAfter but in tests

	mu       sync.Mutex
	phase    int // 0: before the first collection; 1: start-up; 2: steady
	bulk     int // bursts under way (see begin)
	bulkPerc int // the target of the bursts under way (see bulkPercent)
	timer    *time.Timer
}

// gcSentinel is an object nothing refers to: its cleanup runs after the
// first collection. (A pointer field keeps it out of the tiny allocator,
// whose objects may never be cleaned up.)
type gcSentinel struct {
	_ *byte
	_ [8]byte
}

// Start sets First and returns the phases.
func Start() *Phases {
	g := &Phases{set: func(p int) { debug.SetGCPercent(p) }, live: liveHeap, after: SteadyAfter}
	g.start()
	return g
}

func (g *Phases) start() {
	g.set(First)
	runtime.AddCleanup(new(gcSentinel), func(struct{}) { g.collected() }, struct{}{})
}

// collected: the first collection has run.
func (g *Phases) collected() { g.advance(1) }

// advance moves to phase unless a later phase has come already: the first
// collection may come after the sync.
func (g *Phases) advance(phase int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.phase < phase {
		g.phase = phase
		g.set(g.percent())
	}
}

// percent is the target of the phase (and bursts) g is in. Caller holds mu.
func (g *Phases) percent() int {
	switch {
	case g.phase == 0:
		return First
	case g.phase == 1:
		return Startup
	case g.bulk > 0:
		return g.bulkPerc
	}
	return Steady
}

// Begin is the process's kind.Bulk: a burst of background work begins;
// end (once) ends it. Once start-up is over the target is bulkPercent of
// the live heap when the first of the bursts under way began.
func (g *Phases) Begin() (end func()) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.bulk++
	if g.bulk == 1 {
		g.bulkPerc = Bulk
		if g.live != nil {
			g.bulkPerc = bulkPercent(g.live())
		}
		if g.phase == 2 {
			g.set(g.percent())
		}
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			g.mu.Lock()
			defer g.mu.Unlock()
			g.bulk--
			if g.bulk == 0 && g.phase == 2 {
				g.set(g.percent())
			}
		})
	}
}

// Synced: start-up is over (daemon.Options.Started); Steady follows
// after g.after.
func (g *Phases) Synced() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.timer != nil {
		return
	}
	g.timer = time.AfterFunc(g.after, func() { g.advance(2) })
}

// Stop cancels a pending switch to Steady.
func (g *Phases) Stop() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.timer != nil {
		g.timer.Stop()
	}
}
