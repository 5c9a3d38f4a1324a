// Package turns lets a long piece of background work — a reload's read,
// parse and index build — take turns with the server when the process
// runs on one processor.
//
// With GOMAXPROCS 1 (a server pinned to one core, a one-CPU VM) such work
// holds the only processor for tens of milliseconds (a 100,000-line hosts
// file: ~30 ms), and the queries that arrive meanwhile wait: the network
// poller runs only when nothing else is runnable, or when the runtime's
// monitor polls (every 10 ms). runtime.Gosched does not help: it runs what
// else is runnable, then the work again, and never the poller. A sleep
// long enough to outlast the scheduler's next look for work does: the
// processor goes idle and the poller hands it the queries that came. With
// nothing to serve the sleep lasts up to a millisecond (the timer's
// resolution), so idle work takes up to twice as long; with two or more
// processors the queries have one of their own and nothing paces. A start
// is never paced: nothing is served yet.
package turns

import (
	"runtime"
	"time"
)

const (
	// Every is the work between two sleeps.
	Every = time.Millisecond
	// Pause is a sleep: long enough for the processor to go idle.
	Pause = 100 * time.Microsecond
)

// Pacing is how work gives way: Sleep is time.Sleep (nil) but in tests. A
// nil *Pacing never paces.
type Pacing struct {
	Sleep func(time.Duration)
}

// Pacer paces one goroutine's loop; the zero Pacer never sleeps.
type Pacer struct {
	sleep func(time.Duration) // nil: not pacing
	n     uint32
	last  time.Time
}

// New paces with pg when the process has one processor.
func New(pg *Pacing) Pacer {
	if pg == nil || runtime.GOMAXPROCS(0) != 1 {
		return Pacer{}
	}
	if pg.Sleep == nil {
		return Pacer{sleep: time.Sleep}
	}
	return Pacer{sleep: pg.Sleep}
}

// Step is called once per small unit of work (a line, a record); every
// 256 units it checks the time (see Check).
func (p *Pacer) Step() {
	if p.sleep == nil {
		return
	}
	if p.n++; p.n%256 == 0 {
		p.Check()
	}
}

// Check sleeps when Every has passed since the last sleep; it is called
// directly between larger units of work (a chunk read).
func (p *Pacer) Check() {
	if p.sleep == nil {
		return
	}
	now := time.Now()
	if p.last.IsZero() {
		p.last = now
		return
	}
	if now.Sub(p.last) >= Every {
		p.sleep(Pause)
		p.last = time.Now()
	}
}
