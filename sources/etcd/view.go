package etcd

import (
	"context"
	"sync"
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

// view is one default TTL's index and the Views holding it.
type view struct {
	ix   *index
	refs int
}

// View is the backend's records with one default TTL. It implements the
// parts of a source that depend on the backend; Close lets it go.
type View struct {
	b    *Backend
	ix   *index
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
		v = &view{ix: b.anyIndex().clone(t)}
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
	return &View{b: b, ix: v.ix, ttl: t}
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

func (v *View) lookup(name, zone string) ([]dns.RR, bool) { return lookupIn(v.ix, name, zone) }

// clone returns a copy of ix (writer only) whose records from values
// without a "ttl" have ttl instead.
func (ix *index) clone(ttl uint32) *index {
	c := newIndex(ix.prefix, ttl)
	touched := make(map[*node]struct{}, len(ix.keys))
	for key, e := range ix.keys {
		ce := &keyEntry{modRev: e.modRev, p: e.p.withDefaultTTL(ttl)}
		c.keys[key] = ce
		c.records += len(ce.p.rrs)
		if e.node == nil {
			continue
		}
		ce.node = c.acquire(e.node.name)
		ce.node.keys = insertSorted(ce.node.keys, key)
		touched[ce.node] = struct{}{}
	}
	for n := range touched {
		c.publishOwn(n)
	}
	return c
}

// withDefaultTTL returns p with ttl on its records when they took the
// default TTL (the value had no "ttl"); the records are copied, never
// written.
func (p parsed) withDefaultTTL(ttl uint32) parsed {
	if p.ownTTL || len(p.rrs) == 0 || p.rrs[0].Header().Ttl == ttl {
		return p
	}
	out := p
	out.rrs = make([]dns.RR, len(p.rrs))
	for i, rr := range p.rrs {
		cp := dns.Copy(rr)
		cp.Header().Ttl = ttl
		out.rrs[i] = cp
	}
	return out
}
