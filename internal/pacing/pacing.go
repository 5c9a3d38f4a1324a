package pacing

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
	Sleep func(time.Duration) // nil (the default): time.Sleep
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
