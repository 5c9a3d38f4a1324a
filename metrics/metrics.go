package metrics

import (
	dto "github.com/prometheus/client_model/go"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/dnsd/dnsd/internal/rcode"
)

// Metrics holds every collector dnsd exports. Create one per process with
// New and pass it to whoever records.
type Metrics struct {
	Registry *prometheus.Registry // set by New, never nil; the zero Metrics is not usable

	requests  *prometheus.CounterVec
	responses *prometheus.CounterVec
	duration  *prometheus.HistogramVec
	reloads   *prometheus.CounterVec
	dropped   *prometheus.CounterVec
	panics    prometheus.Counter
	tcpReject *prometheus.CounterVec
	transfers *prometheus.CounterVec
	notifies  *prometheus.CounterVec
	updates   *prometheus.CounterVec
	updateDur prometheus.Histogram

	// queries caches the children of requests, responses and duration per
	// tuple of Query's arguments (queryKey → *queryChildren): one map read
	// instead of three label hashes and vector lookups. Bounded like the
	// labels themselves (distinct arguments with the same labels share
	// their children); series are deleted only by KeepZones, which drops
	// their cached children with them, so a cached child is the one
	// /metrics reports.
	queries sync.Map
	// recent holds some of the same entries, by where the argument
	// strings are stored and the numbers: the strings a query is recorded
	// with are the configuration's (zone, source and view names) and
	// constants, the same at every query, so finding the entry takes a
	// few comparisons instead of hashing six strings through an interface.
	recent [recentSlots]atomic.Pointer[queryChildren]
}

const recentSlots = 256

// queryKey is the tuple of Query's arguments but the duration, with
// types and response codes that have no name folded into one each (other:
// otherType, otherRcode), so that clients and upstreams cannot grow the
// map.
type queryKey struct {
	view, zone, proto, source string
	qtype                     uint16
	rcode                     int
	other                     uint8
}

const (
	otherType = 1 << iota
	otherRcode
)

type queryChildren struct {
	key                 queryKey
	requests, responses prometheus.Counter
	duration            prometheus.Observer
}

// Label values for queries that matched no zone and for names outside the
// known sets.
const (
	NoZone      = "none"
	Other       = "other"
	DefaultView = "default" // queries of clients no view matched
)

// Reasons of dnsd_dropped_total and of
// dnsd_tcp_connections_rejected_total.
const (
	DropACL       = "acl"       // refused client, acl.drop set
	DropRate      = "rate"      // over rate_per_client, limits.rate_drop set
	DropMalformed = "malformed" // unparseable, or not a query

	RejectTotal  = "total"  // max_tcp_connections reached
	RejectClient = "client" // max_tcp_per_client reached for the client's network
)

// New creates the collectors and registers them, with the Go and process
// collectors, on a new registry.
func New(version, commit string) *Metrics {
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "dnsd_requests_total",
			Help: "DNS queries received, by view, matched zone, transport and query type.",
		}, []string{"view", "zone", "proto", "qtype"}),
		responses: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "dnsd_responses_total",
			Help: "DNS responses sent, by view, matched zone, response code and answering source kind.",
		}, []string{"view", "zone", "rcode", "source"}),
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
			Help: "Queries not answered on purpose, by reason: acl (refused client with acl.drop), rate (over rate_per_client with rate_drop), malformed (unparseable, or not a query).",
		}, []string{"reason"}),
		panics: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "dnsd_panics_total",
			Help: "Panics recovered while answering a query (the client got SERVFAIL).",
		}),
		tcpReject: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "dnsd_tcp_connections_rejected_total",
			Help: "TCP and TLS connections closed at once, by reason: total (max_tcp_connections reached) or client (max_tcp_per_client reached for the client's /24 or /56).",
		}, []string{"reason"}),
		transfers: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "dnsd_transfers_total",
			Help: "Zone transfers (AXFR, IXFR) answered, by zone (a transferred zone, or none) and result: success, refused, notauth (TSIG key or signature wrong), busy (limits.max_transfers were being sent: SERVFAIL) or error (a source could not list, the connection broke, or a stop ended it).",
		}, []string{"zone", "result"}),
		notifies: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "dnsd_notify_total",
			Help: "NOTIFY messages to secondaries, by zone and result: sent (each attempt), acked (the secondary answered) or failed (no answer after every retry, or an error answer).",
		}, []string{"zone", "result"}),
		updates: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "dnsd_updates_total",
			Help: "Dynamic updates (RFC 2136) answered, by zone (a served zone, or none) and result: ok (applied, or nothing to change), refused (policy, a read-only source's data, a bound), notauth (zone not served, TSIG key or signature wrong), prereq (a prerequisite failed) or error (malformed, or the store failed).",
		}, []string{"zone", "result"}),
		updateDur: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "dnsd_update_duration_seconds",
			Help:    "Time from an UPDATE's arrival to its answer, for updates that changed a zone (checks, the durable commit and publication).",
			Buckets: []float64{0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 2.5},
		}),
	}
	build := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "dnsd_build_info",
		Help: "Always 1; labels say which build is running.",
	}, []string{"version", "commit", "goversion"})
	build.WithLabelValues(version, commit, runtime.Version()).Set(1)

	m.Registry.MustRegister(m.requests, m.responses, m.duration, m.reloads, m.dropped, m.panics, m.tcpReject, m.transfers, m.notifies, m.updates, m.updateDur, build,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// Both results exist from the start so rate() works from the first reload.
	m.reloads.WithLabelValues("success")
	m.reloads.WithLabelValues("error")
	for _, r := range []string{DropACL, DropRate, DropMalformed} {
		m.dropped.WithLabelValues(r)
	}
	m.tcpReject.WithLabelValues(RejectTotal)
	m.tcpReject.WithLabelValues(RejectClient)
	return m
}

// Query records one answered query. view is a configured view or ""
// (none: "default"), zone a configured zone or "" (none matched); proto
// and source come from dnsd's own fixed sets.
func (m *Metrics) Query(view, zone, proto string, qtype uint16, rcode int, source string, d time.Duration) {
	slot := &m.recent[recentSlot(view, zone, proto, source, qtype, rcode)]
	c := slot.Load()
	if c == nil || c.key.zone != zone || c.key.source != source || c.key.qtype != qtype || c.key.rcode != rcode ||
		c.key.proto != proto || c.key.view != view {
		k := queryKey{view: view, zone: zone, proto: proto, source: source, qtype: qtype, rcode: rcode}
		if c = m.children(k); c.key == k {
			slot.Store(c) // not an entry folded for other types or codes
		}
	}
	c.requests.Inc()
	c.responses.Inc()
	c.duration.Observe(d.Seconds())
}

// children returns the series of k's labels, made the first time.
func (m *Metrics) children(k queryKey) *queryChildren {
	if !knownType(k.qtype) {
		k.qtype, k.other = 0, k.other|otherType
	}
	if _, ok := dns.RcodeToString[k.rcode]; !ok {
		k.rcode, k.other = 0, k.other|otherRcode
	}
	if v, ok := m.queries.Load(k); ok {
		return v.(*queryChildren)
	}
	zone, view, qtype, rcode := ZoneLabel(k.zone), ViewLabel(k.view), TypeLabel(k.qtype), rcode.Label(k.rcode)
	if k.other&otherType != 0 {
		qtype = Other
	}
	if k.other&otherRcode != 0 {
		rcode = Other
	}
	c := &queryChildren{
		key:       k,
		requests:  m.requests.WithLabelValues(view, zone, k.proto, qtype),
		responses: m.responses.WithLabelValues(view, zone, rcode, k.source),
		duration:  m.duration.WithLabelValues(zone),
	}
	v, _ := m.queries.LoadOrStore(k, c)
	return v.(*queryChildren)
}

// KeepZones deletes the query series (dnsd_requests_total,
// dnsd_responses_total, dnsd_request_duration_seconds) of zones and views
// that the configuration no longer has, and the transfer and NOTIFY
// series of zones it no longer has: after a reload, /metrics shows what
// is configured (and what was counted for it), not every zone ever
// served. keep reports whether a view ("" for none) and zone pair is
// still configured, zone "" (queries no zone matched: "none") whether the
// view is; zone reports whether a zone is, in any view. Call it once the old
// configuration has stopped answering: a query it answers later makes
// its series again.
func (m *Metrics) KeepZones(keep func(view, zone string) bool, zone func(string) bool) {
	gone := map[[2]string]bool{}
	m.queries.Range(func(k, v any) bool {
		q := k.(queryKey)
		if keep(q.view, q.zone) {
			return true
		}
		gone[[2]string{q.view, q.zone}] = true
		m.queries.Delete(k)
		return true
	})
	// Transfers and NOTIFYs of zones no longer configured, queried or not.
	for _, vec := range []*prometheus.CounterVec{m.transfers, m.notifies, m.updates} {
		for _, z := range zoneLabels(vec) {
			if z != NoZone && !zone(z) {
				vec.DeletePartialMatch(prometheus.Labels{"zone": z})
			}
		}
	}
	if len(gone) == 0 {
		return
	}
	for i := range m.recent {
		if c := m.recent[i].Load(); c != nil && gone[[2]string{c.key.view, c.key.zone}] {
			m.recent[i].CompareAndSwap(c, nil)
		}
	}
	for vz := range gone {
		if vz[1] == "" {
			l := prometheus.Labels{"view": ViewLabel(vz[0]), "zone": NoZone}
			m.requests.DeletePartialMatch(l)
			m.responses.DeletePartialMatch(l)
			continue // the duration series of "none" is every view's
		}
		l := prometheus.Labels{"view": ViewLabel(vz[0]), "zone": vz[1]}
		m.requests.DeletePartialMatch(l)
		m.responses.DeletePartialMatch(l)
		if !zone(vz[1]) {
			m.duration.DeletePartialMatch(prometheus.Labels{"zone": vz[1]})
		}
	}
}

// zoneLabels lists the values of the zone label among vec's series.
func zoneLabels(vec *prometheus.CounterVec) []string {
	ch := make(chan prometheus.Metric)
	go func() { vec.Collect(ch); close(ch) }()
	var zones []string
	for mt := range ch {
		var d dto.Metric
		if mt.Write(&d) != nil {
			continue
		}
		for _, l := range d.GetLabel() {
			if l.GetName() == "zone" && !slices.Contains(zones, l.GetValue()) {
				zones = append(zones, l.GetValue())
			}
		}
	}
	return zones
}

// recentSlot places a tuple of Query's arguments in recent: by the
// addresses of the strings' bytes (compared, not read: equal strings
// stored apart only take different slots) and the numbers.
func recentSlot(view, zone, proto, source string, qtype uint16, rcode int) uint {
	h := uint64(uintptr(unsafe.Pointer(unsafe.StringData(zone))))
	h = h*31 + uint64(uintptr(unsafe.Pointer(unsafe.StringData(source))))
	h = h*31 + uint64(uintptr(unsafe.Pointer(unsafe.StringData(proto))))
	h = h*31 + uint64(uintptr(unsafe.Pointer(unsafe.StringData(view))))
	h = h*31 + uint64(qtype)<<8 + uint64(rcode)
	return uint((h * 0x9e3779b97f4a7c15) >> 56) // the top 8 bits: recentSlots
}

// Dropped records a query that got no response on purpose; reason is one
// of DropACL, DropRate, DropMalformed.
func (m *Metrics) Dropped(reason string) { m.dropped.WithLabelValues(reason).Inc() }

// Panic records a panic recovered while answering a query.
func (m *Metrics) Panic() { m.panics.Inc() }

// TCPRejected records a connection closed at once; reason is RejectTotal
// or RejectClient.
func (m *Metrics) TCPRejected(reason string) { m.tcpReject.WithLabelValues(reason).Inc() }

// Transfer records one zone transfer; zone is a transferred zone or ""
// (none), result one of the server's Transfer* results.
func (m *Metrics) Transfer(zone, result string) {
	m.transfers.WithLabelValues(ZoneLabel(zone), result).Inc()
}

// Update records one answered UPDATE; zone is a served zone or ""
// (none), result one of authority's Update* results. d, the time to
// its answer, is observed for updates that changed the zone.
func (m *Metrics) Update(zone, result string, changed bool, d time.Duration) {
	m.updates.WithLabelValues(ZoneLabel(zone), result).Inc()
	if changed {
		m.updateDur.Observe(d.Seconds())
	}
}

// Transferred makes the transfer series of zone, one per result, at 0
// if they are not there: a zone's counters exist from the moment it is
// configured for transfers, so that increase() and alerts that compare
// results (a success that never came) see every result, not only the
// ones that happened. KeepZones removes them with the zone.
func (m *Metrics) Transferred(zone string, results ...string) {
	for _, r := range results {
		m.transfers.WithLabelValues(ZoneLabel(zone), r)
	}
}

// Notified is Transferred for the NOTIFY series of a zone that has
// secondaries to notify.
func (m *Metrics) Notified(zone string, results ...string) {
	for _, r := range results {
		m.notifies.WithLabelValues(zone, r)
	}
}

// Notify records one NOTIFY event of a transferred zone; result is one
// of authority's Notify* results ("sent", "acked", "failed").
func (m *Metrics) Notify(zone, result string) { m.notifies.WithLabelValues(zone, result).Inc() }

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

// ZoneLabel is a zone's label value: the zone's name (lower case, with
// the trailing dot), NoZone for none ("").
func ZoneLabel(zone string) string {
	if zone == "" {
		return NoZone
	}
	return zone
}

// ViewLabel is a view's label value: its name, DefaultView for none ("").
func ViewLabel(view string) string {
	if view == "" {
		return DefaultView
	}
	return view
}

// TypeLabel is a query type's metric label: its name when dnsd knows it
// (miekg/dns's table, a fixed set), else "other", so that clients cannot
// create label values.
func TypeLabel(t uint16) string {
	if knownType(t) {
		return dns.TypeToString[t]
	}
	return Other
}

// knownType reports whether t is a type dnsd knows by name: miekg/dns's
// table without its names for the values that are no type, 0 ("None",
// also a message without a question) and 65535 ("Reserved").
func knownType(t uint16) bool {
	if t == dns.TypeNone || t == dns.TypeReserved {
		return false
	}
	_, ok := dns.TypeToString[t]
	return ok
}

// TypeString names a query type without allocating for known types (for
// logs: unknown types are TYPEn as in zone files).
func TypeString(t uint16) string {
	if knownType(t) {
		return dns.TypeToString[t]
	}
	return "TYPE" + strconv.Itoa(int(t))
}

// RcodeString names a response code without allocating for known codes
// (for logs: unknown codes are RCODEn).
func RcodeString(rc int) string {
	if rc == dns.RcodeBadVers {
		return "BADVERS"
	}
	if s, ok := dns.RcodeToString[rc]; ok {
		return s
	}
	return "RCODE" + strconv.Itoa(rc)
}
