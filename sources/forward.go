package sources

import (
	"context"
	"io"
	"net/netip"
	"sync"

	"github.com/dnsd/dnsd/config"
	"github.com/dnsd/dnsd/pipeline"
	"github.com/dnsd/dnsd/sources/forward"
)

// forwardState is the forward kind's process-lifetime state: the response
// cache shared by every forward source (kept across reloads) and the
// kind's metrics, both created on first use.
type forwardState struct {
	mu      sync.Mutex
	cache   *forward.Cache
	metrics *forward.Metrics

	// resolvConf and localAddrs replace /etc/resolv.conf and the
	// interfaces' addresses in tests ("" / nil: the real ones).
	resolvConf string
	localAddrs func() []netip.Addr
}

func (st *forwardState) close() {}

// init returns the cache and metrics, creating them with cfg's cache
// settings on first use.
func (r *Registry) forwardInit(cfg *config.Config) (*forward.Cache, *forward.Metrics) {
	st := &r.forward
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.cache == nil {
		st.cache = forward.NewCache(cacheConfig(cfg.Cache))
		st.metrics = forward.NewMetrics(r.registerer, st.cache)
	}
	return st.cache, st.metrics
}

func cacheConfig(c config.Cache) forward.CacheConfig {
	return forward.CacheConfig{Size: c.Size, MinTTL: c.MinTTL, MaxTTL: c.MaxTTL, NegativeTTL: c.NegativeTTL, ServeStale: c.ServeStale, Prefetch: c.Prefetch}
}

// swapped follows the pipeline now serving: the cache takes cfg's
// settings (keeping its entries) and drops the entries whose names no
// longer reach a forward source that would take them; the new pipeline's
// forward sources start their loop probes.
func (st *forwardState) swapped(cfg *config.Config, p *pipeline.Pipeline) {
	st.mu.Lock()
	cache := st.cache
	st.mu.Unlock()
	if cache == nil {
		return
	}
	cache.Configure(cacheConfig(cfg.Cache))
	cache.Retain(func(k forward.Key) bool {
		return p.Forwards(k.Name, func(s pipeline.Source) bool {
			fs, ok := s.(*forward.Source)
			return !ok || !fs.Excepted(k.Name)
		})
	})
	for _, s := range p.Sources() {
		if fs, ok := s.(*forward.Source); ok {
			fs.CheckLoop()
		}
	}
}

// forwardSource builds a forward source. Pools are keyed on every setting
// except `except` (per zone) with `resolv.conf` expanded, so a change of
// /etc/resolv.conf takes effect at the next reload, and on
// limits.udp_buffer (our EDNS0 size upstream).
func (r *Registry) forwardSource(ctx context.Context, cfg *config.Config, z config.Zone, c *config.Forward, set *Set) (pipeline.Source, error) {
	cache, met := r.forwardInit(cfg)
	ups, dropped, err := forward.Expand(c.Upstreams, forward.ExpandOptions{
		ResolvConf: r.forward.resolvConf,
		Listen:     cfg.Listen,
		LocalAddrs: r.forward.localAddrs,
	})
	if err != nil {
		return nil, err
	}
	if len(dropped) > 0 {
		r.logger.Warn("resolv.conf nameservers that are dnsd's own listen addresses are not used (forwarding loop)", "zone", z.Key, "dropped", dropped)
	}
	opts := forward.PoolOptions{
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
	if r.dryRun {
		if c.TLSCA != "" {
			if _, err := forward.LoadCA(c.TLSCA); err != nil {
				return nil, err
			}
		}
		return forward.NewSource(nil, cache, met, c.Except, zone, cfg.Cache.NegativeTTL), nil
	}
	v, _, err := r.acquire(set, config.KindForward, opts.Key(), func() (any, io.Closer, error) {
		p, err := forward.NewPool(opts, met, r.logger)
		if err != nil {
			return nil, nil, err
		}
		return p, p, nil
	})
	if err != nil {
		return nil, err
	}
	return forward.NewSource(v.(*forward.Pool), cache, met, c.Except, zone, cfg.Cache.NegativeTTL), nil
}

// FlushCache drops the response cache's entries for name and every name
// below it ("" or ".": all of them) and returns how many it dropped.
func (r *Registry) FlushCache(name string) int {
	st := &r.forward
	st.mu.Lock()
	cache := st.cache
	st.mu.Unlock()
	if cache == nil {
		return 0
	}
	return cache.Flush(name)
}
