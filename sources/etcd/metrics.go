package etcd

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the etcd source's Prometheus collectors, shared by every
// backend of a process and labelled by backend (its endpoints and
// prefix, never credentials).
type Metrics struct {
	up        *prometheus.GaugeVec
	records   *prometheus.GaugeVec
	events    *prometheus.CounterVec
	relists   *prometheus.CounterVec
	malformed *prometheus.CounterVec

	mu   sync.Mutex
	refs map[string]int // backends running per label
}

// NewMetrics creates the collectors (unregistered).
func NewMetrics() *Metrics {
	return &Metrics{
		refs: make(map[string]int),
		up: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "dnsd_etcd_up",
			Help: "1 while the backend's connection to etcd is up; 0 while etcd is unreachable (after the first sync the last data keeps being served).",
		}, []string{"backend"}),
		records: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "dnsd_etcd_records",
			Help: "DNS records the backend holds.",
		}, []string{"backend"}),
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "dnsd_etcd_events_total",
			Help: "etcd watch events applied, by type (put, delete).",
		}, []string{"backend", "type"}),
		relists: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "dnsd_etcd_relists_total",
			Help: "Full reads of the prefix, by reason (start; compacted; cluster_changed, revision_back, history_changed: etcd came back as another).",
		}, []string{"backend", "reason"}),
		malformed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "dnsd_etcd_malformed_total",
			Help: "Keys or values skipped as malformed (bad key, bad JSON, bad IP, unknown field, ...), counted once per key revision.",
		}, []string{"backend"}),
	}
}

// Collectors returns every collector, for registration.
func (m *Metrics) Collectors() []prometheus.Collector {
	return []prometheus.Collector{m.up, m.records, m.events, m.relists, m.malformed}
}

// hold counts a running backend with this label (two backends with the
// same endpoints and prefix but other settings run side by side during a
// reload).
func (m *Metrics) hold(backend string) {
	m.mu.Lock()
	m.refs[backend]++
	m.mu.Unlock()
}

// forget drops a stopped backend's series once no backend has its label.
func (m *Metrics) forget(backend string) {
	m.mu.Lock()
	m.refs[backend]--
	last := m.refs[backend] <= 0
	if last {
		delete(m.refs, backend)
	}
	m.mu.Unlock()
	if !last {
		return
	}
	m.up.DeleteLabelValues(backend)
	m.records.DeleteLabelValues(backend)
	m.events.DeletePartialMatch(prometheus.Labels{"backend": backend})
	m.relists.DeletePartialMatch(prometheus.Labels{"backend": backend})
	m.malformed.DeleteLabelValues(backend)
}
