package daemon

import (
	"context"
	"log/slog"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"

	"github.com/dnsd/dnsd/authority"
	"github.com/dnsd/dnsd/pipeline"
	"github.com/dnsd/dnsd/sources"
)

// generation is the daemon's part of one server generation (the
// resolver and authority it commits, see server.Generation): one
// compiled pipeline, its transferred zones, the backends it holds, the
// log settings, and a count of the queries it is answering. Nothing in
// it changes once committed but the count and next.
type generation struct {
	p        *pipeline.Pipeline
	auth     *authority.Zones
	set      *sources.Set
	level    slog.Level // log.level
	queryLog bool       // log.queries
	inflight atomic.Int64
	// next is the generation that replaced this one, set once it has
	// been committed and before this one drains.
	next atomic.Pointer[generation]
}

// Resolve implements pipeline.Resolver: g answers, counted in flight so
// that a reload can wait for it (drain).
func (g *generation) Resolve(ctx context.Context, req *pipeline.Request) pipeline.Response {
	for {
		g.inflight.Add(1)
		// A query that read g before the commit that replaced it and
		// counts itself only now could be missed by a drain that has
		// begun: next says so (it is set before the drain), and the
		// generation after answers.
		n := g.next.Load()
		if n == nil {
			r := g.p.Resolve(ctx, req)
			g.inflight.Add(-1)
			return r
		}
		g.inflight.Add(-1)
		g = n
	}
}

// Fresh implements pipeline.Freshness: a stamp is fresh only for the
// generation that made it, while it is current (a reload makes every
// kept answer stale).
func (g *generation) Fresh(st pipeline.Stamp) (uint32, bool) {
	if g.next.Load() != nil {
		return 0, false
	}
	return g.p.Fresh(st)
}

// Transfer implements authority.Transferer: the generation decides and
// lists the zone; the server sends the listing after the generation is
// let go, so a long transfer never holds back a reload's drain.
func (g *generation) Transfer(ctx context.Context, req *authority.Request) authority.Result {
	for {
		g.inflight.Add(1)
		n := g.next.Load()
		if n == nil { // see Resolve
			r := g.auth.Transfer(ctx, req)
			g.inflight.Add(-1)
			return r
		}
		g.inflight.Add(-1)
		g = n
	}
}

// TransferZone implements authority.Transferer.
func (g *generation) TransferZone(name string) string { return g.auth.TransferZone(name) }

// TSIGKey implements authority.Transferer.
func (g *generation) TSIGKey(name string) *authority.TSIGKey { return g.auth.TSIGKey(name) }

// replacedBy records that next has been committed in g's place: queries
// that still come to g are answered by next.
func (g *generation) replacedBy(next *generation) { g.next.Store(next) }

// NotifyIn implements authority.NotifyReceiver: the newest generation's
// zones decide (a NOTIFY holds nothing a drain waits for).
func (g *generation) NotifyIn(q *dns.Msg, wire []byte, from netip.Addr) authority.NotifyAnswer {
	for n := g.next.Load(); n != nil; n = g.next.Load() {
		g = n
	}
	return g.auth.NotifyIn(q, wire, from)
}

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

// Updates implements authority.Updater: the newest generation's.
func (g *generation) Updates() bool {
	for n := g.next.Load(); n != nil; n = g.next.Load() {
		g = n
	}
	return g.auth.Updates()
}

// Update implements authority.Updater: the generation decides and
// commits the update, counted in flight (see Resolve) so that a reload
// lets its sources go only once the update is answered.
func (g *generation) Update(ctx context.Context, q *dns.Msg, wire []byte, client netip.Addr) authority.UpdateAnswer {
	for {
		g.inflight.Add(1)
		n := g.next.Load()
		if n == nil {
			a := g.auth.Update(ctx, q, wire, client)
			g.inflight.Add(-1)
			return a
		}
		g.inflight.Add(-1)
		g = n
	}
}
