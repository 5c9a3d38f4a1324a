package fswatch

import (
	"testing"
	"time"
)

func TestRetryBackoff(t *testing.T) {
	r := newRetry()
	defer r.stop()
	if r.C != nil {
		t.Fatal("a new retry is armed")
	}
	var got []time.Duration
	for range 8 {
		got = append(got, r.failed())
		if again := r.failed(); again != got[len(got)-1] || r.C == nil {
			t.Fatalf("Failed while armed: %v, armed %v", again, r.C != nil)
		}
		if len(got) == 1 {
			<-r.C // the first read again comes
		}
		r.fired()
	}
	want := []time.Duration{RetryFirst, 2 * RetryFirst, 4 * RetryFirst, 8 * RetryFirst, 16 * RetryFirst, 32 * RetryFirst, RetryMax, RetryMax}
	if RetryMax != 5*time.Second || RetryFirst != 100*time.Millisecond {
		t.Skip("the backoff's bounds changed: update want")
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("waits %v, want %v", got, want)
		}
	}
	r.succeeded()
	if r.C != nil || r.failed() != RetryFirst {
		t.Fatal("after a success the next failure does not wait RetryFirst")
	}
}
