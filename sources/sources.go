package sources

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dnsd/dnsd/config"
	"github.com/dnsd/dnsd/internal/pacing"
	"github.com/dnsd/dnsd/pipeline"
	"github.com/dnsd/dnsd/sources/dynamic"
	"github.com/dnsd/dnsd/sources/etcd"
	"github.com/dnsd/dnsd/sources/file"
	"github.com/dnsd/dnsd/sources/forward"
	"github.com/dnsd/dnsd/sources/hosts"
	"github.com/dnsd/dnsd/sources/kind"
	"github.com/dnsd/dnsd/sources/kubernetes"
	"github.com/dnsd/dnsd/sources/secondary"
)

// Registry owns every running backend and counts who uses it. The zero
// value is not usable; create one with NewRegistry.
type Registry struct {
	logger     *slog.Logger
	registerer prometheus.Registerer
	dryRun     bool
	bulk       kind.Bulk
	warnings   func(string)

	mu       sync.Mutex
	backends map[string]*backend
	serving  map[slot]slotSource // the serving pipeline's sources (see handover)

	// ctx ends with Close: it stops every Set's handovers; wg counts them.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	// serials hands out the SOA serials of every source and of every
	// built pipeline, so a zone's serial rises with any change of any of
	// its sources and with every reload.
	serials pipeline.SerialClock

	// kinds hold their own process-lifetime state (metrics, shared
	// connections, the forward cache).
	kinds []kind.Kind
}

// Options configure a Registry.
type Options struct {
	Logger *slog.Logger // nil: discarded
	// Registerer receives the source kinds' metrics, once per process.
	// nil: metrics are kept but not exported (tests, `dnsd check`).
	Registerer prometheus.Registerer
	// DryRun compiles without starting anything that talks to the network
	// (`dnsd check`): kinds that connect validate their settings and local
	// files, then return a source that is never asked.
	DryRun bool
	// Bulk is told of the backends' bursts of background work (reloads of
	// their data); nil: nobody is.
	Bulk kind.Bulk
	// Warnings, when not nil, is handed each warning about the config
	// that a build finds (kinds log them too), as one line: `dnsd check`
	// prints them. It may be called from several builds at once.
	Warnings func(line string)
	// Kinds are the source kinds, owned by the registry from now on.
	// nil: Kinds().
	Kinds []kind.Kind
}

// Kinds returns every source kind dnsd has, each with empty state: the
// one list of kinds in the program. The config parser gets their parsing
// side (ConfigKinds), the registry builds sources with them.
func Kinds() []kind.Kind {
	return []kind.Kind{
		kubernetes.NewKind(),
		etcd.NewKind(),
		hosts.NewKind(),
		forward.NewKind(),
		file.NewKind(),
		secondary.NewKind(),
		dynamic.NewKind(),
	}
}

// ConfigKinds returns the kinds' parsing side for config.Load.
func ConfigKinds() config.KindParsers { return configKinds(nil) }

// ServingConfigKinds is ConfigKinds for a config loaded while another
// serves (a reload): the kinds whose parse is long work (kind.ParsePacer)
// give way with pace on one processor.
func ServingConfigKinds(pace *pacing.Pacing) config.KindParsers { return configKinds(pace) }

func configKinds(pace *pacing.Pacing) config.KindParsers {
	var out config.KindParsers
	for _, k := range Kinds() {
		if pp, ok := k.(kind.ParsePacer); ok && pace != nil {
			pp.PaceParses(pace)
		}
		out = append(out, k)
	}
	return out
}

// backend is one entry of the registry's table. It is in the table from
// the moment its open begins: ready is closed when the open has returned,
// and then err, value and close say how (all set under the registry lock).
// refs counts the Sets holding it, plus the acquirers waiting on an open.
type backend struct {
	key   string
	kind  string
	refs  int
	ready chan struct{}
	err   error
	value any // *hosts.Backend, ...
	close io.Closer
}

// opened reports whether b's open has returned a running backend. Call it
// with the registry lock held.
func (b *backend) opened() bool {
	select {
	case <-b.ready:
		return b.err == nil
	default:
		return false
	}
}

// NewRegistry returns an empty registry.
func NewRegistry(opts Options) *Registry {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Registerer == nil {
		opts.Registerer = prometheus.NewRegistry()
	}
	if opts.Kinds == nil {
		opts.Kinds = Kinds()
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Registry{logger: opts.Logger, registerer: opts.Registerer, dryRun: opts.DryRun, bulk: opts.Bulk, warnings: opts.Warnings, kinds: opts.Kinds, backends: make(map[string]*backend), ctx: ctx, cancel: cancel}
}

// Set is the backends one compiled pipeline holds. Release it once the
// pipeline is no longer used; backends nobody holds are then stopped.
type Set struct {
	reg  *Registry
	keys []string
	// Fresh lists the backends this Set started (they were not running
	// before it): the ones a reload must wait for. Empty when every backend was running.
	Fresh     []string
	slots     map[slot]slotSource
	handovers handovers
	once      sync.Once
	serving   bool // built while another pipeline serves (see kind.Env)
	// waits: how long WaitFresh waits for each backend's first sync, the
	// longest sync_timeout of the sources over it in this build.
	waits map[string]time.Duration
	// covered: backends none of whose unsynced slots answer SERVFAIL (a
	// handover keeps the replaced backend answering each of them).
	covered map[string]bool
}

// Covered reports whether the replaced backends answer every zone of
// backend key while it syncs (handovers): its names do not answer
// SERVFAIL meanwhile.
func (s *Set) Covered(key string) bool { return s.covered[key] }

// Release drops the Set's references and stops backends left unused,
// including old backends its handovers still held.
func (s *Set) Release() {
	if s == nil {
		return
	}
	s.once.Do(func() {
		s.handovers.stop()
		s.reg.release(s.keys)
	})
}

// WaitFresh waits until every backend this Set started and that syncs
// asynchronously (pipeline.Syncer) has synced, each at most its own
// sync_timeout from the call (the longest of the sources over it), or ctx
// ends; it returns the backends that had not synced by then. Backends
// kept from an earlier Set are not waited for.
func (s *Set) WaitFresh(ctx context.Context) (unsynced []string) {
	start := time.Now()
	s.reg.mu.Lock()
	var wait []*backend
	for _, k := range s.Fresh {
		if b := s.reg.backends[k]; b != nil && b.opened() {
			wait = append(wait, b)
		}
	}
	s.reg.mu.Unlock()
	for _, b := range wait {
		if sy, ok := b.value.(pipeline.Syncer); ok && !sy.Synced() {
			wctx, cancel := context.WithDeadline(ctx, start.Add(s.waits[b.key]))
			err := sy.WaitSynced(wctx)
			cancel()
			if err != nil {
				unsynced = append(unsynced, b.key)
			}
		}
	}
	return unsynced
}

// Build compiles cfg into a pipeline, opening or reusing backends. On
// error nothing stays acquired. Errors name the source's FILE:LINE:COL.
func (r *Registry) Build(ctx context.Context, cfg *config.Config, opts pipeline.Options) (*pipeline.Pipeline, *Set, error) {
	r.mu.Lock()
	serving := r.serving != nil
	r.mu.Unlock()
	set := &Set{reg: r, slots: make(map[slot]slotSource), serving: serving}
	if !r.dryRun {
		for _, k := range r.kinds {
			if p, ok := k.(kind.Preparer); ok {
				p.Prepare(r.env(ctx, cfg, set, k.Name()))
			}
		}
	}
	var errs []error
	zones := r.zones(ctx, cfg, cfg.Zones, "", set, &errs)
	for _, v := range cfg.Views {
		opts.Views = append(opts.Views, pipeline.ViewSpec{
			Name:    v.Name,
			Clients: v.Clients,
			Listen:  listenKeys(v.Listen),
			Zones:   r.zones(ctx, cfg, v.Zones, "view "+v.Name+": ", set, &errs),
		})
	}
	if len(errs) > 0 {
		set.Release()
		return nil, nil, errors.Join(errs...)
	}
	if opts.Serial == 0 {
		// A new generation raises every synthesized zone serial.
		opts.Serial = r.serials.Next()
	}
	p, err := pipeline.New(zones, opts)
	if err != nil {
		set.Release()
		return nil, nil, fmt.Errorf("%s: %w", cfg.File, err)
	}
	return p, set, nil
}

// listenKeys turns listen entries into the Request.Listen values of the
// sockets they bind: "udp A" and "tcp A" for a plain entry, else the
// scheme's.
func listenKeys(ls []config.Listen) []string {
	var out []string
	for _, l := range ls {
		if l.Proto == "" {
			out = append(out, "udp "+l.Addr, "tcp "+l.Addr)
			continue
		}
		out = append(out, l.Proto+" "+l.Addr)
	}
	return out
}

// zones builds the sources of one view's zones (the default view's:
// slotPrefix ""), recording their slots in set.
func (r *Registry) zones(ctx context.Context, cfg *config.Config, cz []config.Zone, slotPrefix string, set *Set, errs *[]error) []pipeline.ZoneSpec {
	zones := make([]pipeline.ZoneSpec, 0, len(cz))
	for _, z := range cz {
		spec := pipeline.ZoneSpec{Names: z.Names}
		ordinal := map[string]int{}
		for _, sc := range z.Sources {
			held := len(set.keys)
			src, err := r.source(ctx, cfg, z, sc, set)
			if err != nil {
				*errs = append(*errs, fmt.Errorf("%s: %s: %w", sc.Pos, sc.Kind, err))
				continue
			}
			sl := slot{zone: slotPrefix + z.Key, kind: sc.Kind, n: ordinal[sc.Kind]}
			ordinal[sc.Kind]++
			key := ""
			if len(set.keys) > held {
				key = set.keys[len(set.keys)-1]
				if w, ok := sc.Settings.(config.SyncWaiter); ok {
					if set.waits == nil {
						set.waits = make(map[string]time.Duration)
					}
					set.waits[key] = max(set.waits[key], w.SyncWait())
				}
			}
			if !r.dryRun {
				src = r.handOver(set, sl, key, src)
				if key != "" {
					if set.covered == nil {
						set.covered = make(map[string]bool)
					}
					_, handed := src.(*handover)
					was, seen := set.covered[key]
					set.covered[key] = handed && (was || !seen) // every slot so far
				}
			}
			set.slots[sl] = slotSource{key: key, src: src}
			spec.Sources = append(spec.Sources, pipeline.SourceEntry{Source: src, Fallthrough: sc.Fallthrough})
		}
		zones = append(zones, spec)
	}
	return zones
}

// source builds one source through its kind.
func (r *Registry) source(ctx context.Context, cfg *config.Config, z config.Zone, sc config.Source, set *Set) (pipeline.Source, error) {
	for _, k := range r.kinds {
		if k.Name() == sc.Kind {
			return k.Build(ctx, r.env(ctx, cfg, set, sc.Kind), z, sc.Settings)
		}
	}
	return nil, fmt.Errorf("unknown source kind %q", sc.Kind)
}

// env is what a kind gets while it builds a source of cfg into set; its
// acquires wait for another build's open of the same backend until ctx
// ends.
func (r *Registry) env(ctx context.Context, cfg *config.Config, set *Set, kindName string) *kind.Env {
	return &kind.Env{
		Config:     cfg,
		Logger:     r.logger,
		Registerer: r.registerer,
		DryRun:     r.dryRun,
		Serving:    set.serving,
		Serials:    &r.serials,
		Bulk:       r.bulk,
		Warnings:   r.warnings,
		AcquireFunc: func(key string, open func() (any, io.Closer, error)) (any, bool, error) {
			return r.acquire(ctx, set, kindName, key, open)
		},
	}
}

// acquire returns the running backend for key, or opens one with open;
// fresh is true when this build started it.
//
// The open runs outside the registry lock, so a slow one (a large hosts
// file parsed) holds up neither Synced (every /metrics scrape) nor the
// acquires of other keys. One open runs per key at a time: an acquirer of
// a key being opened waits for that open (or ctx) and shares its result.
// A failed open is not kept; the next acquire of the key opens again.
func (r *Registry) acquire(ctx context.Context, set *Set, kindName, key string, open func() (any, io.Closer, error)) (value any, fresh bool, err error) {
	full := kindName + " " + key
	r.mu.Lock()
	b, ok := r.backends[full]
	if ok {
		b.refs++ // held while waiting, so a release meanwhile keeps it
		r.mu.Unlock()
		select {
		case <-b.ready:
		case <-ctx.Done():
			r.drop(b)
			return nil, false, fmt.Errorf("waiting for another build's open of %s: %w", full, ctx.Err())
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		if b.err != nil {
			return nil, false, b.err // the failed entry is out of the table already
		}
		// Started earlier in this same build (another zone): still fresh.
		fresh = slices.Contains(set.Fresh, full)
		set.keys = append(set.keys, full)
		return b.value, fresh, nil
	}
	b = &backend{key: full, kind: kindName, refs: 1, ready: make(chan struct{})}
	r.backends[full] = b
	r.mu.Unlock()

	start := time.Now()
	returned := false
	defer func() {
		if !returned {
			// open panicked: its waiters get an error, not a wait forever.
			r.opened(b, nil, nil, fmt.Errorf("opening %s panicked", full))
		}
	}()
	v, c, err := open()
	returned = true
	r.opened(b, v, c, err)
	if err != nil {
		return nil, false, err
	}
	r.mu.Lock()
	set.Fresh = append(set.Fresh, full)
	set.keys = append(set.keys, full)
	r.mu.Unlock()
	if sh, ok := c.(kind.Sharer); ok && !sh.OpenedShared() {
		// Another ttl (or such) over a running backend: nothing new
		// connects or reads.
		r.logger.Info("backend view added, sharing a running backend", "kind", kindName, "source", Name(full))
	} else {
		attrs := []any{"kind", kindName, "source", Name(full)}
		if l, ok := v.(kind.Loader); ok {
			attrs = append(attrs, l.Loaded()...)
		}
		r.logger.Info("backend started", append(attrs, "took", time.Since(start).Round(time.Microsecond))...)
	}
	return v, true, nil
}

// opened records the outcome of b's open and wakes its waiters; a failed
// open leaves the table.
func (r *Registry) opened(b *backend, v any, c io.Closer, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	b.value, b.close, b.err = v, c, err
	if err != nil && r.backends[b.key] == b {
		delete(r.backends, b.key)
	}
	close(b.ready)
}

// drop lets go of the reference an acquirer took to wait on b's open and
// no longer wants, stopping b if that was the last.
func (r *Registry) drop(b *backend) {
	r.mu.Lock()
	b.refs--
	stop := b.refs == 0 && r.backends[b.key] == b && b.opened()
	if stop {
		delete(r.backends, b.key)
	}
	r.mu.Unlock()
	if stop {
		r.stop(b)
	}
}

func (r *Registry) release(keys []string) {
	var stop []*backend
	r.mu.Lock()
	for _, k := range keys {
		b := r.backends[k]
		if b == nil || !b.opened() {
			continue // stopped by Close; an entry opening now is another's
		}
		b.refs--
		if b.refs == 0 {
			delete(r.backends, k)
			stop = append(stop, b)
		}
	}
	r.mu.Unlock()
	for _, b := range stop {
		r.stop(b)
	}
}

// stop closes a backend no Set holds any more.
func (r *Registry) stop(b *backend) {
	if err := b.close.Close(); err != nil {
		r.logger.Warn("backend stop", "kind", b.kind, "source", Name(b.key), "err", err)
	} else if sh, ok := b.close.(kind.Sharer); ok && !sh.ClosedShared() {
		r.logger.Info("backend view removed; the backend it shares runs on", "kind", b.kind, "source", Name(b.key))
	} else {
		r.logger.Info("backend stopped", "kind", b.kind, "source", Name(b.key))
	}
}

// Len reports how many backends are running (for tests); ones still
// opening do not count.
func (r *Registry) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, b := range r.backends {
		if b.opened() {
			n++
		}
	}
	return n
}

// Close stops every backend regardless of references (process exit),
// waiting for opens still running to stop what they open.
func (r *Registry) Close() {
	r.cancel()
	r.wg.Wait() // handovers let go of their old backends
	r.mu.Lock()
	all := r.backends
	r.backends = make(map[string]*backend)
	r.mu.Unlock()
	for _, b := range all {
		<-b.ready
		if b.err == nil {
			_ = b.close.Close()
		}
	}
	for _, k := range r.kinds {
		if c, ok := k.(io.Closer); ok {
			_ = c.Close()
		}
	}
}

// Swapped tells the registry that the pipeline built from cfg (holding
// set) is now the one serving (after a start or a reload), so process-wide
// state can follow it: the forward cache drops entries of zones that no
// longer forward, and the next build knows which source served each slot.
func (r *Registry) Swapped(cfg *config.Config, p *pipeline.Pipeline, set *Set) {
	for _, k := range r.kinds {
		if sw, ok := k.(kind.Swapper); ok {
			sw.Swapped(cfg, p)
		}
	}
	if set != nil {
		r.mu.Lock()
		r.serving = set.slots
		r.mu.Unlock()
	}
}

// Synced reports every running backend by name and whether its first sync
// is done (backends that load synchronously, like hosts, always are).
// Backends still opening are not running yet: Synced does not wait for
// them, nor lists them.
//
// The name is the backend's Name: its key without the part that only
// tells backends apart. Two backends whose keys differ only there (the
// old and the new during a reload that changed a secret) are one name,
// synced when both are.
func (r *Registry) Synced(yield func(name string, synced bool)) {
	r.mu.Lock()
	type row struct {
		name   string
		synced bool
	}
	rows := make([]row, 0, len(r.backends))
	at := make(map[string]int, len(r.backends))
	for _, b := range r.backends {
		if !b.opened() {
			continue
		}
		ok := true
		if s, isSyncer := b.value.(pipeline.Syncer); isSyncer {
			ok = s.Synced()
		}
		name := Name(b.key)
		if j, dup := at[name]; dup {
			rows[j].synced = rows[j].synced && ok
			continue
		}
		at[name] = len(rows)
		rows = append(rows, row{name, ok})
	}
	r.mu.Unlock()
	for _, rw := range rows {
		yield(rw.name, rw.synced)
	}
}

// FlushCache drops the response cache's entries for name and every name
// below it ("" or ".": all of them) and returns how many it dropped.
func (r *Registry) FlushCache(name string) int {
	n := 0
	for _, k := range r.kinds {
		if f, ok := k.(kind.CacheFlusher); ok {
			n += f.FlushCache(name)
		}
	}
	return n
}

// Name is how logs and the source label of dnsd_source_synced name the
// backend of key (its kind, a space, the key its kind made): the key cut
// before the part that tells backends apart but says nothing to an
// operator. That part is " secrets=<hex>" (etcd, secondary: a hash
// salted anew by every process, which tells a changed password or
// certificate apart without showing it; a label must not change with
// each restart) or " inline=<count>/<hex>" (file: the inline records'
// hash); Name cuts at the last such part. What is left names the backend
// by its settings: the files, the endpoints, the zones.
func Name(key string) string {
	for end := len(key); end > 0; {
		i := strings.LastIndexByte(key[:end], ' ')
		if i < 0 {
			break
		}
		part := key[i+1 : end]
		for _, p := range []string{"secrets=", "inline="} {
			if v, ok := strings.CutPrefix(part, p); ok && v != "" && strings.Trim(v, "0123456789abcdef/") == "" {
				return key[:i]
			}
		}
		end = i
	}
	return key
}
