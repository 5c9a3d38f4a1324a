package kind

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

type closer struct{ closed int }

func (c *closer) Close() error { c.closed++; return nil }

// One value per key, opened once, closed when the last holder releases
// (twice-called releases count once); a failed open leaves nothing.
func TestSharedCountsHolders(t *testing.T) {
	var s Shared[*closer]
	opens := 0
	open := func() (*closer, error) { opens++; return &closer{}, nil }
	a, relA, _, err := s.Acquire("k", open)
	if err != nil {
		t.Fatal(err)
	}
	b, relB, _, _ := s.Acquire("k", open)
	if a != b || opens != 1 || s.Len() != 1 {
		t.Fatalf("two holders: same value %v, %d opens, %d open values", a == b, opens, s.Len())
	}
	relA()
	relA()
	if a.closed != 0 || s.Len() != 1 {
		t.Fatalf("closed %d times with a holder left", a.closed)
	}
	relB()
	if a.closed != 1 || s.Len() != 0 {
		t.Fatalf("closed %d times after the last release, %d left", a.closed, s.Len())
	}
	if _, _, _, err := s.Acquire("bad", func() (*closer, error) { return nil, errors.New("boom") }); err == nil || s.Len() != 0 {
		t.Fatalf("failed open: err %v, %d values", err, s.Len())
	}
	c, _, _, _ := s.Acquire("k", open)
	s.CloseAll()
	if opens != 2 || c.closed != 1 || s.Len() != 0 {
		t.Fatalf("reopen and CloseAll: %d opens, closed %d", opens, c.closed)
	}
}

// A View closes its value, then releases what it shares, once.
func TestViewClosesThenReleases(t *testing.T) {
	c := &closer{}
	released := 0
	v := &View[*closer]{Value: c, Release: func() bool {
		if c.closed != 1 {
			t.Error("released before the value was closed")
		}
		released++
		return true
	}}
	_ = v.Close()
	_ = v.Close()
	if c.closed != 1 || released != 1 {
		t.Fatalf("closed %d, released %d; want 1, 1", c.closed, released)
	}
	if !v.ClosedShared() {
		t.Error("ClosedShared false after a release that closed the shared part")
	}
}

// Views of one shared value: the first opens it, the last closes it, and
// each says so (what the registry logs: a backend started or a view of
// a running one).
func TestViewsSayWhetherTheyOpenedAndClosed(t *testing.T) {
	var s Shared[*closer]
	view := func() *View[*closer] {
		_, release, opened, err := s.Acquire("k", func() (*closer, error) { return &closer{}, nil })
		if err != nil {
			t.Fatal(err)
		}
		return &View[*closer]{Value: &closer{}, Release: release, Opened: opened}
	}
	a, b := view(), view()
	if !a.OpenedShared() || b.OpenedShared() {
		t.Errorf("opened: first %v, second %v; want true, false", a.OpenedShared(), b.OpenedShared())
	}
	_ = a.Close()
	_ = b.Close()
	if a.ClosedShared() || !b.ClosedShared() {
		t.Errorf("closed: first %v, last %v; want false, true", a.ClosedShared(), b.ClosedShared())
	}
}

// waitRefs waits until key's entry in s counts n holders (acquirers
// waiting on its open included).
func waitRefs(t *testing.T, s *Shared[*closer], key string, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if !s.mu.TryLock() { // an open under the lock holds it
			continue
		}
		e := s.m[key]
		ok := e != nil && e.refs == n
		s.mu.Unlock()
		if ok {
			return
		}
	}
	t.Fatalf("%s never had %d holders", key, n)
}

// An open runs outside the lock: while one key's open blocks, another key
// opens and is released; a second acquirer of the blocked key waits for
// that one open and shares its value.
func TestSharedOpensOutsideTheLock(t *testing.T) {
	var s Shared[*closer]
	var opens atomic.Int32
	entered, gate := make(chan struct{}), make(chan struct{})
	slow := func() (*closer, error) {
		opens.Add(1)
		close(entered)
		<-gate
		return &closer{}, nil
	}
	type got struct {
		v      *closer
		opened bool
		err    error
	}
	first, second := make(chan got, 1), make(chan got, 1)
	go func() {
		v, _, opened, err := s.Acquire("slow", slow)
		first <- got{v, opened, err}
	}()
	<-entered
	go func() {
		v, _, opened, err := s.Acquire("slow", func() (*closer, error) {
			opens.Add(1)
			return &closer{}, nil
		})
		second <- got{v, opened, err}
	}()
	waitRefs(t, &s, "slow", 2)

	other := make(chan error, 1)
	go func() {
		v, release, opened, err := s.Acquire("other", func() (*closer, error) { return &closer{}, nil })
		if err == nil && (!opened || !release() || v.closed != 1) {
			err = errors.New("the other key was not opened, then closed by its release")
		}
		other <- err
	}()
	select {
	case err := <-other:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("another key waited for a blocked open")
	}
	select {
	case g := <-second:
		t.Fatalf("the second acquirer of a key being opened returned before that open: %+v", g)
	default:
	}
	if n := s.Len(); n != 0 {
		t.Fatalf("Len %d while the only open is in flight, want 0", n)
	}
	close(gate)
	a, b := <-first, <-second
	if a.err != nil || b.err != nil {
		t.Fatalf("errors: %v, %v", a.err, b.err)
	}
	if a.v != b.v || !a.opened || b.opened || opens.Load() != 1 {
		t.Fatalf("same value %v, opened %v and %v, %d opens; want one open shared", a.v == b.v, a.opened, b.opened, opens.Load())
	}
	if s.Len() != 1 {
		t.Fatalf("Len %d, want 1", s.Len())
	}
}

// Those waiting on an open that fails get its error; the failure is not
// kept: the next Acquire opens again.
func TestSharedFailedOpenIsNotKept(t *testing.T) {
	var s Shared[*closer]
	entered, gate := make(chan struct{}), make(chan struct{})
	boom := errors.New("boom")
	var wg sync.WaitGroup
	var firstErr error
	wg.Go(func() {
		_, _, _, firstErr = s.Acquire("k", func() (*closer, error) {
			close(entered)
			<-gate
			return nil, boom
		})
	})
	<-entered
	waited := make(chan error, 1)
	go func() {
		_, _, _, err := s.Acquire("k", func() (*closer, error) { return &closer{}, nil })
		waited <- err
	}()
	waitRefs(t, &s, "k", 2)
	close(gate)
	wg.Wait()
	if !errors.Is(firstErr, boom) {
		t.Fatalf("opener: %v, want boom", firstErr)
	}
	if err := <-waited; !errors.Is(err, boom) {
		t.Fatalf("the waiter got %v, want the open's error", err)
	}
	if s.Len() != 0 {
		t.Fatalf("Len %d after a failed open", s.Len())
	}
	v, release, opened, err := s.Acquire("k", func() (*closer, error) { return &closer{}, nil })
	if err != nil || !opened || v == nil {
		t.Fatalf("after a failed open: err %v, opened %v", err, opened)
	}
	release()
}

// An open that panics wakes those waiting on it with an error.
func TestSharedPanickingOpenWakesWaiters(t *testing.T) {
	var s Shared[*closer]
	entered, gate := make(chan struct{}), make(chan struct{})
	go func() {
		defer func() { _ = recover() }()
		_, _, _, _ = s.Acquire("k", func() (*closer, error) {
			close(entered)
			<-gate
			panic("open")
		})
	}()
	<-entered
	waited := make(chan error, 1)
	go func() {
		_, _, _, err := s.Acquire("k", func() (*closer, error) { return &closer{}, nil })
		waited <- err
	}()
	waitRefs(t, &s, "k", 2)
	close(gate)
	select {
	case err := <-waited:
		if err == nil {
			t.Fatal("the waiter on a panicking open got no error")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter on a panicking open waits forever")
	}
}
