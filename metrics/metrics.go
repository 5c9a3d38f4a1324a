// Package metrics defines dnsd's Prometheus metrics (SPEC §6) on a registry
// of its own; nothing is registered globally.
package metrics

import (
	"runtime"
	"strconv"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Metrics holds every collector dnsd exports. Create one per process with
// New and pass it to whoever records.
type Metrics struct {
	Registry *prometheus.Registry

	requests  *prometheus.CounterVec
	responses *prometheus.CounterVec
	duration  *prometheus.HistogramVec
	reloads   *prometheus.CounterVec
	dropped   *prometheus.CounterVec
}

// New creates the collectors and registers them, with the Go and process
// collectors, on a new registry.
func New(version, commit string) *Metrics {
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "dnsd_requests_total",
			Help: "DNS queries received, by matched zone, transport and query type.",
		}, []string{"zone", "proto", "qtype"}),
		responses: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "dnsd_responses_total",
			Help: "DNS responses sent, by matched zone, response code and answering source kind.",
		}, []string{"zone", "rcode", "source"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "dnsd_request_duration_seconds",
			Help:    "Time from a query's arrival to its response, by matched zone.",
			Buckets: []float64{0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5},
		}, []string{"zone"}),
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "dnsd_reload_total",
			Help: "Configuration reloads, by result (success or error).",
		}, []string{"result"}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "dnsd_dropped_total",
			Help: "Queries not answered on purpose, by reason (acl, rate).",
		}, []string{"reason"}),
	}
	build := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "dnsd_build_info",
		Help: "Always 1; labels say which build is running.",
	}, []string{"version", "commit", "goversion"})
	build.WithLabelValues(version, commit, runtime.Version()).Set(1)

	m.Registry.MustRegister(m.requests, m.responses, m.duration, m.reloads, m.dropped, build,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// Both results exist from the start so rate() works from the first reload.
	m.reloads.WithLabelValues("success")
	m.reloads.WithLabelValues("error")
	return m
}

// Query records one answered query.
func (m *Metrics) Query(zone, proto string, qtype uint16, rcode int, source string, d time.Duration) {
	m.requests.WithLabelValues(zone, proto, TypeString(qtype)).Inc()
	m.responses.WithLabelValues(zone, RcodeString(rcode), source).Inc()
	m.duration.WithLabelValues(zone).Observe(d.Seconds())
}

// Dropped records a query that got no response on purpose.
func (m *Metrics) Dropped(reason string) { m.dropped.WithLabelValues(reason).Inc() }

// Reload records a reload's outcome.
func (m *Metrics) Reload(ok bool) {
	if ok {
		m.reloads.WithLabelValues("success").Inc()
	} else {
		m.reloads.WithLabelValues("error").Inc()
	}
}

// SyncedFunc reports, when called, every running source backend by name
// and whether it has finished its first sync.
type SyncedFunc func(yield func(name string, synced bool))

// WatchSynced exports dnsd_source_synced from fn, read at every scrape, so
// backends that come and go with reloads need no bookkeeping here.
func (m *Metrics) WatchSynced(fn SyncedFunc) {
	m.Registry.MustRegister(&syncedCollector{fn: fn, desc: prometheus.NewDesc("dnsd_source_synced",
		"1 when a source backend has finished its first sync, else 0.", []string{"source"}, nil)})
}

type syncedCollector struct {
	fn   SyncedFunc
	desc *prometheus.Desc
}

func (c *syncedCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *syncedCollector) Collect(ch chan<- prometheus.Metric) {
	c.fn(func(name string, synced bool) {
		v := 0.0
		if synced {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, v, name)
	})
}

// TypeString names a query type without allocating for known types.
func TypeString(t uint16) string {
	if s, ok := dns.TypeToString[t]; ok {
		return s
	}
	return "TYPE" + strconv.Itoa(int(t))
}

// RcodeString names a response code without allocating for known codes.
func RcodeString(rc int) string {
	if s, ok := dns.RcodeToString[rc]; ok {
		return s
	}
	return "RCODE" + strconv.Itoa(rc)
}
