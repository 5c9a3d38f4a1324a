package pacingtest

import (
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

// Sleeps is a pacing's sleep that counts its calls.
type Sleeps struct{ n atomic.Int64 }

// Sleep counts one sleep and sleeps d.
func (s *Sleeps) Sleep(d time.Duration) {
	s.n.Add(1)
	time.Sleep(d)
}

// Expect checks the sleeps since the last call (and starts counting
// anew): work that gives way (paced) must have slept at least once when
// the process has one processor and never with more; other work never.
func (s *Sleeps) Expect(t testing.TB, what string, paced bool) {
	t.Helper()
	procs := runtime.GOMAXPROCS(0)
	switch n := s.n.Swap(0); {
	case paced && procs == 1 && n == 0:
		t.Errorf("%s on one processor never gave way", what)
	case (!paced || procs > 1) && n != 0:
		t.Errorf("%s with %d processors slept %d times", what, procs, n)
	}
}
