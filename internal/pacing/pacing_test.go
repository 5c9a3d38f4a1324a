package pacing

import (
	"runtime"
	"testing"
	"time"
)

// On one processor a loop of Steps sleeps once per Every of work; with
// two processors, or without a Pacing, it never sleeps.
func TestPacer(t *testing.T) {
	work := func(procs int, pg *Pacing) {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
		p := New(pg)
		for end := time.Now().Add(20 * Every); time.Now().Before(end); {
			p.Step()
		}
	}
	slept := 0
	pg := &Pacing{Sleep: func(d time.Duration) {
		if d != Pause {
			t.Errorf("slept %v, want %v", d, Pause)
		}
		slept++
	}}
	work(1, pg)
	// 20 × Every of work: about 20 sleeps (fewer when the test was held up).
	if slept < 5 || slept > 21 {
		t.Errorf("one processor, 20 ms of steps: %d sleeps, want about 20", slept)
	}
	slept = 0
	work(2, pg)
	work(1, nil)
	if slept != 0 {
		t.Errorf("two processors: %d sleeps, want none", slept)
	}
}

// A Pacing without a Sleep sleeps with time.Sleep: it paces on one
// processor like any other.
func TestPacingDefaultSleep(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	if p := New(&Pacing{}); p.sleep == nil {
		t.Error("a Pacing without Sleep does not pace on one processor")
	}
}
