package daemon

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/dnsd/dnsd/authority"
	"github.com/dnsd/dnsd/pipeline"
	"github.com/dnsd/dnsd/sources"
)

// generation is one compiled pipeline, its transferred zones, the
// backends it holds and a count of the queries it is answering.
type generation struct {
	p        *pipeline.Pipeline
	auth     *authority.Zones
	set      *sources.Set
	inflight atomic.Int64
}

// switcher is the pipeline.Resolver the server calls: it answers from the
// current generation, and lets a reload swap generations with one atomic
// store and then wait until the old one has no query in flight.
type switcher struct {
	cur atomic.Pointer[generation]
}

// Resolve implements pipeline.Resolver.
func (s *switcher) Resolve(ctx context.Context, req *pipeline.Request) pipeline.Response {
	for {
		g := s.cur.Load()
		g.inflight.Add(1)
		// A swap between Load and Add would let drain miss this query;
		// re-checking after Add closes that window: either the swap came
		// after the Add (drain sees it) or we retry on the new generation.
		if s.cur.Load() == g {
			r := g.p.Resolve(ctx, req)
			g.inflight.Add(-1)
			return r
		}
		g.inflight.Add(-1)
	}
}

// Fresh implements pipeline.Freshness: a stamp is fresh only for the
// current generation (a reload makes every kept answer stale).
func (s *switcher) Fresh(st pipeline.Stamp) (uint32, bool) { return s.cur.Load().p.Fresh(st) }

// Transfer implements authority.Transferer: the current generation decides
// and lists the zone; the server sends the listing after the generation
// is let go, so a long transfer never holds back a reload's drain.
func (s *switcher) Transfer(ctx context.Context, req *authority.Request) authority.Result {
	for {
		g := s.cur.Load()
		g.inflight.Add(1)
		if s.cur.Load() == g { // see Resolve
			r := g.auth.Transfer(ctx, req)
			g.inflight.Add(-1)
			return r
		}
		g.inflight.Add(-1)
	}
}

// TransferZone implements authority.Transferer.
func (s *switcher) TransferZone(name string) string { return s.cur.Load().auth.TransferZone(name) }

// TSIGKey implements authority.Transferer.
func (s *switcher) TSIGKey(name string) *authority.TSIGKey { return s.cur.Load().auth.TSIGKey(name) }

func (s *switcher) current() *generation { return s.cur.Load() }

// swap installs g and returns the previous generation (nil at start).
func (s *switcher) swap(g *generation) *generation { return s.cur.Swap(g) }

// drain waits until g answers no query, or ctx ends.
func (g *generation) drain(ctx context.Context) error {
	t := time.NewTicker(2 * time.Millisecond)
	defer t.Stop()
	for g.inflight.Load() > 0 {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	return nil
}
