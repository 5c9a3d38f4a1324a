package sources

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// closeCount counts its Close calls.
type closeCount struct{ n atomic.Int32 }

func (c *closeCount) Close() error {
	c.n.Add(1)
	return nil
}

type acquired struct {
	value any
	fresh bool
	err   error
}

// goAcquire acquires key into set on its own goroutine.
func goAcquire(ctx context.Context, reg *Registry, set *Set, key string, open func() (any, io.Closer, error)) <-chan acquired {
	out := make(chan acquired, 1)
	go func() {
		v, fresh, err := reg.acquire(ctx, set, "fake", key, open)
		out <- acquired{v, fresh, err}
	}()
	return out
}

// within waits for c, failing the test after a generous while (a
// deadlock, not a slow machine).
func within[T any](t *testing.T, what string, c <-chan T) T {
	t.Helper()
	select {
	case v := <-c:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: still blocked after 10s", what)
		panic("unreachable")
	}
}

// refs is the registry's count for key (holders and waiters).
func refs(reg *Registry, key string) int {
	reg.mu.Lock()
	defer reg.mu.Unlock()
	if b := reg.backends["fake "+key]; b != nil {
		return b.refs
	}
	return -1
}

func waitRefs(t *testing.T, reg *Registry, key string, want int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); refs(reg, key) != want; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d references, want %d", key, refs(reg, key), want)
		}
	}
}

// A backend's open runs outside the registry lock: while one blocks,
// Synced and another key's acquire return, and a second acquirer of the
// same key waits for that open and shares its backend (one open).
func TestAcquireOpensOutsideTheLock(t *testing.T) {
	reg := NewRegistry(Options{})
	defer reg.Close()
	ctx := context.Background()
	setA, setB, setC := &Set{reg: reg}, &Set{reg: reg}, &Set{reg: reg}

	var opens atomic.Int32
	began, unblocked := make(chan struct{}), make(chan struct{})
	unblock := sync.OnceFunc(func() { close(unblocked) })
	defer unblock() // a failed test's open returns, so Close does not wait on it
	slow := &closeCount{}
	slowOpen := func() (any, io.Closer, error) {
		if opens.Add(1) == 1 {
			close(began)
		}
		<-unblocked
		return "slow backend", slow, nil
	}
	a := goAcquire(ctx, reg, setA, "slow", slowOpen)
	within(t, "slow open starting", began)

	synced := make(chan []string, 1)
	go func() {
		var names []string
		reg.Synced(func(name string, _ bool) { names = append(names, name) })
		synced <- names
	}()
	if names := within(t, "Synced during a slow open", synced); len(names) != 0 {
		t.Errorf("Synced during the open listed %v; a backend still opening is not running", names)
	}

	quick := &closeCount{}
	b := within(t, "another key's acquire during a slow open", goAcquire(ctx, reg, setB, "quick", func() (any, io.Closer, error) {
		return "quick backend", quick, nil
	}))
	if b.err != nil || b.value != "quick backend" || !b.fresh {
		t.Fatalf("quick: %+v", b)
	}

	c := goAcquire(ctx, reg, setC, "slow", slowOpen)
	waitRefs(t, reg, "slow", 2) // C waits on A's open
	if n := reg.Len(); n != 1 {
		t.Errorf("Len during the open: %d, want 1 (quick)", n)
	}
	unblock()
	ra, rc := within(t, "first acquirer", a), within(t, "second acquirer", c)
	if ra.err != nil || rc.err != nil || ra.value != "slow backend" || rc.value != "slow backend" {
		t.Fatalf("acquirers of one key: %+v, %+v", ra, rc)
	}
	if !ra.fresh || rc.fresh {
		t.Errorf("fresh: opener %v, waiter %v; want true, false", ra.fresh, rc.fresh)
	}
	if n := opens.Load(); n != 1 {
		t.Errorf("two acquirers of one key: %d opens, want 1", n)
	}
	if n := reg.Len(); n != 2 {
		t.Errorf("Len: %d, want 2", n)
	}

	setA.Release()
	if n := slow.n.Load(); n != 0 {
		t.Fatalf("slow closed with a holder left (%d)", n)
	}
	setC.Release()
	setB.Release()
	if slow.n.Load() != 1 || quick.n.Load() != 1 || reg.Len() != 0 {
		t.Errorf("after every release: slow closed %d, quick %d, %d running; want 1, 1, 0", slow.n.Load(), quick.n.Load(), reg.Len())
	}
}

// A failed open is not kept: the acquirers waiting on it get its error,
// and the next acquire of the key opens again. A waiter whose context
// ends stops waiting and lets go of its reference.
func TestAcquireFailedOpenNotKept(t *testing.T) {
	reg := NewRegistry(Options{})
	defer reg.Close()
	ctx := context.Background()
	errBroken := errors.New("broken")
	var opens atomic.Int32
	began, unblocked := make(chan struct{}), make(chan struct{})
	unblock := sync.OnceFunc(func() { close(unblocked) })
	defer unblock() // a failed test's open returns, so Close does not wait on it
	failing := func() (any, io.Closer, error) {
		if opens.Add(1) == 1 {
			close(began)
		}
		<-unblocked
		return nil, nil, errBroken
	}
	a := goAcquire(ctx, reg, &Set{reg: reg}, "k", failing)
	within(t, "open starting", began)
	b := goAcquire(ctx, reg, &Set{reg: reg}, "k", failing)
	waitRefs(t, reg, "k", 2)

	cctx, cancel := context.WithCancel(ctx)
	gone := goAcquire(cctx, reg, &Set{reg: reg}, "k", failing)
	waitRefs(t, reg, "k", 3)
	cancel()
	if r := within(t, "waiter whose context ended", gone); !errors.Is(r.err, context.Canceled) {
		t.Errorf("waiter whose context ended: %v, want context.Canceled", r.err)
	}
	waitRefs(t, reg, "k", 2)

	unblock()
	for _, r := range []acquired{within(t, "opener", a), within(t, "waiter", b)} {
		if !errors.Is(r.err, errBroken) || r.value != nil {
			t.Errorf("acquire over a failed open: %+v, want the open's error", r)
		}
	}
	if n, left := opens.Load(), refs(reg, "k"); n != 1 || left != -1 {
		t.Fatalf("after the failed open: %d opens, entry refs %d; want 1, none", n, left)
	}

	set := &Set{reg: reg}
	closer := &closeCount{}
	v, fresh, err := reg.acquire(ctx, set, "fake", "k", func() (any, io.Closer, error) {
		opens.Add(1)
		return "works now", closer, nil
	})
	if err != nil || v != "works now" || !fresh || opens.Load() != 2 {
		t.Fatalf("acquire after a failed open: %v %v %v, %d opens; want a fresh open", v, fresh, err, opens.Load())
	}
	set.Release()
	if closer.n.Load() != 1 || reg.Len() != 0 {
		t.Errorf("after release: closed %d, %d running", closer.n.Load(), reg.Len())
	}
}

// An open that panics leaves no entry behind: the acquirers waiting on it
// get an error instead of waiting forever.
func TestAcquirePanickedOpenNotKept(t *testing.T) {
	reg := NewRegistry(Options{})
	defer reg.Close()
	ctx := context.Background()
	began, unblocked := make(chan struct{}), make(chan struct{})
	unblock := sync.OnceFunc(func() { close(unblocked) })
	defer unblock()
	panicked := make(chan any, 1)
	go func() {
		defer func() { panicked <- recover() }()
		_, _, _ = reg.acquire(ctx, &Set{reg: reg}, "fake", "k", func() (any, io.Closer, error) {
			close(began)
			<-unblocked
			panic("open broke")
		})
	}()
	within(t, "open starting", began)
	waiter := goAcquire(ctx, reg, &Set{reg: reg}, "k", nil)
	waitRefs(t, reg, "k", 2)
	unblock()
	if p := within(t, "opener", panicked); p != "open broke" {
		t.Fatalf("opener recovered %v, want the open's panic", p)
	}
	if r := within(t, "waiter on a panicked open", waiter); r.err == nil || !strings.Contains(r.err.Error(), "panicked") {
		t.Errorf("waiter on a panicked open: %+v, want an error", r)
	}
	if left := refs(reg, "k"); left != -1 {
		t.Errorf("a panicked open left an entry (%d references)", left)
	}
}
