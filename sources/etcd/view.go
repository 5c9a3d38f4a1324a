package etcd

import (
	"context"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"

	"github.com/dnsd/dnsd/pipeline"
)

// A source's ttl is the TTL of the records whose value has none: it shapes
// answers, it is not a connection setting. Sources with different TTLs
// share one Backend (one client, one watch) through Views: the backend
// keeps one index per default TTL in use and applies every event to each.
// A View for a new TTL is cloned from an existing index, so a reload that
// only changes ttl needs no etcd (it works during an outage) and is synced
// as soon as the backend is.

// view is one default TTL's index and the Views holding it. The index is
// replaced whole when the backend reads a changed etcd into a new one.
type view struct {
	ix   atomic.Pointer[index]
	refs int
}

// newView is a view of ix.
func newView(ix *index) *view {
	v := &view{}
	v.ix.Store(ix)
	return v
}

// View is the backend's records with one default TTL. It implements the
// parts of a source that depend on the backend; Close lets it go.
type View struct {
	b    *Backend
	vw   *view
	ttl  uint32
	once sync.Once
}

// View returns the backend's records with default TTL ttl, cloning an
// index when no View holds that TTL yet. Close the View when done.
func (b *Backend) View(ttl time.Duration) *View {
	t := pipeline.TTLSeconds(ttl)
	b.wmu.Lock()
	defer b.wmu.Unlock()
	v := b.views[t]
	if v == nil {
		v = newView(b.anyIndex().clone(t))
		b.views[t] = v
	}
	v.refs++
	// Indexes nobody holds (the one the backend was opened with, before
	// its first View) are kept only while they are the last one.
	for other, ov := range b.views {
		if ov.refs == 0 && len(b.views) > 1 {
			delete(b.views, other)
		}
	}
	return &View{b: b, vw: v, ttl: t}
}

// Close releases the View; the backend stops maintaining its index when
// no View holds it and another index remains. Idempotent.
func (v *View) Close() error {
	v.once.Do(func() {
		b := v.b
		b.wmu.Lock()
		defer b.wmu.Unlock()
		if vw := b.views[v.ttl]; vw != nil {
			vw.refs--
			if vw.refs <= 0 && len(b.views) > 1 {
				delete(b.views, v.ttl)
			}
		}
	})
	return nil
}

// Backend is the View's backend.
func (v *View) Backend() *Backend { return v.b }

// Synced reports whether the backend has finished its first sync.
func (v *View) Synced() bool { return v.b.Synced() }

// WaitSynced blocks until the backend has synced or ctx ends.
func (v *View) WaitSynced(ctx context.Context) error { return v.b.WaitSynced(ctx) }

// clone returns a copy of ix (writer only) whose records from values
// without a "ttl" have ttl instead.
func (ix *index) clone(ttl uint32) *index {
	c := newIndex(ix.prefix, ttl)
	for k, rev := range ix.bad {
		c.bad[k] = rev
	}
	c.nkeys = ix.nkeys
	if ix.marking { // cloned during a re-read: the marks so far
		c.marking, c.badSeen = true, maps.Clone(ix.badSeen)
	}
	ix.names.each(func(name string, n *node) bool {
		keys := ix.keyStates(n)
		if len(keys) == 0 {
			return true
		}
		ck := make([]keyState, len(keys))
		var cn *node
		for i, ks := range keys {
			if rrs := withDefaultTTL(ks.rrs, ks.ownTTL, ttl); len(rrs) > 0 && &rrs[0] != &ks.rrs[0] {
				ks.rrs, ks.set = rrs, nil
			}
			ck[i] = ks
			c.records += len(ks.rrs)
			cn = c.acquire(name)
		}
		c.storeKeys(cn, ck)
		c.publishOwn(cn)
		return true
	})
	return c
}

// withDefaultTTL returns rrs with ttl when they took the default TTL (the
// value had no "ttl"); the records are copied, never written.
func withDefaultTTL(rrs []dns.RR, own bool, ttl uint32) []dns.RR {
	if own || len(rrs) == 0 || rrs[0].Header().Ttl == ttl {
		return rrs
	}
	out := make([]dns.RR, len(rrs))
	for i, rr := range rrs {
		cp := dns.Copy(rr)
		cp.Header().Ttl = ttl
		out[i] = cp
	}
	return out
}
