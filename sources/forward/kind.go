package forward

import (
	"context"
	"io"
	"sync"

	"github.com/dnsd/dnsd/config"
	"github.com/dnsd/dnsd/pipeline"
	"github.com/dnsd/dnsd/sources/kind"
)

// Name is the forward kind's name: its key in a zone's source list.
const Name = "forward"

// Kind is the forward source kind. It holds the kind's process-lifetime
// state: the response cache shared by every forward source (kept across
// reloads) and the kind's metrics, both created by the first build, and
// the loop probes in flight.
type Kind struct {
	settings *config.Settings
	cacheSet *config.Settings // the cache block
	mu       sync.Mutex
	cache    *Cache
	metrics  *Metrics
	probes   *LoopProbes // loop probes of every pool
}

var (
	_ kind.Kind         = (*Kind)(nil)
	_ kind.Preparer     = (*Kind)(nil)
	_ kind.Swapper      = (*Kind)(nil)
	_ kind.CacheFlusher = (*Kind)(nil)
	_ io.Closer         = (*Kind)(nil)
	_ config.BlockOwner = (*Kind)(nil)
)

// NewKind returns the forward kind.
func NewKind() *Kind {
	return &Kind{settings: describe(), cacheSet: describeCache(), probes: NewLoopProbes()}
}

// Name implements config.KindParser.
func (*Kind) Name() string { return Name }

// DefaultFallthrough implements config.KindParser.
func (*Kind) DefaultFallthrough() bool { return true }

// Settings implements config.KindParser.
func (k *Kind) Settings() *config.Settings { return k.settings }

// Block implements config.BlockOwner: the top-level cache block.
func (k *Kind) Block() (string, *config.Settings) { return CacheKey, k.cacheSet }

// cacheConfig is cfg's cache block.
func cacheConfig(cfg *config.Config) CacheConfig {
	return *cfg.Blocks[CacheKey].(*CacheConfig)
}

// Prepare implements kind.Preparer: the cache and its metrics exist from
// the first build, forward source or not (docs/operations.md lists
// dnsd_cache_* among the metrics /metrics always has, and a reload that
// adds a forward source finds the cache ready).
func (k *Kind) Prepare(env *kind.Env) { k.cacheAndMetrics(env) }

// cacheAndMetrics returns the cache and metrics, creating them with the config's
// cache settings on first use.
func (k *Kind) cacheAndMetrics(env *kind.Env) (*Cache, *Metrics) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.cache == nil {
		k.cache = NewCache(cacheConfig(env.Config))
		k.metrics = NewMetrics(env.Registerer, k.cache)
	}
	return k.cache, k.metrics
}

// built returns the cache, nil before the first build.
func (k *Kind) built() *Cache {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.cache
}

// Swapped implements kind.Swapper: the cache takes cfg's settings
// (keeping its entries) and drops the entries whose names no longer reach
// a forward source that would take them; the new pipeline's forward
// sources start their loop probes.
func (k *Kind) Swapped(cfg *config.Config, p *pipeline.Pipeline) {
	cache := k.built()
	if cache == nil {
		return
	}
	cache.Configure(cacheConfig(cfg))
	cache.Retain(func(key Key) bool {
		return p.Forwards(key.Name, func(s pipeline.Source) bool {
			fs, ok := s.(*Source)
			return !ok || !fs.Excepted(key.Name)
		})
	})
	for _, s := range p.Sources() {
		if fs, ok := s.(*Source); ok {
			fs.CheckLoop()
		}
	}
}

// FlushCache implements kind.CacheFlusher.
func (k *Kind) FlushCache(name string) int {
	cache := k.built()
	if cache == nil {
		return 0
	}
	return cache.Flush(name)
}

// Close stops the cache's clock (process exit).
func (k *Kind) Close() error {
	cache := k.built()
	if cache == nil {
		return nil
	}
	return cache.Close()
}

// Build implements kind.Kind. Pools are keyed on every setting except
// `except` (per zone) with `resolv.conf` expanded, so a change of
// /etc/resolv.conf takes effect at the next reload, and on
// limits.udp_buffer (our EDNS0 size upstream).
func (k *Kind) Build(_ context.Context, env *kind.Env, z config.Zone, settings any) (pipeline.Source, error) {
	c := settings.(*Config)
	cfg := env.Config
	cache, met := k.cacheAndMetrics(env)
	ups, dropped, err := Expand(c.Upstreams, ExpandOptions{Listen: cfg.Listen})
	if err != nil {
		return nil, err
	}
	if len(dropped) > 0 {
		env.Logger.Warn("resolv.conf nameservers that are dnsd's own listen addresses are not used (forwarding loop)", "zone", z.Key, "dropped", dropped)
	}
	opts := PoolOptions{
		Upstreams:     ups,
		TLSCA:         c.TLSCA,
		Policy:        c.Policy,
		Timeout:       c.Timeout,
		HealthCheck:   c.HealthCheck,
		MaxFails:      c.MaxFails,
		MaxConcurrent: c.MaxConcurrent,
		UDPSize:       cfg.Limits.UDPBuffer,
	}
	zone := "."
	if len(z.Names) > 0 {
		zone = z.Names[0]
	}
	if env.DryRun {
		if c.TLSCA != "" {
			if _, err := LoadCA(c.TLSCA); err != nil {
				return nil, err
			}
		}
		return NewSource(nil, cache, met, c.Except, zone, cacheConfig(cfg).NegativeTTL), nil
	}
	if c.TLSCA != "" {
		opts.TLSCASum = CASum(c.TLSCA) // a rewritten CA file makes a new pool
	}
	v, _, err := env.Acquire(opts.Key(), func() (any, io.Closer, error) {
		p, err := NewPool(opts, met, k.probes, env.Logger)
		if err != nil {
			return nil, nil, err
		}
		p.answers = cache.UpstreamsID(opts.answersKey())
		return p, p, nil
	})
	if err != nil {
		return nil, err
	}
	return NewSource(v.(*Pool), cache, met, c.Except, zone, cacheConfig(cfg).NegativeTTL), nil
}
