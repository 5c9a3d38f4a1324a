package daemon

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	sd "github.com/coreos/go-systemd/v22/daemon"

	"github.com/dnsd/dnsd/authority"
	"github.com/dnsd/dnsd/config"
	"github.com/dnsd/dnsd/internal/fsutil"
	"github.com/dnsd/dnsd/internal/pacing"
	"github.com/dnsd/dnsd/metrics"
	"github.com/dnsd/dnsd/pipeline"
	"github.com/dnsd/dnsd/server"
	"github.com/dnsd/dnsd/sources"
	"github.com/dnsd/dnsd/sources/kind"
)

// Options are what the command line gives the daemon.
type Options struct {
	ConfigPath string    // the dnsd.yaml to read and reload; required
	Version    string    // for logs and dnsd_build_info; "" leaves them empty
	Commit     string    // as Version: "" leaves it empty
	LogOutput  io.Writer // default os.Stderr
	// Started, when set, is called once start-up is over: every source
	// has synced or its sync_timeout has passed (when READY=1 goes to
	// systemd). Default nil: nobody is told.
	Started func()
	// Bulk, when set, is told of every reload and of the sources' bursts
	// of background work (kind.Bulk). Default nil: nobody is told.
	Bulk kind.Bulk
}

// drainTimeout bounds how long the old pipeline's queries are waited for
// after a reload before its unused backends are stopped anyway.
const drainTimeout = 30 * time.Second

// drainInline is how long a reload itself waits for the old pipeline's
// queries (local answers take microseconds) before it leaves the rest of
// the drain to a goroutine: a query waiting for a slow upstream must not
// hold back the reload's end (READY=1) or the next reload.
const drainInline = 100 * time.Millisecond

// Daemon is a running dnsd.
type Daemon struct {
	opts   Options
	logger *slog.Logger
	// bootLevel is log.level until the first generation is committed;
	// from then on the generation's own is (see logLevel).
	bootLevel slog.LevelVar
	format    string
	metrics   *metrics.Metrics
	reg       *sources.Registry
	journal   *authority.Journal // zone versions sent to secondaries, across reloads
	// srv holds the one commit point: its generation's resolver and
	// authority are the daemon's generation (current).
	srv      *server.Server
	notify   notifier
	watchdog *time.Ticker        // WATCHDOG=1 pings; nil without a systemd watchdog
	notifies *authority.Notifier // NOTIFY to the secondaries of transferred zones
	serials  *serialKeeper       // the zones' serials, kept across restarts

	mu   sync.Mutex // serialises Reload and Shutdown
	cfg  *config.Config
	http *httpServer

	stopWait context.CancelFunc
	waitDone chan struct{}
	// Drains of old pipelines that outlived their reload (see
	// drainInline): Shutdown cancels them (the server's own drain waits
	// for their queries, the registry then closes their backends) and
	// waits for them. swaps counts the reloads that swapped, so that only
	// the drain of the latest one prunes the metrics.
	drains      sync.WaitGroup
	drainCtx    context.Context
	drainCancel context.CancelFunc
	swaps       atomic.Uint64
	// readySent: the start's READY=1 has gone out. Until then a reload
	// says neither RELOADING=1 nor READY=1: READY=1 waits for the start's
	// sync wait.
	readySent atomic.Bool
}

// Start loads the config and starts serving. It returns once every
// listener is bound; sources that sync asynchronously keep syncing (their
// names answer SERVFAIL until they have), and READY=1 is sent to systemd
// when all have synced or their sync_timeout has passed.
func Start(ctx context.Context, opts Options) (*Daemon, error) {
	if opts.LogOutput == nil {
		opts.LogOutput = os.Stderr
	}
	cfg, err := config.Load(opts.ConfigPath, sources.ConfigKinds())
	if err != nil {
		return nil, err
	}
	d := &Daemon{
		opts:     opts,
		format:   cfg.Log.Format,
		metrics:  metrics.New(opts.Version, opts.Commit),
		journal:  authority.NewJournal(),
		notify:   notifier{},
		cfg:      cfg,
		waitDone: make(chan struct{}),
	}
	d.drainCtx, d.drainCancel = context.WithCancel(context.Background())
	d.logger = newLogger(opts.LogOutput, cfg.Log.Format, logLevel{d})
	// Query lines are written whatever log.level says: asking for them
	// (log.queries) is asking to see them.
	queryLevel := new(slog.LevelVar)
	queryLines := newLogger(opts.LogOutput, cfg.Log.Format, queryLevel)
	d.srv = server.New(server.Options{Observer: &observer{m: d.metrics, log: queryLines, queries: d.queryLog}, Logger: d.logger})
	// The first line says which process this is and which file it
	// serves, whatever the level: it is logged before the level is set.
	d.logger.Info("dnsd starting", "pid", os.Getpid(), "config", cfg.File, "version", opts.Version, "commit", opts.Commit)
	d.bootLevel.Set(cfg.Log.Level)
	d.reg = sources.NewRegistry(sources.Options{Logger: d.logger, Registerer: d.metrics.Registry, Bulk: opts.Bulk})
	d.metrics.WatchSynced(d.reg.Synced)

	d.serials = newSerialKeeper(cfg, d.logger)
	opts0 := pipelineOptions(cfg, d.logger)
	opts0.Floors = d.serials.floors(cfg) // serials never go back across a restart
	p, set, err := d.reg.Build(ctx, cfg, opts0)
	if err != nil {
		d.reg.Close()
		return nil, err
	}
	auth, err := authority.New(p, d.authorityOptions(cfg, nil))
	if err != nil {
		set.Release()
		d.reg.Close()
		return nil, err
	}
	d.reg.Swapped(cfg, p, set)
	set2, err := serverSettings(cfg)
	var change *server.Change
	if err == nil {
		change, err = d.srv.Prepare(ctx, cfg.Listen, set2)
	}
	if err != nil {
		d.reg.Close()
		return nil, err
	}
	g := newGeneration(cfg, p, auth, set)
	d.srv.Commit(change, g, g)
	zeroSeries(d.metrics, cfg)
	if cfg.HTTP != "" {
		if d.http, err = startHTTP(cfg.HTTP, d.metrics.Registry, d.ready, d.reg.FlushCache, d.logger); err != nil {
			err = fmt.Errorf("%s: %w", cfg.HTTPPos, err)
			_ = d.srv.Shutdown(ctx)
			d.reg.Close()
			return nil, err
		}
	}
	d.notifies = authority.NewNotifier(func() *authority.Zones { return d.current().auth }, d.metrics, d.logger)
	d.notifies.Start()
	d.serials.start(func() *pipeline.Pipeline { return d.current().p })
	waitCtx, cancel := context.WithCancel(context.Background())
	d.stopWait = cancel
	go func() {
		defer close(d.waitDone)
		// Every backend up to its own sources' sync_timeout.
		for _, name := range set.WaitFresh(waitCtx) {
			if waitCtx.Err() == nil {
				d.logger.Warn("source not synced within its sync_timeout; its names answer SERVFAIL until it is", "source", sources.Name(name))
			}
		}
		if waitCtx.Err() == nil {
			if opts.Started != nil {
				opts.Started()
			}
			d.readySent.Store(true)
			if err := d.notify.send(sd.SdNotifyReady); err != nil {
				d.logger.Warn("sd_notify", "err", err)
			}
		}
	}()
	// The systemd watchdog is pinged from Run's loop, so a loop that no
	// longer turns (wedged in a reload or a stop) stops the pings and
	// systemd restarts dnsd.
	if every, err := d.notify.watchdogInterval(); err != nil {
		d.logger.Warn("sd_notify", "err", err)
	} else if every > 0 {
		d.watchdog = time.NewTicker(every)
	}
	d.logger.Info("dnsd started", "pid", os.Getpid(), "version", opts.Version, "config", cfg.File, "listen", listenStrings(cfg.Listen), "http", cfg.HTTP, "zones", zoneNames(cfg))
	return d, nil
}

// Reload re-reads the config file and swaps in the new pipeline, keeping
// the old one on any error (docs/operations.md, Reload).
func (d *Daemon) Reload(ctx context.Context) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	// A burst: new backends load, and the reload waits for their sync.
	defer d.opts.Bulk.Begin()()
	if d.readySent.Load() {
		if err := d.notify.send(reloading()); err != nil {
			d.logger.Warn("sd_notify", "err", err)
		}
		defer func() {
			if ctx.Err() == nil { // else stopping: STOPPING=1 follows, not READY=1
				_ = d.notify.send(sd.SdNotifyReady)
			}
		}()
	}
	start := time.Now()
	err := d.reload(ctx)
	d.metrics.Reload(err == nil)
	if err != nil {
		for _, line := range strings.Split(err.Error(), "\n") {
			d.logger.Error("reload failed, keeping the running configuration", "err", line)
		}
		return err
	}
	d.logger.Info("reloaded", "config", d.cfg.File, "took", time.Since(start).Round(time.Microsecond))
	return nil
}

func (d *Daemon) reload(ctx context.Context) error {
	// The running config serves while this one loads: long parses (a
	// zone file) give way on one processor.
	cfg, err := config.Load(d.opts.ConfigPath, sources.ServingConfigKinds(&pacing.Pacing{Sleep: time.Sleep}))
	if err != nil {
		return err
	}
	settings, err := serverSettings(cfg)
	if err != nil {
		return err
	}
	cur := d.current()
	opts := pipelineOptions(cfg, d.logger)
	opts.Prev = cur.p                   // serials never go back
	opts.Floors = d.serials.floors(cfg) // zones served before this pipeline's predecessor too
	p, set, err := d.reg.Build(ctx, cfg, opts)
	if err != nil {
		return err
	}
	auth, err := authority.New(p, d.authorityOptions(cfg, cur.auth))
	if err != nil {
		set.Release()
		return err
	}
	// New backends sync before the swap (each up to its own sources'
	// sync_timeout); kept ones are not waited for, synced or not.
	unsynced := set.WaitFresh(ctx)
	if err := ctx.Err(); err != nil {
		set.Release()
		return fmt.Errorf("reload abandoned: %w", err)
	}
	for _, name := range unsynced {
		if set.Covered(name) {
			d.logger.Warn("new backend not synced within its sync_timeout; the backend it replaces answers until it is", "source", sources.Name(name))
			continue
		}
		d.logger.Warn("new backend not synced within its sync_timeout; its names answer SERVFAIL until it is", "source", sources.Name(name))
	}

	var newHTTP *httpServer
	if cfg.HTTP != "" && (d.http == nil || d.http.addr != cfg.HTTP) {
		if newHTTP, err = startHTTP(cfg.HTTP, d.metrics.Registry, d.ready, d.reg.FlushCache, d.logger); err != nil {
			err = fmt.Errorf("%s: %w", cfg.HTTPPos, err)
			set.Release()
			return err
		}
	}
	change, err := d.srv.Prepare(ctx, cfg.Listen, settings)
	if err != nil {
		newHTTP.stop(ctx)
		set.Release()
		return err
	}
	// The one commit point: pipeline, views, TSIG keys and transfers,
	// listeners, ACL, limits, TLS, log level and query log, in one store.
	old, g := cur, newGeneration(cfg, p, auth, set)
	d.srv.Commit(change, g, g)
	old.replacedBy(g)
	if newHTTP != nil || cfg.HTTP == "" {
		d.http.stop(ctx)
		d.http = newHTTP
	}
	d.reg.Swapped(cfg, p, set)
	d.serials.reconfigure(cfg)
	zeroSeries(d.metrics, cfg)
	if cfg.Log.Format != d.format {
		d.logger.Warn("log.format changes take effect at the next restart", "running", d.format, "configured", cfg.Log.Format)
	}
	d.cfg = cfg
	swap := d.swaps.Add(1)
	ictx, icancel := context.WithTimeout(ctx, drainInline)
	err = old.drain(ictx)
	icancel()
	if err == nil {
		d.retire(old, cfg, swap)
		return nil
	}
	if ctx.Err() != nil {
		// Stopping: the server's shutdown drains (and at worst cancels)
		// the old pipeline's queries with the rest, and the registry
		// closes its backends after that; releasing them now would fail
		// those queries at once.
		return nil
	}
	d.logger.Info("queries still running on the old pipeline; its backends stop once they are answered", "in_flight", old.inflight.Load())
	d.drains.Add(1)
	go func() {
		defer d.drains.Done()
		dctx, dcancel := context.WithTimeout(d.drainCtx, drainTimeout)
		err := old.drain(dctx)
		dcancel()
		if d.drainCtx.Err() != nil {
			return // stopping: as above
		}
		if err != nil {
			d.logger.Warn("queries still running on the old pipeline; stopping its backends anyway", "err", err)
		}
		d.retire(old, cfg, swap)
	}()
	return nil
}

// retire lets go of a drained generation's backends and, when no reload
// has swapped since the one that replaced it (swap), drops the metric
// series of what cfg no longer has.
func (d *Daemon) retire(old *generation, cfg *config.Config, swap uint64) {
	old.set.Release()
	if d.swaps.Load() == swap {
		d.metrics.KeepZones(configured(cfg))
	}
}

// zeroSeries makes, at 0, the transfer and NOTIFY series of every zone
// cfg transfers (and notifies secondaries of), for every result: the
// alerts that compare failures with successes need the success series
// before the first success.
func zeroSeries(m *metrics.Metrics, cfg *config.Config) {
	for _, t := range cfg.Transfers {
		for _, z := range t.Zones {
			m.Transferred(z, server.TransferSuccess, server.TransferRefused, server.TransferNotAuth, server.TransferBusy, server.TransferError)
			if len(t.Notify) > 0 {
				m.Notified(z, authority.NotifySent, authority.NotifyAcked, authority.NotifyFailed)
			}
		}
	}
}

// configured reports which view and zone pairs of the metrics cfg has
// (a view's queries are answered from its own zones and the default
// ones), and which zones it has at all.
func configured(cfg *config.Config) (keep func(view, zone string) bool, zone func(string) bool) {
	def := map[string]bool{}
	all := map[string]bool{}
	for _, z := range cfg.Zones {
		for _, n := range z.Names {
			def[n], all[n] = true, true
		}
	}
	views := map[string]map[string]bool{}
	for _, v := range cfg.Views {
		own := map[string]bool{}
		for _, z := range v.Zones {
			for _, n := range z.Names {
				own[n], all[n] = true, true
			}
		}
		views[v.Name] = own
	}
	keep = func(view, zone string) bool {
		if view == "" {
			return zone == "" || def[zone]
		}
		own, ok := views[view]
		return ok && (zone == "" || own[zone] || def[zone])
	}
	return keep, func(z string) bool { return all[z] }
}

// Shutdown stops accepting queries, finishes the ones in flight (until ctx
// ends), and stops every backend.
func (d *Daemon) Shutdown(ctx context.Context) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	_ = d.notify.send(sd.SdNotifyStopping)
	d.stopWait()
	<-d.waitDone
	d.drainCancel()
	d.drains.Wait()
	d.notifies.Close()
	err := d.srv.Shutdown(ctx)
	d.serials.close() // the serials served last
	d.http.stop(ctx)
	d.reg.Close()
	if d.watchdog != nil {
		d.watchdog.Stop()
	}
	d.logger.Info("dnsd stopped")
	return err
}

// Addrs reports the DNS server's bound addresses (for tests).
func (d *Daemon) Addrs() []string {
	var out []string
	for _, a := range d.srv.Addrs() {
		out = append(out, a.Network()+"://"+a.String())
	}
	return out
}

// stopTimeout bounds a graceful stop, a reload in progress included.
const stopTimeout = 10 * time.Second

// ErrForcedExit is returned by Run when a second stop signal ended a
// graceful stop before it was done.
var ErrForcedExit = errors.New("second stop signal: exiting at once")

// Run starts the daemon and serves until ctx ends or a stop signal
// arrives. SIGHUP reloads, on a goroutine of its own so that the loop
// keeps listening: a SIGTERM during a reload abandons the reload (its
// context is cancelled, the running pipeline stays) and stops the daemon
// within stopTimeout; a second SIGTERM returns ErrForcedExit at once.
// SIGHUPs that arrive during a reload are coalesced into one more reload.
func Run(ctx context.Context, opts Options, signals <-chan os.Signal) error {
	d, err := Start(ctx, opts)
	if err != nil {
		return err
	}
	var (
		reloadCtx, cancelReloads = context.WithCancel(ctx)
		reloadDone               chan struct{} // nil: no reload running
		again                    bool          // a SIGHUP came during the reload
	)
	defer cancelReloads()
	reload := func() {
		reloadDone = make(chan struct{})
		go func(done chan struct{}) {
			defer close(done)
			_ = d.Reload(reloadCtx)
		}(reloadDone)
	}
	for {
		select {
		case <-d.watchdogC():
			if err := d.notify.send(sd.SdNotifyWatchdog); err != nil {
				d.logger.Warn("sd_notify", "err", err)
			}
		case <-ctx.Done():
			return d.stopNow(cancelReloads, reloadDone, signals)
		case <-reloadDone:
			reloadDone = nil
			if again {
				again = false
				d.logger.Info("reloading again for a SIGHUP that came during the last reload", "config", opts.ConfigPath)
				reload()
			}
		case sig := <-signals:
			switch sig {
			case syscall.SIGHUP:
				if reloadDone != nil {
					again = true
					continue
				}
				d.logger.Info("SIGHUP: reloading", "config", opts.ConfigPath)
				reload()
			case syscall.SIGTERM, os.Interrupt:
				if reloadDone != nil {
					d.logger.Info("stopping, abandoning the reload in progress", "signal", sig.String())
				} else {
					d.logger.Info("stopping", "signal", sig.String())
				}
				return d.stopNow(cancelReloads, reloadDone, signals)
			}
		}
	}
}

// stopNow cancels any reload and stops the daemon gracefully, within
// stopTimeout; a second stop signal cuts it short.
func (d *Daemon) stopNow(cancelReloads context.CancelFunc, reloadDone chan struct{}, signals <-chan os.Signal) error {
	cancelReloads()
	deadline := time.Now().Add(stopTimeout)
	done := make(chan error, 1)
	go func() {
		if reloadDone != nil {
			<-reloadDone // returns promptly: its context is cancelled
		}
		// Leave a little of the budget for the process to exit.
		ctx, cancel := context.WithDeadline(context.Background(), deadline.Add(-500*time.Millisecond))
		defer cancel()
		done <- d.Shutdown(ctx)
	}()
	hard := time.NewTimer(time.Until(deadline))
	defer hard.Stop()
	for {
		select {
		case err := <-done:
			return err
		case sig := <-signals:
			if sig == syscall.SIGTERM || sig == os.Interrupt {
				d.logger.Warn("second stop signal: exiting at once", "signal", sig.String())
				return ErrForcedExit
			}
		case <-hard.C:
			d.logger.Error("graceful stop did not finish in time; exiting", "timeout", stopTimeout)
			return fmt.Errorf("graceful stop took longer than %s", stopTimeout)
		}
	}
}

// ready reports whether every source of the current pipeline has synced,
// and why not (see readiness).
func (d *Daemon) ready() (bool, string) { return readiness(d.current().p.Sources()) }

// newGeneration is the daemon's part of cfg's generation.
func newGeneration(cfg *config.Config, p *pipeline.Pipeline, auth *authority.Zones, set *sources.Set) *generation {
	return &generation{p: p, auth: auth, set: set, level: cfg.Log.Level, queryLog: cfg.Log.Queries}
}

// current is the generation the server answers with; nil until the
// first one is committed.
func (d *Daemon) current() *generation {
	g, _ := d.srv.Current().Resolver().(*generation)
	return g
}

// logLevel is the daemon's log level (a slog.Leveler): the current
// generation's log.level, so that a reload changes it with the rest.
type logLevel struct{ d *Daemon }

func (l logLevel) Level() slog.Level {
	if g := l.d.current(); g != nil {
		return g.level
	}
	return l.d.bootLevel.Level()
}

// queryLog reports whether the current generation logs queries.
func (d *Daemon) queryLog() bool {
	g := d.current()
	return g != nil && g.queryLog
}

func pipelineOptions(cfg *config.Config, logger *slog.Logger) pipeline.Options {
	return pipeline.Options{NSAddrs: listenAddrs(cfg), Logger: logger}
}

// authorityOptions are the transfer settings of cfg's generation; prev is
// the one it replaces (nil at the start).
func (d *Daemon) authorityOptions(cfg *config.Config, prev *authority.Zones) authority.Options {
	return authority.Options{
		Transfers: transferSpecs(cfg, listenAddrs(cfg)), Journal: d.journal, Logger: d.logger, Prev: prev,
		Updates: updateSpecs(cfg), MaxUpdateSize: cfg.Limits.MaxUpdateSize, MaxUpdateRRs: cfg.Limits.MaxUpdateRRs,
	}
}

// listenAddrs are the specific addresses of the top-level listen entries.
func listenAddrs(cfg *config.Config) []netip.Addr {
	var addrs []netip.Addr
	seen := map[netip.Addr]bool{}
	for _, l := range cfg.Listen {
		ap, err := netip.ParseAddrPort(l.Addr)
		if err != nil || ap.Addr().IsUnspecified() || seen[ap.Addr()] {
			continue
		}
		seen[ap.Addr()] = true
		addrs = append(addrs, ap.Addr().Unmap())
	}
	return addrs
}

// transferSpecs turns the config's transfer items into authority's.
// listenAddrs are the specific addresses of the top-level listen entries,
// which serve the transferred zones: NOTIFYs leave from them (secondaries
// take a NOTIFY only from the primary they list), unless notify_source
// says otherwise.
func transferSpecs(cfg *config.Config, listenAddrs []netip.Addr) []authority.TransferSpec {
	out := make([]authority.TransferSpec, 0, len(cfg.Transfers))
	for _, t := range cfg.Transfers {
		spec := authority.TransferSpec{Zones: t.Zones, Allow: t.Allow, Notify: t.Notify, NotifyFrom: listenAddrs}
		if t.NotifySource.IsValid() {
			spec.NotifyFrom = []netip.Addr{t.NotifySource}
		}
		if t.TSIG != nil {
			spec.Key = &authority.TSIGKey{Name: t.TSIG.Name, Algorithm: t.TSIG.Algorithm, Secret: t.TSIG.Secret}
		}
		out = append(out, spec)
	}
	return out
}

// updateSpecs are cfg's update items as the authority takes them.
func updateSpecs(cfg *config.Config) []authority.UpdateSpec {
	var out []authority.UpdateSpec
	for i, u := range cfg.Updates {
		spec := authority.UpdateSpec{Zones: u.Zones, Allow: u.Allow, Names: u.Names, Types: u.Types, Index: i}
		if u.TSIG != nil {
			spec.Key = &authority.TSIGKey{Name: u.TSIG.Name, Algorithm: u.TSIG.Algorithm, Secret: u.TSIG.Secret}
		}
		out = append(out, spec)
	}
	return out
}

func serverSettings(cfg *config.Config) (server.Settings, error) {
	s := server.Settings{ACL: cfg.ACL, Limits: cfg.Limits, Rotate: cfg.Rotate}
	if cfg.TLS != nil {
		cert, err := fsutil.LoadKeyPair(cfg.TLS.Cert, cfg.TLS.Key)
		if err != nil {
			return s, fmt.Errorf("%s: tls: %w", cfg.TLS.Pos, err)
		}
		s.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	return s, nil
}

func newLogger(w io.Writer, format string, level slog.Leveler) *slog.Logger {
	o := &slog.HandlerOptions{Level: level}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, o))
	}
	return slog.New(slog.NewTextHandler(w, o))
}

func listenStrings(ls []config.Listen) []string {
	out := make([]string, len(ls))
	for i, l := range ls {
		out[i] = l.String()
	}
	return out
}

func zoneNames(cfg *config.Config) []string {
	var out []string
	for _, z := range cfg.Zones {
		out = append(out, z.Names...)
	}
	return out
}

// observer records every query in the metrics and, when log.queries is
// on, logs it.
type observer struct {
	m       *metrics.Metrics
	log     *slog.Logger
	queries func() bool
}

func (o *observer) Observe(ob server.Observation) {
	if ob.Panicked {
		o.m.Panic()
	}
	switch {
	case !ob.Dropped:
		o.m.Query(ob.View, ob.Zone, ob.Proto, ob.Qtype, ob.Rcode, ob.Source, ob.Duration)
	case ob.DropReason != "":
		o.m.Dropped(ob.DropReason)
	}
	if o.queries() {
		o.log.Info("query", "client", ob.Client, "proto", ob.Proto, "name", ob.Name,
			"type", metrics.TypeString(ob.Qtype), "rcode", metrics.RcodeString(ob.Rcode),
			"view", metrics.ViewLabel(ob.View), "zone", metrics.ZoneLabel(ob.Zone), "source", ob.Source, "dropped", ob.Dropped, "drop_reason", ob.DropReason, "panicked", ob.Panicked, "tc", ob.Truncated,
			"duration", ob.Duration)
	}
}

func (o *observer) TCPRejected(reason string) { o.m.TCPRejected(reason) }

func (o *observer) Transfer(zone, result string) { o.m.Transfer(zone, result) }

func (o *observer) Update(zone, result string, changed bool, d time.Duration) {
	o.m.Update(zone, result, changed, d)
}
