package kubernetes

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the kubernetes kind's collectors, shared by every backend
// and source of a process.
type Metrics struct {
	events  *prometheus.CounterVec
	latency prometheus.Histogram
}

// NewMetrics creates the collectors (not registered).
func NewMetrics() *Metrics {
	return &Metrics{
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "dnsd_kubernetes_events_total",
			Help: "Watch events received from the Kubernetes API, by resource and type (add, update, delete).",
		}, []string{"resource", "type"}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "dnsd_kubernetes_programming_latency_seconds",
			Help:    "DNS programming latency: from an object's change (an endpoint slice's last-change-trigger-time, else the watch event's arrival) to its records being served.",
			Buckets: []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5},
		}),
	}
}

// Collectors returns every collector, for registration.
func (m *Metrics) Collectors() []prometheus.Collector {
	return []prometheus.Collector{m.events, m.latency}
}
