package sources

import (
	"context"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"

	"github.com/dnsd/dnsd/pipeline"
)

// A reload can replace a zone's backend with one that has not synced yet
// (new etcd endpoints or credentials, another kubeconfig, pod watching
// turned on). If the backend it replaces still answers, the zone must not
// turn to SERVFAIL meanwhile, least of all when the reload happens during
// an outage and the new backend cannot sync at all: the old backend keeps
// answering that zone until its replacement has synced, then it is let go.
//
// A slot is one source position of the serving pipeline: the zone key, the
// kind and its ordinal among the zone's sources of that kind. A source of
// the new pipeline takes over the old source of the same slot.
type slot struct {
	zone string
	kind string
	n    int
}

// slotSource is what a slot of a built pipeline holds.
type slotSource struct {
	key string // the registry backend's key ("" when none)
	src pipeline.Source
}

// handoverGrace is how long the old backend stays referenced after its
// replacement has synced, for lookups that started just before the switch.
const handoverGrace = time.Second

// handover is the pipeline source of a slot whose new backend has not
// synced yet while the old one had: it answers from prev until next has
// synced, then from next.
type handover struct {
	next     pipeline.Source
	nextSync pipeline.Syncer
	prev     pipeline.Source
	prevKey  string
	done     atomic.Bool // next has synced: prev is never asked again
}

var (
	_ pipeline.Source     = (*handover)(nil)
	_ pipeline.Syncer     = (*handover)(nil)
	_ pipeline.Wildcarder = (*handover)(nil)
	_ pipeline.Troubled   = (*handover)(nil)
)

func (h *handover) current() pipeline.Source {
	if h.done.Load() {
		return h.next
	}
	if h.nextSync.Synced() {
		h.done.Store(true)
		return h.next
	}
	return h.prev
}

func (h *handover) Lookup(ctx context.Context, q *pipeline.Question) pipeline.Result {
	return h.current().Lookup(ctx, q)
}

// Wildcards passes on the answering source's, so that wrapping a source
// never hides its wildcards from the pipeline.
func (h *handover) Wildcards() bool {
	w, ok := h.current().(pipeline.Wildcarder)
	return ok && w.Wildcards()
}

func (h *handover) Kind() string { return h.next.Kind() }

func (h *handover) TTL() uint32 { return h.current().TTL() }

// Serial is the larger of both serials, so the zone's serial never goes
// backwards at the switch, plus one once next answers: the answering data
// changes there, and the zone's serial must move with it (secondaries and
// kept answers rely on it).
func (h *handover) Serial() uint32 {
	s := max(h.prev.Serial(), h.next.Serial())
	if h.current() == h.next {
		s++
	}
	return s
}

// Endpoint is the replacement's: the server this slot is moving to.
func (h *handover) Endpoint() string {
	if tr, ok := h.next.(pipeline.Troubled); ok {
		return tr.Endpoint()
	}
	return ""
}

// Problem says, until next has synced, that the previous backend still
// answers and why neither is well when they are not: /ready stays 200
// (the zone is answered) but names the handover and its causes.
func (h *handover) Problem() string {
	next := problemOf(h.next)
	if h.current() == h.next {
		return next
	}
	p := "replacement not synced yet, the previous backend answers"
	if next != "" {
		p += ": " + next
	}
	if prev := problemOf(h.prev); prev != "" {
		p += "; the previous backend: " + prev
	}
	return p
}

// problemOf is s's Problem, "" when it has none or is not Troubled.
func problemOf(s pipeline.Source) string {
	if tr, ok := s.(pipeline.Troubled); ok {
		return tr.Problem()
	}
	return ""
}

// Synced: the slot answers (from prev) even before next has synced.
func (h *handover) Synced() bool { return true }

func (h *handover) WaitSynced(context.Context) error { return nil }

// handovers are the running handovers of one Set, stopped by its Release.
type handovers struct {
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// handOver returns the source for a slot whose new source src (backend
// key) has not synced: a handover from the source that served the slot in
// the running pipeline, when that one answers and its backend still runs;
// else src itself. The handover holds a reference on the old backend until
// src has synced (plus handoverGrace) or the Set is released.
func (r *Registry) handOver(set *Set, sl slot, key string, src pipeline.Source) pipeline.Source {
	sy, ok := src.(pipeline.Syncer)
	if !ok || sy.Synced() {
		return src
	}
	r.mu.Lock()
	prev, ok := r.serving[sl]
	switch wh := prev.src.(type) {
	case *writingHandover:
		prev.src = wh.handover
	case *copyHandover:
		prev.src = wh.handover
	}
	if h, isHandover := prev.src.(*handover); isHandover && !h.done.Load() {
		// A reload during a handover: carry on from the same old source.
		prev = slotSource{key: h.prevKey, src: h.prev}
	}
	b := r.backends[prev.key]
	if !ok || prev.key == "" || prev.key == key || b == nil || !b.opened() {
		r.mu.Unlock()
		return src
	}
	if psy, ok := prev.src.(pipeline.Syncer); ok && !psy.Synced() {
		r.mu.Unlock()
		return src // the old one does not answer either
	}
	b.refs++
	r.mu.Unlock()

	h := &handover{next: src, nextSync: sy, prev: prev.src, prevKey: prev.key}
	if set.handovers.ctx == nil {
		set.handovers.ctx, set.handovers.cancel = context.WithCancel(r.ctx)
	}
	r.logger.Info("replacement backend not synced yet; the previous one keeps answering its zone until it is",
		"zone", sl.zone, "kind", sl.kind, "previous", prev.key, "replacement", key)
	ctx := set.handovers.ctx
	set.handovers.wg.Add(1)
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		defer set.handovers.wg.Done()
		defer r.release([]string{prev.key})
		if err := sy.WaitSynced(ctx); err != nil {
			return // Set released first
		}
		h.done.Store(true)
		r.logger.Info("replacement backend synced; releasing the previous one", "zone", sl.zone, "kind", sl.kind, "previous", prev.key)
		t := time.NewTimer(handoverGrace)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
		}
	}()
	return wrapHandover(h)
}

// wrapHandover gives h the interfaces of its new source that the
// authority and the pipeline find by type: a zone keeps its writable
// source, or its copy's NOTIFY taker and signatures, through the reload.
func wrapHandover(h *handover) pipeline.Source {
	if w, ok := h.next.(pipeline.Writer); ok {
		return &writingHandover{handover: h, w: w}
	}
	if n, ok := h.next.(pipeline.NotifyTaker); ok {
		return &copyHandover{handover: h, n: n}
	}
	return h
}

// copyHandover is the handover of a zone copied from primaries
// (pipeline.NotifyTaker): NOTIFYs go to the new source (its primaries
// decide who may send them, and it refreshes), and the zone's own
// signatures are the answering source's.
type copyHandover struct {
	*handover
	n pipeline.NotifyTaker
}

var (
	_ pipeline.NotifyTaker = (*copyHandover)(nil)
	_ pipeline.Presigned   = (*copyHandover)(nil)
)

// NotifyFrom implements pipeline.NotifyTaker: the new source's primaries.
func (h *copyHandover) NotifyFrom(zone string, addr netip.Addr) (*pipeline.TSIGKey, bool) {
	return h.n.NotifyFrom(zone, addr)
}

// Notify implements pipeline.NotifyTaker: the new source refreshes.
func (h *copyHandover) Notify(zone string) { h.n.Notify(zone) }

// Presigned implements pipeline.Presigned: the answering source's.
func (h *copyHandover) Presigned(zone string) bool {
	p, ok := h.current().(pipeline.Presigned)
	return ok && p.Presigned(zone)
}

// NSEC implements pipeline.Presigned.
func (h *copyHandover) NSEC(zone, name string) []dns.RR {
	if p, ok := h.current().(pipeline.Presigned); ok {
		return p.NSEC(zone, name)
	}
	return nil
}

// NSEC3 implements pipeline.Presigned.
func (h *copyHandover) NSEC3(zone, hash string) []dns.RR {
	if p, ok := h.current().(pipeline.Presigned); ok {
		return p.NSEC3(zone, hash)
	}
	return nil
}

// writingHandover is the handover of a slot whose new source takes
// dynamic updates (pipeline.Writer): the zone keeps its writable source
// through the reload. Updates go to the new source, never to the old one
// (another backend): they fail, SERVFAIL, until it has synced.
type writingHandover struct {
	*handover
	w pipeline.Writer
}

var _ pipeline.Writer = (*writingHandover)(nil)

// BeginUpdate implements pipeline.Writer: the new source's.
func (h *writingHandover) BeginUpdate(ctx context.Context, zone string) (pipeline.UpdateTxn, error) {
	return h.w.BeginUpdate(ctx, zone)
}

// stop ends the Set's handovers and waits until each has let go of its
// old backend.
func (hs *handovers) stop() {
	if hs.cancel != nil {
		hs.cancel()
	}
	hs.wg.Wait()
}

// List lists the source that answers now.
func (h *handover) List(zone string, yield func(dns.RR) bool) error {
	if l, ok := h.current().(pipeline.Lister); ok {
		return l.List(zone, yield)
	}
	return pipeline.ErrNotListable
}

// SOA is the answering source's own SOA, if it has one.
func (h *handover) SOA(zone string) (*dns.SOA, bool) {
	if s, ok := h.current().(pipeline.SOAer); ok {
		return s.SOA(zone)
	}
	return nil, false
}
