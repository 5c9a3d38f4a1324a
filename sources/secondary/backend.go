package secondary

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"

	"github.com/dnsd/dnsd/internal/health"
	"github.com/dnsd/dnsd/pipeline"
	"github.com/dnsd/dnsd/sources/file"
)

// Timers besides the SOA's.
const (
	// timerFloor is the shortest refresh and retry, whatever the SOA says.
	timerFloor = time.Second
	// firstRetry is how often a zone with no copy yet is asked for one.
	firstRetry = 5 * time.Second
)

// held is what readers see: the copy being served.
type held struct {
	src    *file.Source
	serial uint32 // Source.Serial: dnsd's clock, rises with every copy
}

// Backend keeps one zone's copy: it loads the saved copy, then refreshes
// it from the primaries in its goroutine (see run) and publishes each
// new copy with one atomic store.
type Backend struct {
	cfg     *Config
	log     *slog.Logger
	serials *pipeline.SerialClock
	metrics *Metrics
	health  *health.Tracker
	cl      client

	cur     atomic.Pointer[held]
	expired atomic.Bool
	// expiredSince: when the copy expired (readers: Problem).
	expiredAt atomic.Pointer[time.Time]
	loaded    chan struct{} // closed once a copy is served
	loadOnce  sync.Once
	notify    chan struct{} // a NOTIFY asks for a refresh now

	cancel    context.CancelFunc
	done      chan struct{}
	closeOnce sync.Once

	// The run goroutine's own.
	copy    *copyOf
	meta    meta
	saveErr string // the save error logged last
}

// Open starts the backend of c: its saved copy (if any and good) is
// served at once, and a refresh from the primaries begins.
func Open(c *Config, logger *slog.Logger, serials *pipeline.SerialClock, m *Metrics) (*Backend, error) {
	return open(c, logger, serials, m, readTimeout)
}

// open is Open with wait bounding the wait for each transfer message.
func open(c *Config, logger *slog.Logger, serials *pipeline.SerialClock, m *Metrics, wait time.Duration) (*Backend, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if m == nil {
		m = NewMetrics()
	}
	log := logger.With("source", "secondary", "zone", c.Zone)
	b := &Backend{
		cfg: c, log: log, serials: serials, metrics: m, health: health.New(log),
		cl:     client{zone: c.Zone, key: c.Key, wait: wait},
		loaded: make(chan struct{}), notify: make(chan struct{}, 1), done: make(chan struct{}),
	}
	m.hold(c.Zone)
	b.loadSaved()
	ctx, cancel := context.WithCancel(context.Background())
	b.cancel = cancel
	go b.run(ctx)
	return b, nil
}

// Close stops the refreshes and waits for the one running. Idempotent.
func (b *Backend) Close() error {
	b.closeOnce.Do(func() {
		b.cancel()
		<-b.done
		b.metrics.release(b.cfg.Zone)
	})
	return nil
}

// loadSaved serves the copy state_dir holds, unless it cannot be used.
func (b *Backend) loadSaved() {
	s, err := load(b.cfg.StateDir, b.cfg.Zone)
	if errors.Is(err, errNoCopy) {
		b.log.Info("no saved copy of the zone; transferring it")
		return
	}
	if err != nil {
		b.log.Warn("saved copy of the zone ignored; transferring it anew", "error", err)
		return
	}
	b.copy, b.meta = &copyOf{soa: s.soa, rrs: s.rrs}, s.meta
	b.publish()
	if !time.Now().Before(s.meta.Expires) {
		b.expire()
	}
	b.log.Info("serving the saved copy of the zone", "serial", s.meta.Serial, "records", len(s.rrs), "refreshed", s.meta.Refreshed, "expires", s.meta.Expires)
}

// publish serves b.copy.
func (b *Backend) publish() {
	c := b.copy
	rrs := make([]dns.RR, 0, len(c.rrs)+1)
	rrs = append(append(rrs, c.soa), c.rrs...)
	src, outside := file.NewRecordsSource(rrs, []string{b.cfg.Zone}, b.serials.Next())
	if outside > 0 {
		b.log.Warn("records of the transfer outside the zone are ignored", "records", outside)
	}
	b.cur.Store(&held{src: src, serial: src.Serial()})
	b.metrics.serial.WithLabelValues(b.cfg.Zone).Set(float64(c.soa.Serial))
	b.loadOnce.Do(func() { close(b.loaded) })
}

// expire stops serving the copy (SERVFAIL) once expire has passed since
// the last refresh.
func (b *Backend) expire() {
	if b.expired.Swap(true) {
		return
	}
	now := time.Now()
	b.expiredAt.Store(&now)
	b.log.Error("zone expired: no primary reached since the last refresh; it answers SERVFAIL until one is",
		"refreshed", b.meta.Refreshed, "expire", time.Duration(b.copy.soa.Expire)*time.Second)
}

// Notify asks for a refresh now (a NOTIFY came from a primary).
func (b *Backend) Notify() {
	select {
	case b.notify <- struct{}{}:
	default: // one is pending already
	}
}

// run refreshes the copy: at once, then every SOA refresh after a
// success, every SOA retry after a failure, and at once on a NOTIFY; it
// expires the copy when its expire passes without a refresh.
func (b *Backend) run(ctx context.Context) {
	defer close(b.done)
	timer := time.NewTimer(0)
	defer timer.Stop()
	next := time.Now()
	for {
		if now := time.Now(); !now.Before(next) {
			ok := b.refresh(ctx)
			if ctx.Err() != nil {
				return
			}
			next = time.Now().Add(b.interval(ok))
		}
		wait := time.Until(next)
		if b.copy != nil && !b.expired.Load() {
			if e := time.Until(b.meta.Expires); e <= 0 {
				b.expire()
			} else {
				wait = min(wait, e)
			}
		}
		timer.Reset(max(wait, 0))
		select {
		case <-ctx.Done():
			return
		case <-b.notify:
			next = time.Now()
		case <-timer.C:
		}
	}
}

// interval is the wait before the next refresh: the SOA's refresh after
// a success, its retry after a failure (floor 1 s), firstRetry while
// there is no copy.
func (b *Backend) interval(ok bool) time.Duration {
	if b.copy == nil {
		return firstRetry
	}
	s := b.copy.soa.Retry
	if ok {
		s = b.copy.soa.Refresh
	}
	return max(time.Duration(s)*time.Second, timerFloor)
}

// refresh brings the copy up to date from the first primary that
// answers; the next is asked only when one fails. It reports whether one
// did.
func (b *Backend) refresh(ctx context.Context) bool {
	var causes []string
	for _, p := range b.cfg.Primaries {
		err := b.refreshFrom(ctx, p)
		if ctx.Err() != nil {
			return false
		}
		if err == nil {
			b.health.Recover("zone refreshed from a primary again", "primary", p.String())
			return true
		}
		causes = append(causes, err.Error())
	}
	what := "zone not refreshed from any primary; the last good copy is served"
	if b.copy == nil {
		what = "zone not transferred from any primary; it answers SERVFAIL until it is"
	}
	b.health.Fail(what, strings.Join(causes, "; "))
	return false
}

// refreshFrom refreshes the copy from primary: a SOA query, then an IXFR
// (or AXFR) when the primary's serial is above the copy's.
func (b *Backend) refreshFrom(ctx context.Context, p netip.AddrPort) error {
	if b.copy == nil {
		return b.axfr(ctx, p)
	}
	serial, err := b.cl.serial(ctx, p)
	if err != nil {
		return err
	}
	switch have := b.copy.soa.Serial; {
	case serial == have:
		b.confirmed(p)
		return nil
	case pipeline.SerialLess(serial, have):
		return fmt.Errorf("%s: the primary's serial %d is below the copy's %d (RFC 1982); the copy is kept", p, serial, have)
	}
	err = b.ixfr(ctx, p)
	if err == nil || ctx.Err() != nil || resultOf(err) == resultTimeout {
		return err
	}
	b.log.Info("IXFR failed, asking for AXFR", "primary", p.String(), "error", err)
	return b.axfr(ctx, p)
}

// confirmed records a refresh that found the copy current.
func (b *Backend) confirmed(p netip.AddrPort) {
	b.stamp(p)
	b.save(false)
}

// stamp sets the copy's refresh time and expire deadline to now, and
// serves it again if it had expired.
func (b *Backend) stamp(p netip.AddrPort) {
	now := time.Now()
	b.meta = meta{Zone: b.cfg.Zone, Serial: b.copy.soa.Serial, Primary: p.String(), Refreshed: now,
		Expires: now.Add(time.Duration(b.copy.soa.Expire) * time.Second)}
	if b.expired.Swap(false) {
		b.log.Info("zone refreshed after it expired; its copy is served again", "primary", p.String())
	}
}

// save writes the copy (all: the records too) to state_dir; errors are
// logged once per change.
func (b *Backend) save(all bool) {
	var err error
	if all {
		err = saveZone(b.cfg.StateDir, b.copy.soa, b.copy.rrs, b.meta)
	} else {
		err = saveMeta(b.cfg.StateDir, b.meta)
	}
	switch {
	case err != nil && err.Error() != b.saveErr:
		b.saveErr = err.Error()
		b.log.Error("the copy of the zone could not be saved; a restart transfers it anew", "error", err)
	case err == nil && b.saveErr != "":
		b.saveErr = ""
		b.log.Info("the copy of the zone is saved again")
	}
}

// axfr transfers the whole zone from p and serves it.
func (b *Backend) axfr(ctx context.Context, p netip.AddrPort) error {
	rrs, err := b.cl.transfer(ctx, p, nil)
	if err == nil {
		var c *copyOf
		if c, err = fromAXFR(rrs); err == nil {
			err = b.install(p, c, typeAXFR)
		} else {
			err = fail(resultError, "AXFR from %s: %v", p, err)
		}
	}
	if err != nil {
		b.count(typeAXFR, err)
	}
	return err
}

// ixfr brings the copy to the primary's serial by IXFR from p.
func (b *Backend) ixfr(ctx context.Context, p netip.AddrPort) error {
	err := b.ixfrApply(ctx, p)
	if err != nil {
		b.count(typeIXFR, err)
	}
	return err
}

func (b *Backend) ixfrApply(ctx context.Context, p netip.AddrPort) error {
	rrs, err := b.cl.transfer(ctx, p, b.copy.soa)
	if err != nil {
		return err
	}
	newest := rrs[0].(*dns.SOA)
	if len(rrs) == 1 {
		if newest.Serial == b.copy.soa.Serial {
			b.count(typeIXFR, nil)
			b.confirmed(p)
			return nil
		}
		return fail(resultError, "IXFR from %s: a lone SOA of serial %d (the primary cannot answer IXFR)", p, newest.Serial)
	}
	var c *copyOf
	if _, second := rrs[1].(*dns.SOA); second && len(rrs) > 2 && rrs[1].(*dns.SOA).Serial != newest.Serial {
		c, err = fromIXFR(b.copy, rrs)
	} else {
		c, err = fromAXFR(rrs) // AXFR-form: it replaces the zone
	}
	if err != nil {
		return fail(resultError, "IXFR from %s: %v", p, err)
	}
	return b.install(p, c, typeIXFR)
}

// install serves c, a whole transfer from p, unless its serial is not
// above the copy's.
func (b *Backend) install(p netip.AddrPort, c *copyOf, typ string) error {
	if b.copy != nil && !pipeline.SerialLess(b.copy.soa.Serial, c.soa.Serial) {
		return fail(resultError, "%s from %s: serial %d is not above the copy's %d (RFC 1982); the copy is kept", strings.ToUpper(typ), p, c.soa.Serial, b.copy.soa.Serial)
	}
	was := uint32(0)
	if b.copy != nil {
		was = b.copy.soa.Serial
	}
	b.copy = c
	b.stamp(p)
	b.count(typ, nil) // counted before it is served
	b.publish()
	b.save(true)
	b.log.Info("zone transferred", "type", typ, "primary", p.String(), "serial", c.soa.Serial, "was", was, "records", len(c.rrs))
	return nil
}

// count counts a transfer in dnsd_secondary_transfers_total.
func (b *Backend) count(typ string, err error) {
	res := resultOK
	if err != nil {
		res = resultOf(err)
	}
	b.metrics.transfers.WithLabelValues(b.cfg.Zone, typ, res).Inc()
}

// Synced implements pipeline.Syncer: a copy is served (and has not
// expired).
func (b *Backend) Synced() bool { return b.cur.Load() != nil && !b.expired.Load() }

// WaitSynced implements pipeline.Syncer: it waits for the first copy.
func (b *Backend) WaitSynced(ctx context.Context) error {
	select {
	case <-b.loaded:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Problem says why the zone cannot be refreshed now ("" when it can).
func (b *Backend) Problem() string {
	p := b.health.Problem()
	if at := b.expiredAt.Load(); at != nil && b.expired.Load() {
		e := "zone expired at " + at.UTC().Format(time.RFC3339) + ", no primary reached since"
		if p != "" {
			e += ": " + p
		}
		return e
	}
	return p
}

// Endpoint names the zone and its primaries.
func (b *Backend) Endpoint() string {
	ps := make([]string, len(b.cfg.Primaries))
	for i, p := range b.cfg.Primaries {
		ps[i] = p.String()
	}
	return b.cfg.Zone + " from " + strings.Join(ps, ", ")
}
