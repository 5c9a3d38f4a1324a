package kind

import (
	"errors"
	"testing"
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
