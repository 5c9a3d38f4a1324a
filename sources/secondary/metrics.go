package secondary

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// Transfer results (the result label of dnsd_secondary_transfers_total).
const (
	resultOK       = "ok"
	resultRefused  = "refused"
	resultNotAuth  = "notauth"
	resultError    = "error"
	resultTimeout  = "timeout"
	typeAXFR       = "axfr"
	typeIXFR       = "ixfr"
	metricTransfer = "dnsd_secondary_transfers_total"
)

// Metrics are the secondary kind's collectors, shared by its backends and
// labelled by zone (a configured zone).
type Metrics struct {
	transfers *prometheus.CounterVec
	serial    *prometheus.GaugeVec

	mu   sync.Mutex
	refs map[string]int // backends running per zone
}

// NewMetrics creates the collectors (unregistered).
func NewMetrics() *Metrics {
	return &Metrics{
		refs: make(map[string]int),
		transfers: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: metricTransfer,
			Help: "Zone transfers from a primary, by zone, type (axfr, ixfr) and result (ok, refused, notauth, error, timeout).",
		}, []string{"zone", "type", "result"}),
		serial: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "dnsd_secondary_serial",
			Help: "SOA serial of the copy a secondary zone serves.",
		}, []string{"zone"}),
	}
}

// Collectors returns every collector, for registration.
func (m *Metrics) Collectors() []prometheus.Collector {
	return []prometheus.Collector{m.transfers, m.serial}
}

// hold counts a running backend of zone (two run side by side while a
// reload replaces one).
func (m *Metrics) hold(zone string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.refs[zone]++
}

// release drops what hold counted; the last backend of a zone takes its
// series with it.
func (m *Metrics) release(zone string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.refs[zone]--; m.refs[zone] > 0 {
		return
	}
	delete(m.refs, zone)
	m.serial.DeleteLabelValues(zone)
	m.transfers.DeletePartialMatch(prometheus.Labels{"zone": zone})
}
