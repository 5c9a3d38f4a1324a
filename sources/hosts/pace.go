package hosts

import (
	"runtime"
	"time"
)

// A reload gives way to the server when it runs on one processor.
//
// With GOMAXPROCS 1 (a server pinned to one core, a one-CPU VM) a reload's
// read, parse and index build hold the only processor for tens of
// milliseconds (100,000 lines: ~30 ms), and the queries that arrive
// meanwhile wait: the network poller runs only when nothing else is
// runnable, or when the runtime's monitor polls (every 10 ms).
// runtime.Gosched does not help: it runs what else is runnable, then the
// reload again, and never the poller. A sleep long enough to outlast the
// scheduler's next look for work does: the processor goes idle and the
// poller hands it the queries that came. With nothing to serve the sleep
// lasts up to a millisecond (the timer's resolution), so an idle reload
// takes up to twice as long; with two or more processors the queries have
// one of their own and nothing paces. The start is never paced: nothing is
// served yet. A backend opened by a reload of the configuration loads
// paced (Options.Paced): the old configuration is serving meanwhile.
const (
	paceEvery = time.Millisecond       // work between two sleeps
	paceSleep = 100 * time.Microsecond // long enough for the processor to go idle
)

// pacing is how a reload gives way: sleep is time.Sleep but in tests. A
// nil *pacing never paces.
type pacing struct {
	sleep func(time.Duration)
}

// pacer paces one goroutine's loop; the zero pacer never sleeps.
type pacer struct {
	sleep func(time.Duration) // nil: not pacing
	n     uint32
	last  time.Time
}

// newPacer paces with pg when the process has one processor.
func newPacer(pg *pacing) pacer {
	if pg == nil || runtime.GOMAXPROCS(0) != 1 {
		return pacer{}
	}
	return pacer{sleep: pg.sleep}
}

// pace is called once per small unit of work (a line, a pair); every 256
// units it checks the time (see check).
func (p *pacer) pace() {
	if p.sleep == nil {
		return
	}
	if p.n++; p.n%256 == 0 {
		p.check()
	}
}

// check sleeps when paceEvery has passed since the last sleep; it is
// called directly between larger units of work (a chunk read).
func (p *pacer) check() {
	if p.sleep == nil {
		return
	}
	now := time.Now()
	if p.last.IsZero() {
		p.last = now
		return
	}
	if now.Sub(p.last) >= paceEvery {
		p.sleep(paceSleep)
		p.last = time.Now()
	}
}
