package sources

import (
	"context"
	"testing"

	"github.com/dnsd/dnsd/pipeline"
)

// stubSource is a local source that reports wildcards as told and has
// synced as told.
type stubSource struct {
	wild, synced bool
}

func (s *stubSource) Lookup(context.Context, *pipeline.Question) pipeline.Result {
	return pipeline.Result{Status: pipeline.NotMine}
}
func (s *stubSource) Kind() string                     { return "stub" }
func (s *stubSource) TTL() uint32                      { return 60 }
func (s *stubSource) Serial() uint32                   { return 1 }
func (s *stubSource) Wildcards() bool                  { return s.wild }
func (s *stubSource) Synced() bool                     { return s.synced }
func (s *stubSource) WaitSynced(context.Context) error { return nil }

// plainSource holds no wildcards (no Wildcarder).
type plainSource struct{}

func (plainSource) Lookup(context.Context, *pipeline.Question) pipeline.Result {
	return pipeline.Result{Status: pipeline.NotMine}
}
func (plainSource) Kind() string   { return "plain" }
func (plainSource) TTL() uint32    { return 60 }
func (plainSource) Serial() uint32 { return 1 }

// A handover reports the wildcards of the source answering through it.
func TestHandoverWildcards(t *testing.T) {
	next := &stubSource{wild: false}
	h := &handover{next: next, nextSync: next, prev: &stubSource{wild: true}}
	if !h.Wildcards() {
		t.Error("before the switch: the old source's wildcards are hidden")
	}
	next.synced = true
	if h.Wildcards() {
		t.Error("after the switch: still the old source's wildcards")
	}
	next.wild = true
	if !h.Wildcards() {
		t.Error("after the switch: the new source's wildcards are hidden")
	}
	next2 := &stubSource{}
	if (&handover{next: next2, nextSync: next2, prev: plainSource{}}).Wildcards() {
		t.Error("a source without Wildcarder reported wildcards")
	}
}
