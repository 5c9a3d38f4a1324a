package forward

import (
	"hash/maphash"
	"math"
	"math/bits"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"

	"github.com/dnsd/dnsd/pipeline"
)

// Key identifies a cached response: the question (class IN: dnsd answers
// no other), the two flags that change what an upstream answers, and
// which upstreams answered. It fits 24 bytes: the cache's maps hash and
// compare whole keys at every lookup.
type Key struct {
	Name string // lower case, fully qualified; never empty
	Type uint16 // the query type; always set
	DO   bool   // DNSSEC OK: the answer carries RRSIGs; false: a plain answer
	CD   bool   // checking disabled: the answer may be unvalidated; false: validated (or no DNSSEC asked)
	// Upstreams names the upstreams asked (Cache.UpstreamsID of the
	// pool's answersKey): two views, or two zones, forwarding to
	// different resolvers never share an answer (an office view's
	// internal resolver and everyone else's public one). Sources
	// forwarding to the same upstreams do. A number, not the text: the
	// cache's maps hash their whole key at every lookup.
	Upstreams uint32
}

func (k Key) String() string {
	b := make([]byte, 0, len(k.Name)+8)
	b = append(b, k.Name...)
	b = append(b, 0, byte(k.Type>>8), byte(k.Type), flag(k.DO), flag(k.CD))
	return string(b)
}

func flag(b bool) byte {
	if b {
		return 1
	}
	return 0
}

// CacheConfig is the `cache:` section.
type CacheConfig struct {
	// Size is the entries; 0 disables the cache. Default 100000.
	Size int `dnsd:"size" default:"100000" doc:"Entries."`
	// MinTTL is the floor of positive TTLs: default 0, at most 7d.
	MinTTL time.Duration `dnsd:"min_ttl" dur:"ttl" doc:"Lowest TTL an answer is cached for (at most 7 days, whole seconds)."`
	// MaxTTL is the cap of positive TTLs: default 1h, at most 7d.
	MaxTTL time.Duration `dnsd:"max_ttl" default:"1h" dur:"ttl" doc:"Highest TTL an answer is cached for (at most 7 days, whole seconds)."`
	// NegativeTTL is the cap of NXDOMAIN/NODATA TTLs (RFC 2308): default
	// 5m, at most 7d.
	NegativeTTL time.Duration `dnsd:"negative_ttl" default:"5m" dur:"ttl" doc:"Cap for NXDOMAIN/NODATA answers (whole seconds)."`
	// ServeStale is how long after expiry an entry may be served while
	// upstreams fail: default 1h; 0 = off.
	ServeStale time.Duration `dnsd:"serve_stale" default:"1h" doc:"Serve expired entries this long while upstreams fail; 0 = off."`
	// Prefetch: refresh popular entries before they expire; default true.
	Prefetch bool `dnsd:"prefetch" default:"true" doc:"Refresh popular entries before they expire."`
}

// Serve-stale and prefetch constants (RFC 8767 §5 and common practice).
const (
	// StaleTTL is the TTL of a stale answer.
	StaleTTL = 30
	// FailureRecheck: after a refresh failed, a stale entry is answered at
	// once, without asking upstream again, for this long.
	FailureRecheck = 30 * time.Second
	// StaleAnswerAfter: a client with a stale entry waits at most this long
	// for a refresh before it gets the stale answer (the refresh goes on).
	StaleAnswerAfter = 1800 * time.Millisecond
	// PrefetchHits: an entry asked this many times is popular.
	PrefetchHits = 3
	// PrefetchMinTTL: entries living shorter than this are not prefetched.
	PrefetchMinTTL = 10 * time.Second
)

// Cache is the forward response cache, shared by every forward source of
// the process and kept across reloads. It is a sharded hash map with a
// CLOCK eviction per shard: every hit raises an entry's reference count
// (saturating at 3), the clock hand lowers counts and evicts the first
// entry found at 0 (or long expired), so entries asked often survive a
// stream of one-off names.
type Cache struct {
	cfg  atomic.Pointer[CacheConfig]
	tab  atomic.Pointer[table]
	seed maphash.Seed
	n    atomic.Int64 // entries
	mu   sync.Mutex   // serialises Configure and Retain
	// upstreams numbers the upstream sets of pools (UpstreamsID).
	upstreams struct {
		sync.Mutex
		ids map[string]uint32
	}
	now func() int64 // unix nanos; clock.read except in tests
	// clock is the coarse clock the cache reads (see clockTick); Close
	// stops it.
	clock *coarseClock
}

type table struct {
	shards []shard
	mask   uint64
	per    int // capacity of each shard
}

type shard struct {
	mu      sync.RWMutex
	m       map[Key]*entry
	ring    []*entry // CLOCK order; entry.slot is its index
	hand    int
	retired bool     // its table was replaced (resize): inserts go to the new one
	soa     *dns.SOA // the last negative answer's SOA (see shareSOA)
	_       [32]byte // keep shards on separate cache lines
}

// entry is one cached response. msg and stored never change; a new answer
// for the key replaces the entry.
type entry struct {
	// What a kept answer's check reads (Source.Same) comes first, on one
	// cache line.
	stored int64 // unix nanos
	life   atomic.Int64
	// gone: the entry has left the cache (replaced, evicted, flushed or
	// dropped at a resize); an answer pinned to it is no longer current.
	gone       atomic.Bool
	capped     atomic.Bool // life was lowered after insert (max_ttl/negative_ttl reload)
	refreshing atomic.Bool // a prefetch is running
	negative   bool
	ref        atomic.Uint32 // CLOCK reference count, 0..3
	hits       atomic.Uint32 // saturates at 255

	key      Key
	msg      *dns.Msg // TTLs as stored; never written after insert
	slot     int
	failedAt atomic.Int64  // unix nanos of the last failed refresh
	failedUp atomic.Uint64 // the pool's recovery count when it failed (Pool.recoveries)

	view  atomic.Pointer[snapshot] // response for one second of age
	stale atomic.Pointer[dns.Msg]  // response with TTL StaleTTL
}

type snapshot struct {
	age int64 // whole seconds since stored
	msg *dns.Msg
}

// NewCache returns an empty cache configured with cfg.
func NewCache(cfg CacheConfig) *Cache {
	c := &Cache{seed: maphash.MakeSeed(), clock: newCoarseClock()}
	c.now = c.clock.read
	c.cfg.Store(&cfg)
	c.tab.Store(newTable(cfg.Size))
	return c
}

// Close stops the cache's clock. The cache still answers after Close, at
// the cost of reading the wall clock per query.
func (c *Cache) Close() error {
	c.clock.close()
	return nil
}

// clockTick is the resolution of the cache's clock. Reading the time
// costs 50 ns per query on a VM and serialises the cores; TTLs are whole
// seconds, so the cache reads a clock that its own goroutine refreshes.
const clockTick = 50 * time.Millisecond

// coarseClock is the wall clock in unix nanos, at most clockTick behind.
// Its goroutine starts at the first read and stops at close; a read after
// close reads the wall clock itself.
type coarseClock struct {
	once    sync.Once // start
	closing sync.Once
	now     atomic.Int64 // 0: not started or closed
	stop    chan struct{}
	done    chan struct{}
}

func newCoarseClock() *coarseClock {
	return &coarseClock{stop: make(chan struct{}), done: make(chan struct{})}
}

func (k *coarseClock) read() int64 {
	if v := k.now.Load(); v != 0 {
		return v
	}
	k.once.Do(k.start)
	if v := k.now.Load(); v != 0 {
		return v
	}
	return time.Now().UnixNano()
}

func (k *coarseClock) start() {
	select {
	case <-k.stop:
		close(k.done)
		return // closed before the first read
	default:
	}
	k.now.Store(time.Now().UnixNano())
	go func() {
		defer close(k.done)
		t := time.NewTicker(clockTick)
		defer t.Stop()
		for {
			select {
			case now := <-t.C:
				k.now.Store(now.UnixNano())
			case <-k.stop:
				return
			}
		}
	}()
}

// close stops the goroutine; later reads read the wall clock.
func (k *coarseClock) close() {
	k.closing.Do(func() {
		close(k.stop)
		k.once.Do(k.start) // never started: start sees stop and ends at once
		<-k.done
		k.now.Store(0)
	})
}

func newTable(size int) *table {
	// About 1024 entries per shard, at most 64 shards, a power of two.
	n := 1
	if size > 2048 {
		n = min(64, 1<<bits.Len(uint(size/1024)-1))
	}
	t := &table{shards: make([]shard, n), mask: uint64(n - 1), per: (size + n - 1) / n}
	for i := range t.shards {
		t.shards[i].m = make(map[Key]*entry)
	}
	return t
}

func (t *table) shard(c *Cache, k Key) *shard {
	if t.mask == 0 {
		return &t.shards[0]
	}
	h := maphash.String(c.seed, k.Name) ^ uint64(k.Type)*0x9E3779B97F4A7C15
	return &t.shards[h&t.mask]
}

// Config returns the current configuration.
func (c *Cache) Config() CacheConfig { return *c.cfg.Load() }

// Len is the number of entries held.
func (c *Cache) Len() int { return int(c.n.Load()) }

// Configure applies new settings keeping the entries: a new size
// re-shards (evicting, coldest first, what no longer fits); a lower
// max_ttl or negative_ttl shortens the entries that live longer.
func (c *Cache) Configure(cfg CacheConfig) {
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.cfg.Swap(&cfg)
	if cfg.Size != old.Size {
		ot := c.tab.Load()
		nt := newTable(cfg.Size)
		c.tab.Store(nt)
		now := c.now()
		for i := range ot.shards {
			sh := &ot.shards[i]
			sh.mu.Lock()
			ring := sh.ring
			sh.ring, sh.m, sh.retired = nil, make(map[Key]*entry), true
			sh.mu.Unlock()
			c.n.Add(-int64(len(ring)))
			for _, e := range ring {
				c.put(nt, e, now, false) // an entry inserted meanwhile is newer
			}
		}
	}
	if cfg.MaxTTL < old.MaxTTL || cfg.NegativeTTL < old.NegativeTTL {
		c.each(func(e *entry) bool {
			lim := cfg.MaxTTL
			if e.negative {
				lim = cfg.NegativeTTL
			}
			if e.life.Load() > int64(lim) {
				e.life.Store(int64(lim))
				e.capped.Store(true)
				e.view.Store(nil)
			}
			return true
		})
	}
}

// UpstreamsID is the number of an upstream set (a pool's answersKey) in
// cache keys: the same set gets the same number for the cache's life,
// across reloads; the first set is 1 (0 is a pool made without a cache's
// number, in tests).
func (c *Cache) UpstreamsID(set string) uint32 {
	c.upstreams.Lock()
	defer c.upstreams.Unlock()
	if id, ok := c.upstreams.ids[set]; ok {
		return id
	}
	if c.upstreams.ids == nil {
		c.upstreams.ids = make(map[string]uint32)
	}
	id := uint32(len(c.upstreams.ids) + 1)
	c.upstreams.ids[set] = id
	return id
}

// Retain drops the entries for which keep is false, and those expired
// beyond the serve-stale window.
func (c *Cache) Retain(keep func(Key) bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	stale := int64(c.cfg.Load().ServeStale)
	c.each(func(e *entry) bool { return now < e.expires()+stale && keep(e.key) })
}

// Flush drops every entry whose name is name or below it (name a
// lower-case FQDN; "" or "." drops everything) and returns how many it
// dropped.
func (c *Cache) Flush(name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	c.each(func(e *entry) bool {
		if name == "" || name == "." || pipeline.InZone(e.key.Name, name) {
			n++
			return false
		}
		return true
	})
	return n
}

// each calls f on every entry, removing those for which it returns false.
func (c *Cache) each(f func(*entry) bool) {
	t := c.tab.Load()
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.Lock()
		kept := sh.ring[:0]
		for _, e := range sh.ring {
			if f(e) {
				e.slot = len(kept)
				kept = append(kept, e)
			} else {
				delete(sh.m, e.key)
				e.gone.Store(true)
				c.n.Add(-1)
			}
		}
		clear(sh.ring[len(kept):])
		sh.ring = kept
		if sh.hand >= len(kept) {
			sh.hand = 0
		}
		sh.mu.Unlock()
	}
}

func (e *entry) expires() int64 { return e.stored + e.life.Load() }

// age is e's age at now in whole seconds, as its TTLs count it.
func (e *entry) age(now int64) uint32 { return uint32(max(0, (now-e.stored)/int64(time.Second))) }

// get returns the entry for k (fresh, or expired but within the
// serve-stale window: the caller compares with expires()), counting a
// reference for the eviction clock. Entries expired beyond the window are
// not returned.
func (c *Cache) get(k Key, now int64) *entry {
	e := c.peek(k, now)
	if e != nil {
		e.touch()
	}
	return e
}

// peek is get without counting the reference: for a caller that looks
// at the entry an answer just came from.
func (c *Cache) peek(k Key, now int64) *entry {
	t := c.tab.Load()
	sh := t.shard(c, k)
	sh.mu.RLock()
	e := sh.m[k]
	sh.mu.RUnlock()
	if e == nil || now >= e.expires()+int64(c.cfg.Load().ServeStale) {
		return nil
	}
	return e
}

// touch counts one answer from e: a reference for the eviction clock and
// a hit towards prefetching.
func (e *entry) touch() {
	if r := e.ref.Load(); r < 3 {
		e.ref.Store(r + 1)
	}
	if h := e.hits.Load(); h < 255 {
		e.hits.Store(h + 1)
	}
}

// Get returns the response cached for k if it is fresh, with TTLs
// decremented by its age (tests and callers outside a Source).
func (c *Cache) Get(k Key) (*dns.Msg, bool) {
	now := c.now()
	e := c.get(k, now)
	if e == nil || now >= e.expires() {
		return nil, false
	}
	return e.response(now), true
}

// lifetime returns how long m may be cached (0: not at all) and whether
// it is a negative answer. Positive answers live for their smallest TTL
// clamped to [min_ttl, max_ttl]; NXDOMAIN and NODATA for their SOA's
// TTL or MINIMUM, whichever is lower (RFC 2308 §5), at most negative_ttl
// (min_ttl is for positive answers only: it never keeps a name
// nonexistent longer than its zone says); negative answers without an
// SOA, errors and truncated answers are not cached. A TTL above 2^31-1
// counts as 0 (RFC 2181 §8).
func lifetime(m *dns.Msg, cfg *CacheConfig) (time.Duration, bool) {
	if m.Truncated {
		return 0, false
	}
	switch {
	case m.Rcode == dns.RcodeSuccess && len(m.Answer) > 0:
		ttl := uint32(1<<31 - 1)
		for _, sec := range [][]dns.RR{m.Answer, m.Ns, m.Extra} {
			for _, rr := range sec {
				if rr.Header().Rrtype != dns.TypeOPT { // its TTL is flags (an upstream's EDE rides in one)
					ttl = min(ttl, ttlValue(rr.Header().Ttl))
				}
			}
		}
		d := time.Duration(ttl) * time.Second
		return min(max(d, cfg.MinTTL), cfg.MaxTTL), false
	case m.Rcode == dns.RcodeNameError || m.Rcode == dns.RcodeSuccess:
		for _, rr := range m.Ns {
			if soa, ok := rr.(*dns.SOA); ok {
				d := time.Duration(min(ttlValue(soa.Hdr.Ttl), ttlValue(soa.Minttl))) * time.Second
				return min(d, cfg.NegativeTTL), true
			}
		}
	}
	return 0, false
}

// ttlValue is a TTL as RFC 2181 §8 reads it: one above 2^31-1 is 0.
func ttlValue(ttl uint32) uint32 {
	if ttl > math.MaxInt32 {
		return 0
	}
	return ttl
}

// Insert stores upstream response m for k when it may be cached and
// returns the response to send now. m must be owned by the caller and is
// not written after Insert: its TTLs are first clamped to the cache's
// bounds (positive answers) or set to the negative TTL (negative ones).
func (c *Cache) Insert(k Key, m *dns.Msg) *dns.Msg {
	cfg := c.cfg.Load()
	if cfg.Size <= 0 {
		return m
	}
	life, negative := lifetime(m, cfg)
	secs := uint32(life / time.Second)
	if secs == 0 {
		return m
	}
	for _, sec := range [][]dns.RR{m.Answer, m.Ns, m.Extra} {
		for _, rr := range sec {
			h := rr.Header()
			if h.Rrtype == dns.TypeOPT {
				continue
			}
			if negative {
				h.Ttl = secs
			} else {
				h.Ttl = min(max(ttlValue(h.Ttl), uint32(cfg.MinTTL/time.Second)), uint32(cfg.MaxTTL/time.Second))
			}
		}
	}
	compact(m)
	if len(m.Question) == 1 && m.Question[0].Name == k.Name {
		k.Name = m.Question[0].Name // one string for both
	}
	now := c.now()
	e := &entry{key: k, msg: m, stored: now, negative: negative}
	e.life.Store(int64(life))
	c.put(c.tab.Load(), e, now, true)
	return m
}

// compact lets go of what an empty section still holds: the pool strips
// the upstream's OPT leaving Extra empty but holding its array, and the
// OPT in it.
func compact(m *dns.Msg) {
	if len(m.Answer) == 0 {
		m.Answer = nil
	}
	if len(m.Ns) == 0 {
		m.Ns = nil
	}
	if len(m.Extra) == 0 {
		m.Extra = nil
	}
}

// shareSOA makes a negative answer whose SOA is the same as the last one
// the shard stored (every field, the owner's case and the TTL included)
// hold that one: under a flood of random names in one zone, every entry
// would hold its own copy of the zone's SOA. Cached messages are never
// written, so entries may share records. sh.mu is held and e not yet
// visible.
func (sh *shard) shareSOA(e *entry) {
	if !e.negative {
		return
	}
	for i, rr := range e.msg.Ns {
		soa, ok := rr.(*dns.SOA)
		if !ok {
			continue
		}
		if sh.soa != nil && *sh.soa == *soa {
			e.msg.Ns[i] = sh.soa
		} else {
			sh.soa = soa
		}
		return
	}
}

// put adds e to t, replacing the entry of the same key (or, without
// replace, keeping it) or evicting one.
func (c *Cache) put(t *table, e *entry, now int64, replace bool) {
	for t.per > 0 {
		sh := t.shard(c, e.key)
		sh.mu.Lock()
		if !sh.retired {
			c.putLocked(sh, t.per, e, now, replace)
			sh.mu.Unlock()
			return
		}
		sh.mu.Unlock()
		t = c.tab.Load() // resized meanwhile
	}
	e.gone.Store(true) // a cache of size 0 keeps nothing
}

func (c *Cache) putLocked(sh *shard, per int, e *entry, now int64, replace bool) {
	if replace {
		// A new entry (Insert), not visible yet; an entry put again at
		// a resize is, and its message is never written.
		sh.shareSOA(e)
	}
	if old := sh.m[e.key]; old != nil {
		if !replace {
			e.gone.Store(true) // not kept: the entry there is newer
			return
		}
		old.gone.Store(true)
		e.slot = old.slot
		e.ref.Store(old.ref.Load()) // a refresh keeps its heat
		sh.ring[e.slot] = e
		sh.m[e.key] = e
		return
	}
	if len(sh.ring) < per {
		e.slot = len(sh.ring)
		sh.ring = append(sh.ring, e)
		sh.m[e.key] = e
		c.n.Add(1)
		return
	}
	// CLOCK: a victim is an entry expired beyond serve-stale or one whose
	// reference count is down to 0; others lose one reference.
	stale := int64(c.cfg.Load().ServeStale)
	for {
		if sh.hand >= len(sh.ring) {
			sh.hand = 0
		}
		v := sh.ring[sh.hand]
		if now >= v.expires()+stale || v.ref.Load() == 0 {
			delete(sh.m, v.key)
			v.gone.Store(true)
			e.slot = sh.hand
			sh.ring[sh.hand] = e
			sh.m[e.key] = e
			sh.hand++
			return
		}
		v.ref.Add(^uint32(0))
		sh.hand++
	}
}

// failed records a failed refresh of k's entry (serve-stale recheck).
func (c *Cache) failed(k Key, now int64, recoveries uint64) {
	t := c.tab.Load()
	sh := t.shard(c, k)
	sh.mu.RLock()
	e := sh.m[k]
	sh.mu.RUnlock()
	if e != nil {
		e.failedUp.Store(recoveries)
		e.failedAt.Store(now)
	}
}

// response is e's message with every TTL lowered by its age in whole
// seconds. Responses are shared for one second of age: the records are
// copied once per entry and second, never per query.
func (e *entry) response(now int64) *dns.Msg {
	age := int64(e.age(now))
	if age <= 0 && !e.capped.Load() {
		return e.msg
	}
	if v := e.view.Load(); v != nil && v.age == age {
		return v.msg
	}
	lifeSecs := e.life.Load() / int64(time.Second)
	m := e.render(func(ttl uint32) uint32 {
		return uint32(max(min(int64(ttl), lifeSecs)-age, 0))
	})
	e.view.Store(&snapshot{age: age, msg: m})
	return m
}

// staleResponse is e's message with every TTL StaleTTL (RFC 8767).
func (e *entry) staleResponse() *dns.Msg {
	if m := e.stale.Load(); m != nil {
		return m
	}
	m := e.render(func(uint32) uint32 { return StaleTTL })
	// Extended DNS Error 3, Stale Answer, besides any EDE of the upstream.
	stale := pipeline.EDE(dns.ExtendedErrorCodeStaleAnswer, "forward: upstreams unreachable, answer served stale")
	extra := make([]dns.RR, 0, len(m.Extra)+1)
	for _, rr := range m.Extra {
		if opt, ok := rr.(*dns.OPT); ok {
			stale.Option = append(stale.Option, opt.Option...)
			continue
		}
		extra = append(extra, rr)
	}
	m.Extra = append(extra, stale)
	e.stale.Store(m)
	return m
}

// render copies e.msg with each record's TTL mapped by ttl.
func (e *entry) render(ttl func(uint32) uint32) *dns.Msg {
	m := new(dns.Msg)
	m.MsgHdr = e.msg.MsgHdr
	m.Question = e.msg.Question
	m.Answer = copyRRs(e.msg.Answer, ttl)
	m.Ns = copyRRs(e.msg.Ns, ttl)
	m.Extra = copyRRs(e.msg.Extra, ttl)
	return m
}

func copyRRs(rrs []dns.RR, ttl func(uint32) uint32) []dns.RR {
	if len(rrs) == 0 {
		return nil
	}
	out := make([]dns.RR, len(rrs))
	for i, rr := range rrs {
		c := dns.Copy(rr)
		if h := c.Header(); h.Rrtype != dns.TypeOPT {
			h.Ttl = ttl(h.Ttl)
		}
		out[i] = c
	}
	return out
}
