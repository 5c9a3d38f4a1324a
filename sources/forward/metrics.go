package forward

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the forward kind's and the cache's collectors, one set per
// process, shared by every pool and source.
type Metrics struct {
	requests   *prometheus.CounterVec
	latency    *prometheus.HistogramVec
	hits       prometheus.Counter
	misses     prometheus.Counter
	stale      prometheus.Counter
	prefetches prometheus.Counter
	loops      prometheus.Counter
	busy       prometheus.Counter

	mu    sync.Mutex
	pools map[*Pool]struct{}
}

// NewMetrics creates the collectors and registers them on reg (nil: kept
// but not exported). cache may be nil; its Len is read at every scrape.
func NewMetrics(reg prometheus.Registerer, cache *Cache) *Metrics {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "dnsd_forward_requests_total",
			Help: "Queries sent to upstreams (health and loop probes included), by upstream and response code (\"timeout\" or \"error\" when no response came).",
		}, []string{"upstream", "rcode"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "dnsd_forward_request_duration_seconds",
			Help:    "Time from sending a query to an upstream to its response (one attempt), by upstream.",
			Buckets: []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5},
		}, []string{"upstream"}),
		hits: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "dnsd_cache_hits_total",
			Help: "Forwarded queries answered from the response cache with a fresh entry.",
		}),
		misses: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "dnsd_cache_misses_total",
			Help: "Forwarded queries without a fresh cache entry (sent upstream, or joined an identical query in flight).",
		}),
		stale: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "dnsd_cache_stale_total",
			Help: "Answers served from expired cache entries because the upstreams failed (RFC 8767).",
		}),
		prefetches: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "dnsd_cache_prefetches_total",
			Help: "Background refreshes of popular cache entries before they expire.",
		}),
		loops: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "dnsd_forward_loops_total",
			Help: "Forwarding loops detected (dnsd's own loop probe came back to it); the upstream concerned is no longer used.",
		}),
		busy: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "dnsd_forward_busy_total",
			Help: "Forwarded queries answered REFUSED at once because max_concurrent clients were already waiting on upstreams.",
		}),
		pools: map[*Pool]struct{}{},
	}
	if reg != nil {
		entries := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "dnsd_cache_entries",
			Help: "Entries held in the forward response cache.",
		}, func() float64 {
			if cache == nil {
				return 0
			}
			return float64(cache.Len())
		})
		up := &upCollector{m: m, desc: prometheus.NewDesc("dnsd_forward_upstream_up",
			"1 when an upstream is considered up (not marked down by failures and health checks, not looping), else 0.", []string{"upstream"}, nil)}
		reg.MustRegister(m.requests, m.latency, m.hits, m.misses, m.stale, m.prefetches, m.loops, m.busy, entries, up)
	}
	return m
}

func (m *Metrics) addPool(p *Pool) {
	m.mu.Lock()
	m.pools[p] = struct{}{}
	m.mu.Unlock()
}

func (m *Metrics) removePool(p *Pool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.pools, p)
	inUse := map[string]bool{}
	for other := range m.pools {
		for _, u := range other.ups {
			inUse[u.label] = true
		}
	}
	for _, u := range p.ups {
		if !inUse[u.label] { // series of upstreams nobody uses any more go
			m.requests.DeletePartialMatch(prometheus.Labels{"upstream": u.label})
			m.latency.DeletePartialMatch(prometheus.Labels{"upstream": u.label})
		}
	}
}

// upCollector reports dnsd_forward_upstream_up from the running pools at
// every scrape. An upstream used by several pools is up when any of them
// considers it up.
type upCollector struct {
	m    *Metrics
	desc *prometheus.Desc
}

func (c *upCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *upCollector) Collect(ch chan<- prometheus.Metric) {
	up := map[string]bool{}
	c.m.mu.Lock()
	for p := range c.m.pools {
		for _, u := range p.ups {
			up[u.label] = up[u.label] || u.usable()
		}
	}
	c.m.mu.Unlock()
	for label, ok := range up {
		v := 0.0
		if ok {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, v, label)
	}
}
