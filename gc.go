package main

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"time"
)

// The garbage collector's targets when GOGC is not set in the
// environment. dnsd's heap is mostly long-lived source data (the indexes
// of hosts files, a kubernetes cluster, etcd records) and answering a
// query allocates next to nothing, so Go's default of 100 (the heap may
// grow to twice the live data before a collection) spent memory, up to
// the size of the data again, for little CPU: during a first sync (its
// peak) and under sustained load.
//
//   - firstGC, until the first collection: that comes when the heap
//     reaches 16 MB (Go's first target is 4 MB times GOGC/100) instead of
//     4 MB, so the in-memory sources (a 10,000-record zone file allocates
//     2.4 MB while it loads, with ~2 MB of the packages' own before it)
//     load without one. On one core a collection is the loader's lost
//     time.
//   - startGC, Go's default, from the first collection until every source
//     has synced: the first sync is a race against the clock (the first
//     answer), and its garbage is short-lived.
//   - steadyGC, steadyAfter once every source has synced: the heap stays
//     within a fifth above the live data. Not at once: the collection that
//     a lower target starts would run beside the first queries.
//   - bulkPercent instead of steadyGC while a burst of background work is
//     under way (kind.Bulk: a SIGHUP reload; a hosts file indexed again and
//     its records built; a zone file parsed again; an etcd prefix read):
//     at the steady target new data starts a collection every few
//     megabytes, and every allocation meanwhile, the queries' too, has to
//     help it; on one core that holds up queries. The burst gets bulkRoom
//     above the live heap (at most bulkGC, at least steadyGC): a small heap
//     may double, a large one (a million etcd keys) grows no more than that
//     room. When the burst ends the steady target comes back.
const (
	firstGC     = 400
	startGC     = 100
	steadyGC    = 20
	bulkGC      = 100
	bulkRoom    = 64 << 20
	steadyAfter = time.Second
)

// bulkPercent is the target that leaves bulkRoom above live bytes of heap,
// within [steadyGC, bulkGC].
func bulkPercent(live uint64) int {
	if live == 0 {
		return bulkGC
	}
	return int(min(max(bulkRoom*100/live, steadyGC), bulkGC))
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

// gcPhases moves the collector's target through start-up (see firstGC).
type gcPhases struct {
	set   func(percent int) // debug.SetGCPercent but in tests
	live  func() uint64     // liveHeap but in tests
	after time.Duration     // steadyAfter but in tests

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

// startGCPhases sets firstGC and returns the phases.
func startGCPhases() *gcPhases {
	g := &gcPhases{set: func(p int) { debug.SetGCPercent(p) }, live: liveHeap, after: steadyAfter}
	g.start()
	return g
}

func (g *gcPhases) start() {
	g.set(firstGC)
	runtime.AddCleanup(new(gcSentinel), func(struct{}) { g.collected() }, struct{}{})
}

// collected: the first collection has run.
func (g *gcPhases) collected() { g.advance(1) }

// advance moves to phase unless a later phase has come already: the first
// collection may come after the sync.
func (g *gcPhases) advance(phase int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.phase < phase {
		g.phase = phase
		g.set(g.percent())
	}
}

// percent is the target of the phase (and bursts) g is in. Caller holds mu.
func (g *gcPhases) percent() int {
	switch {
	case g.phase == 0:
		return firstGC
	case g.phase == 1:
		return startGC
	case g.bulk > 0:
		return g.bulkPerc
	}
	return steadyGC
}

// begin is the process's kind.Bulk: a burst of background work begins;
// end (once) ends it. Once start-up is over the target is bulkPercent of
// the live heap when the first of the bursts under way began.
func (g *gcPhases) begin() (end func()) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.bulk++
	if g.bulk == 1 {
		g.bulkPerc = bulkGC
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

// synced: start-up is over (daemon.Options.Started); steadyGC follows
// after g.after.
func (g *gcPhases) synced() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.timer != nil {
		return
	}
	g.timer = time.AfterFunc(g.after, func() { g.advance(2) })
}

// stop cancels a pending switch to steadyGC.
func (g *gcPhases) stop() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.timer != nil {
		g.timer.Stop()
	}
}
