package fsutil

import "time"

// A file that could not be read (too many open files, permission
// denied, gone for a moment mid-rename) is read again after RetryFirst,
// then after twice as long each time, up to RetryMax, until it is read:
// no filesystem event may say when the cause went away.
const (
	RetryFirst = 100 * time.Millisecond
	RetryMax   = 5 * time.Second
)

// Retry is a watcher's timer for reading again the files it could not
// read. C is nil while nothing is to be read again, so a select on it
// waits for the watcher's other cases alone. It belongs to one
// goroutine; Stop it when done.
type Retry struct {
	C     <-chan time.Time
	timer *time.Timer
	delay time.Duration // the last wait, 0 after a success
}

// NewRetry returns a Retry with nothing to read again.
func NewRetry() *Retry {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return &Retry{timer: t}
}

// Failed arms the timer for the next read, RetryFirst after the first
// failure and twice the last wait after each further one (at most
// RetryMax), unless it is armed already, and returns the wait.
func (r *Retry) Failed() time.Duration {
	if r.C != nil {
		return r.delay
	}
	r.delay = min(max(2*r.delay, RetryFirst), RetryMax)
	r.timer.Reset(r.delay)
	r.C = r.timer.C
	return r.delay
}

// Fired is called when C fired: the files are being read again.
func (r *Retry) Fired() { r.C = nil }

// Succeeded disarms the timer: every file was read. The next failure
// waits RetryFirst again.
func (r *Retry) Succeeded() {
	r.timer.Stop()
	r.C, r.delay = nil, 0
}

// Stop stops the timer.
func (r *Retry) Stop() { r.timer.Stop() }
