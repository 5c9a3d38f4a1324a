package forward

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"

	"github.com/dnsd/dnsd/pipeline"
)

// Source is one zone's forward source: a view over a shared Pool and the
// shared Cache with the zone's `except` names. It implements
// pipeline.Source.
type Source struct {
	pool   *Pool // nil: dry run (`dnsd check`), never asked
	cache  *Cache
	met    *Metrics
	except []string
	zone   string
	ttl    uint32
}

var _ pipeline.Source = (*Source)(nil)

// refused is the answer to a loop probe that came back; busy the answer
// over max_concurrent (Extended DNS Error 18, Prohibited, "busy"). Shared
// and never written.
var (
	refused = &dns.Msg{MsgHdr: dns.MsgHdr{Response: true, Rcode: dns.RcodeRefused}}
	busy    = &dns.Msg{MsgHdr: dns.MsgHdr{Response: true, Rcode: dns.RcodeRefused},
		Extra: []dns.RR{pipeline.EDE(dns.ExtendedErrorCodeProhibited, "busy")}}
)

var errDryRun = errors.New("forward source built for a dry run")

// NewSource returns a Source. pool nil gives a source for `dnsd check`
// that fails every query; cache and met nil give private ones (tests).
// except are lower-case FQDNs whose names (and names below) are not
// forwarded; zone is the zone's first name (loop probes are sent under
// it); negTTL is the SOA minimum of negative answers the source causes.
func NewSource(pool *Pool, cache *Cache, met *Metrics, except []string, zone string, negTTL time.Duration) *Source {
	if cache == nil {
		cache = NewCache(CacheConfig{})
	}
	if met == nil {
		met = NewMetrics(nil, nil)
	}
	return &Source{pool: pool, cache: cache, met: met, except: except, zone: zone, ttl: pipeline.TTLSeconds(negTTL)}
}

// Kind is "forward".
func (s *Source) Kind() string { return Name }

var _ pipeline.Remote = (*Source)(nil)

// Remote implements pipeline.Remote: a forward source asks its upstreams
// per query.
func (*Source) Remote() bool { return true }

// TTL is the SOA minimum of negative answers caused by this source (an
// `except` name without fallthrough): the cache's negative_ttl.
func (s *Source) TTL() uint32 { return s.ttl }

// Serial is 0: a forward source holds no zone data.
func (s *Source) Serial() uint32 { return 0 }

// Excepted reports whether name is under one of the `except` names.
func (s *Source) Excepted(name string) bool {
	for _, ex := range s.except {
		if pipeline.InZone(name, ex) {
			return true
		}
	}
	return false
}

// CheckLoop starts the pool's loop probes under this source's zone (see
// Pool.CheckLoop).
func (s *Source) CheckLoop() {
	if s.pool != nil && !s.Excepted(s.zone) {
		s.pool.CheckLoop(s.zone)
	}
}

// Lookup answers from the cache when it has a fresh entry, else asks the
// upstreams (one exchange for all identical queries in flight). Results:
// NotMine for `except` names; Answered with the upstream's response (or
// REFUSED over max_concurrent); when every upstream fails, Answered with
// the stale entry (TTL 30) if serve_stale allows, else Failed.
func (s *Source) Lookup(ctx context.Context, q *pipeline.Question) pipeline.Result {
	if len(s.except) > 0 && s.Excepted(q.Name) {
		return pipeline.Result{Status: pipeline.NotMine}
	}
	if s.pool == nil {
		return pipeline.Result{Status: pipeline.Failed, Err: errDryRun}
	}
	k := Key{Name: q.Name, Type: q.Type, DO: q.DO, CD: q.CD, Upstreams: s.pool.answers}
	now := s.cache.now()
	e := s.cache.get(k, now)
	if e != nil && now < e.expires() {
		s.met.hits.Inc()
		if s.prefetchDue(e, now) {
			s.prefetch(k, e)
		}
		return answered(e.response(now))
	}
	s.met.misses.Inc()
	if pr := s.pool.probes.find(q.Name); pr != nil {
		pr.back.Store(true)
		pr.u.markLoop(q.Name)
		return answered(refused)
	}
	pipeline.Waiting(ctx) // every way on from here may wait for an upstream
	return s.resolve(ctx, k, e, now)
}

// Pin implements pipeline.Keeper: the cache entry the question is answered
// from now, when that answer is m, and its age. An entry whose life was
// capped by a reload is not pinned, nor one in its first second that holds
// records living longer than it: those are answered as stored in that
// second, with their TTLs capped to the entry's life after.
func (s *Source) Pin(name string, qtype uint16, do, cd bool, m *dns.Msg) (any, uint32) {
	if s.pool == nil || m == nil || (len(s.except) > 0 && s.Excepted(name)) {
		return nil, 0
	}
	now := s.cache.now()
	// Lookup has just counted this answer: peek, not get.
	e := s.cache.peek(Key{Name: name, Type: qtype, DO: do, CD: cd, Upstreams: s.pool.answers}, now)
	if e == nil || now >= e.expires() || e.capped.Load() || e.response(now) != m {
		return nil, 0
	}
	age := e.age(now)
	if age == 0 {
		life := uint32(e.life.Load() / int64(time.Second))
		for _, sec := range [][]dns.RR{m.Answer, m.Ns, m.Extra} {
			for _, rr := range sec {
				if rr.Header().Rrtype != dns.TypeOPT && rr.Header().Ttl > life {
					return nil, 0
				}
			}
		}
	}
	return e, age
}

// Same implements pipeline.Keeper: the pinned entry is still in the cache,
// not expired, not capped, with no refresh due; it answers with the pinned
// records, each TTL lowered by the seconds it aged since. It counts as a
// cache hit then (the caller answers with that), as Lookup would have.
func (s *Source) Same(token any) (uint32, bool) {
	e, ok := token.(*entry)
	if !ok || e.gone.Load() || e.capped.Load() {
		return 0, false
	}
	now := s.cache.now()
	if now >= e.expires() || s.prefetchDue(e, now) {
		return 0, false
	}
	e.touch()
	s.met.hits.Inc()
	return e.age(now), true
}

func answered(m *dns.Msg) pipeline.Result { return pipeline.Result{Status: pipeline.Answered, Msg: m} }

// resolve asks upstream for k; stale is the expired entry still inside the
// serve-stale window, or nil.
func (s *Source) resolve(ctx context.Context, k Key, stale *entry, now int64) pipeline.Result {
	if stale == nil {
		return s.resolveNow(ctx, k)
	}
	if now-stale.failedAt.Load() < int64(FailureRecheck) && stale.failedUp.Load() == s.pool.recoveries.Load() {
		// A refresh failed moments ago and no upstream has come back
		// since: do not make the client wait for the upstreams again
		// (RFC 8767 §5, failure recheck timer).
		s.met.stale.Inc()
		return answered(stale.staleResponse())
	}
	// The waiting client holds a max_concurrent slot like any other; with
	// none left it gets the stale answer at once.
	if !s.pool.acquire() {
		s.met.stale.Inc()
		return answered(stale.staleResponse())
	}
	// The refresh must not end with this client, who leaves after
	// StaleAnswerAfter: it runs on its own goroutine and context. It
	// takes over the client's slot when it starts before the client
	// leaves (with max_concurrent 1 it could never get a second one, and
	// the entry was served stale while the upstream was well), else it
	// takes one of its own; whichever of the two comes second releases
	// nothing of the other's.
	var lent atomic.Bool
	defer func() {
		if lent.CompareAndSwap(false, true) {
			s.pool.release()
		}
	}()
	ch := s.pool.group.DoChan(k.String(), func() (any, error) {
		if lent.CompareAndSwap(false, true) {
			defer s.pool.release()
			return s.fetch(context.Background(), k, false) // on the client's slot
		}
		return s.fetch(context.Background(), k, true)
	})
	t := time.NewTimer(StaleAnswerAfter)
	defer t.Stop()
	select {
	case r := <-ch:
		if r.Err == nil { // else (failed, or no slot for the refresh): stale
			return result(r.Val, r.Err)
		}
	case <-t.C: // the refresh goes on and updates the cache when it succeeds
	case <-ctx.Done():
		return pipeline.Result{Status: pipeline.Failed, Err: ctx.Err()}
	}
	s.met.stale.Inc()
	return answered(stale.staleResponse())
}

// resolveNow asks upstream for k on the calling goroutine (a goroutine of
// its own would cost a stack growth per miss), joining an identical query
// in flight. The exchange ends with ctx: a client that joined a query
// whose first client's ctx ended asks again.
//
// Every client waiting here holds one of max_concurrent slots, whether it
// leads the exchange or joined one: a flood of one name at a dead upstream
// is then bounded like a flood of distinct names, and the clients over the
// bound get REFUSED at once instead of piling up.
func (s *Source) resolveNow(ctx context.Context, k Key) pipeline.Result {
	if !s.pool.acquire() {
		s.met.busy.Inc()
		return answered(busy)
	}
	defer s.pool.release()
	key := k.String()
	for {
		if err := ctx.Err(); err != nil {
			return pipeline.Result{Status: pipeline.Failed, Err: err}
		}
		v, err, _ := s.pool.group.Do(key, func() (any, error) { return s.fetch(ctx, k, false) })
		if err != nil && errors.Is(err, errLeaderGone) && ctx.Err() == nil && s.pool.ctx.Err() == nil {
			continue
		}
		return result(v, err)
	}
}

// result maps fetch's outcome to the source's result.
func result(v any, err error) pipeline.Result {
	switch {
	case err == nil:
		return answered(v.(*dns.Msg))
	case errors.Is(err, errTooMany):
		return answered(busy)
	}
	return pipeline.Result{Status: pipeline.Failed, Err: err}
}

// fetch is the one upstream exchange of coalesced identical queries; it
// ends with ctx or when the pool closes. A background fetch (no client
// waits on it: prefetch, stale refresh) takes a max_concurrent slot of its
// own; a client's fetch runs on the slot its client holds.
func (s *Source) fetch(ctx context.Context, k Key, background bool) (any, error) {
	if background {
		if !s.pool.acquire() {
			return nil, errTooMany
		}
		defer s.pool.release()
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(s.pool.ctx, cancel)()
	m, err := s.pool.Exchange(ctx, k)
	if err != nil {
		if ctx.Err() != nil {
			// The exchange ended with its leader's context (or the
			// pool), not with the upstreams: a client that joined it
			// asks again. An attempt's own timeout (a DoH request's
			// deadline, a TLS handshake that never ends) also reads as
			// a deadline, and is an upstream failure.
			return nil, fmt.Errorf("%w: %w", errLeaderGone, err)
		}
		s.cache.failed(k, s.cache.now(), s.pool.recoveries.Load())
		return nil, err
	}
	return s.cache.Insert(k, m), nil
}

// errLeaderGone: a coalesced exchange ended because the context of the
// client that led it ended, or the pool closed.
var errLeaderGone = errors.New("the exchange's first client left")

// prefetchDue: the entry is popular (asked PrefetchHits times), lives long
// enough to be worth it, is in the last tenth of its life and no refresh
// runs.
func (s *Source) prefetchDue(e *entry, now int64) bool {
	if !s.cache.cfg.Load().Prefetch || e.hits.Load() < PrefetchHits || e.refreshing.Load() {
		return false
	}
	life := e.life.Load()
	return life >= int64(PrefetchMinTTL) && e.expires()-now <= life/10
}

// prefetch refreshes k in the background; the client is answered from the
// entry it has.
func (s *Source) prefetch(k Key, e *entry) {
	if !e.refreshing.CompareAndSwap(false, true) {
		return
	}
	ok := s.pool.spawn(func() {
		defer e.refreshing.Store(false)
		s.met.prefetches.Inc()
		_, _, _ = s.pool.group.Do(k.String(), func() (any, error) { return s.fetch(context.Background(), k, true) })
	})
	if !ok {
		e.refreshing.Store(false)
	}
}
