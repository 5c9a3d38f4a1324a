package fswatch

import "time"

// A file that could not be read (too many open files, permission
// denied, gone for a moment mid-rename) is read again after RetryFirst,
// then after twice as long each time, up to RetryMax, until it is read:
// no filesystem event may say when the cause went away.
const (
	RetryFirst = 100 * time.Millisecond
	RetryMax   = 5 * time.Second
)

// retry is the watch goroutine's timer for reading again the files that
// could not be read. C is nil while nothing is to be read again, so a
// select on it waits for the other cases alone. It belongs to one
// goroutine; stop it when done.
type retry struct {
	C     <-chan time.Time // nil (the default) while nothing is to be read again
	timer *time.Timer
	delay time.Duration // the last wait, 0 after a success
}

// newRetry returns a retry with nothing to read again.
func newRetry() *retry {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return &retry{timer: t}
}

// failed arms the timer for the next read, RetryFirst after the first
// failure and twice the last wait after each further one (at most
// RetryMax), unless it is armed already, and returns the wait.
func (r *retry) failed() time.Duration {
	if r.C != nil {
		return r.delay
	}
	r.delay = min(max(2*r.delay, RetryFirst), RetryMax)
	r.timer.Reset(r.delay)
	r.C = r.timer.C
	return r.delay
}

// fired is called when C fired: the files are being read again.
func (r *retry) fired() { r.C = nil }

// succeeded disarms the timer: every file was read. The next failure
// waits RetryFirst again.
func (r *retry) succeeded() {
	r.timer.Stop()
	r.C, r.delay = nil, 0
}

// stop stops the timer.
func (r *retry) stop() { r.timer.Stop() }
