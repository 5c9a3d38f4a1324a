// Package sources turns the sources of a validated config into pipeline
// sources. It is the one place that knows every source kind (an explicit
// switch, no registry), and it shares backends: sources whose backend settings
// are equal use one backend, across zones and across reloads.
package sources

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dnsd/dnsd/config"
	"github.com/dnsd/dnsd/pipeline"
	"github.com/dnsd/dnsd/sources/hosts"
)

// Registry owns every running backend and counts who uses it. The zero
// value is not usable; create one with NewRegistry.
type Registry struct {
	logger     *slog.Logger
	registerer prometheus.Registerer
	dryRun     bool

	mu       sync.Mutex
	backends map[string]*backend
	serving  map[slot]slotSource // the serving pipeline's sources (see handover)
	// hostsFiles: the hosts backends by files, shared by every ttl's view.
	hostsFiles map[string]*sharedBackend

	// ctx ends with Close: it stops every Set's handovers; wg counts them.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	// serials hands out the SOA serials of every hosts, etcd and
	// kubernetes source and of every built pipeline, so a zone's serial
	// rises with any change of any of its sources and with every reload.
	serials pipeline.SerialClock

	// Per-kind process-lifetime state (metrics, the forward cache), each
	// declared and managed in that kind's file.
	forward forwardState
	etcd    etcdState
	kube    kubeState
}

// Options configure a Registry.
type Options struct {
	Logger *slog.Logger
	// Registerer receives the source kinds' metrics, once per process.
	// nil: metrics are kept but not exported (tests, `dnsd check`).
	Registerer prometheus.Registerer
	// DryRun compiles without starting anything that talks to the network
	// (`dnsd check`): kinds that connect validate their settings and local
	// files, then return a source that is never asked.
	DryRun bool
}

type backend struct {
	key   string
	kind  string
	refs  int
	value any // *hosts.Backend, ...
	close io.Closer
}

// NewRegistry returns an empty registry.
func NewRegistry(opts Options) *Registry {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Registerer == nil {
		opts.Registerer = prometheus.NewRegistry()
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Registry{logger: opts.Logger, registerer: opts.Registerer, dryRun: opts.DryRun, backends: make(map[string]*backend), ctx: ctx, cancel: cancel}
}

// Set is the backends one compiled pipeline holds. Release it once the
// pipeline is no longer used; backends nobody holds are then stopped.
type Set struct {
	reg  *Registry
	keys []string
	// Fresh lists the backends this Set started (they were not running
	// before it): the ones a reload must wait for.
	Fresh     []string
	slots     map[slot]slotSource
	handovers handovers
	once      sync.Once
}

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
// asynchronously (pipeline.Syncer) has synced, or ctx ends; it returns the
// names of those still not synced. Backends kept from earlier builds are
// not waited for (a reload waits for the new backends only).
func (s *Set) WaitFresh(ctx context.Context) (unsynced []string) {
	s.reg.mu.Lock()
	var wait []*backend
	for _, k := range s.Fresh {
		if b := s.reg.backends[k]; b != nil {
			wait = append(wait, b)
		}
	}
	s.reg.mu.Unlock()
	for _, b := range wait {
		if sy, ok := b.value.(pipeline.Syncer); ok && !sy.Synced() {
			if err := sy.WaitSynced(ctx); err != nil {
				unsynced = append(unsynced, b.key)
			}
		}
	}
	return unsynced
}

// Build compiles cfg into a pipeline, opening or reusing backends. On
// error nothing stays acquired. Errors name the source's FILE:LINE:COL.
func (r *Registry) Build(ctx context.Context, cfg *config.Config, opts pipeline.Options) (*pipeline.Pipeline, *Set, error) {
	set := &Set{reg: r, slots: make(map[slot]slotSource)}
	if !r.dryRun {
		// The cache and its metrics exist from the first build, forward
		// source or not: docs/operations.md lists dnsd_cache_* among the metrics
		// /metrics always has, and a reload that adds a forward source
		// finds the cache ready.
		r.forwardInit(cfg)
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
			}
			if !r.dryRun {
				src = r.handOver(set, sl, key, src)
			}
			set.slots[sl] = slotSource{key: key, src: src}
			spec.Sources = append(spec.Sources, pipeline.SourceEntry{Source: src, Fallthrough: sc.Fallthrough})
		}
		zones = append(zones, spec)
	}
	return zones
}

// source builds one source: the switch over every kind.
func (r *Registry) source(ctx context.Context, cfg *config.Config, z config.Zone, sc config.Source, set *Set) (pipeline.Source, error) {
	switch sc.Kind {
	case config.KindHosts:
		return r.hostsSource(z, sc.Hosts, set)
	case config.KindForward:
		return r.forwardSource(ctx, cfg, z, sc.Forward, set)
	case config.KindEtcd:
		return r.etcdSource(ctx, cfg, z, sc.Etcd, set)
	case config.KindKubernetes:
		return r.kubernetesSource(ctx, cfg, z, sc.Kubernetes, set)
	default:
		return nil, fmt.Errorf("unknown source kind %q", sc.Kind)
	}
}

// hostsSource builds a hosts source. The files (in any order) are read and
// watched by one shared backend whatever the sources' ttls; the registry
// backend is that backend's View for the source's ttl, so a reload that
// only changes ttl reads no file.
func (r *Registry) hostsSource(z config.Zone, h *config.Hosts, set *Set) (pipeline.Source, error) {
	if len(h.Files) == 0 {
		return hosts.NewSource(nil, h.Entries, h.TTL, h.Reverse, &r.serials), nil
	}
	filesKey := hostsFilesKey(h)
	v, fresh, err := r.acquire(set, config.KindHosts, filesKey+" ttl="+h.TTL.String(), func() (any, io.Closer, error) {
		// Under r.mu (acquire holds it).
		shared := r.hostsFiles[filesKey]
		if shared == nil {
			b, err := hosts.OpenBackend(h.Files, h.TTL, r.logger, &r.serials)
			if err != nil {
				return nil, nil, err
			}
			shared = &sharedBackend{key: filesKey, closer: b, value: b}
			if r.hostsFiles == nil {
				r.hostsFiles = make(map[string]*sharedBackend)
			}
			r.hostsFiles[filesKey] = shared
		}
		shared.refs++
		b := shared.value.(*hosts.Backend)
		view := &hostsView{View: b.View(h.TTL), releaser: releaser{release: func() { r.releaseShared(r.hostsFiles, shared) }}}
		return view, view, nil
	})
	if err != nil {
		return nil, err
	}
	view := v.(*hostsView).View
	if fresh {
		if n, example := view.Backend().Outside(z.Names); n > 0 {
			r.logger.Info("hosts names outside the zone are ignored", "zone", z.Key, "names", n, "example", example, "files", h.Files)
		}
	}
	return hosts.NewViewSource(view, h.Entries, h.TTL, h.Reverse, &r.serials), nil
}

// hostsFilesKey identifies a hosts backend: the same files, in any order.
func hostsFilesKey(h *config.Hosts) string {
	files := append([]string(nil), h.Files...)
	sort.Strings(files)
	return "files=" + strings.Join(files, "\x00")
}

// sharedBackend is a backend shared by the registry entries of several
// views of it (hosts files read once for every ttl). Guarded by r.mu.
type sharedBackend struct {
	key    string
	refs   int
	value  any
	closer io.Closer
}

// releaser is the part of a registry backend value that is a view of a
// shared connection or backend (etcd, kubernetes, hosts files): closing it
// closes the view, then releases the view's reference on what it shares,
// once.
type releaser struct {
	release func()
	once    sync.Once
}

func (r *releaser) closeThen(view io.Closer) error {
	r.once.Do(func() {
		_ = view.Close()
		r.release()
	})
	return nil
}

// hostsView is the registry's backend value for a hosts source with files.
type hostsView struct {
	*hosts.View
	releaser
}

func (v *hostsView) Close() error { return v.closeThen(v.View) }

// releaseShared drops a reference on a shared backend of m and closes it
// when it was the last.
func (r *Registry) releaseShared(m map[string]*sharedBackend, s *sharedBackend) {
	r.mu.Lock()
	s.refs--
	last := s.refs == 0 && m[s.key] == s
	if last {
		delete(m, s.key)
	}
	r.mu.Unlock()
	if last {
		_ = s.closer.Close()
	}
}

// acquire returns the running backend for key, or opens one with open;
// fresh is true when this build started it.
// The registry lock is held while opening, so two zones never open the
// same backend twice.
func (r *Registry) acquire(set *Set, kind, key string, open func() (any, io.Closer, error)) (value any, fresh bool, err error) {
	full := kind + " " + key
	r.mu.Lock()
	defer r.mu.Unlock()
	b, ok := r.backends[full]
	if ok {
		// Started earlier in this same build (another zone): still fresh.
		fresh = slices.Contains(set.Fresh, full)
	} else {
		start := time.Now()
		v, c, err := open()
		if err != nil {
			return nil, false, err
		}
		fresh = true
		b = &backend{key: full, kind: kind, value: v, close: c}
		r.backends[full] = b
		set.Fresh = append(set.Fresh, full)
		r.logger.Info("backend started", "kind", kind, "key", key, "took", time.Since(start).Round(time.Microsecond))
	}
	b.refs++
	set.keys = append(set.keys, full)
	return b.value, fresh, nil
}

func (r *Registry) release(keys []string) {
	var stop []*backend
	r.mu.Lock()
	for _, k := range keys {
		b := r.backends[k]
		if b == nil {
			continue
		}
		b.refs--
		if b.refs == 0 {
			delete(r.backends, k)
			stop = append(stop, b)
		}
	}
	r.mu.Unlock()
	for _, b := range stop {
		if err := b.close.Close(); err != nil {
			r.logger.Warn("backend stop", "kind", b.kind, "key", b.key, "err", err)
		} else {
			r.logger.Info("backend stopped", "kind", b.kind, "key", b.key)
		}
	}
}

// Len reports how many backends are running (for tests).
func (r *Registry) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.backends)
}

// Close stops every backend regardless of references (process exit).
func (r *Registry) Close() {
	r.cancel()
	r.wg.Wait() // handovers let go of their old backends
	r.mu.Lock()
	all := r.backends
	r.backends = make(map[string]*backend)
	r.mu.Unlock()
	for _, b := range all {
		_ = b.close.Close()
	}
	r.forward.close()
	r.etcd.close()
	r.kube.close()
}

// Swapped tells the registry that the pipeline built from cfg (holding
// set) is now the one serving (after a start or a reload), so process-wide
// state can follow it: the forward cache drops entries of zones that no
// longer forward, and the next build knows which source served each slot.
func (r *Registry) Swapped(cfg *config.Config, p *pipeline.Pipeline, set *Set) {
	r.forward.swapped(cfg, p)
	if set != nil {
		r.mu.Lock()
		r.serving = set.slots
		r.mu.Unlock()
	}
}

// Synced reports every running backend by name and whether its first sync
// is done (backends that load synchronously, like hosts, always are).
func (r *Registry) Synced(yield func(name string, synced bool)) {
	r.mu.Lock()
	type row struct {
		name   string
		synced bool
	}
	rows := make([]row, 0, len(r.backends))
	for _, b := range r.backends {
		ok := true
		if s, isSyncer := b.value.(pipeline.Syncer); isSyncer {
			ok = s.Synced()
		}
		rows = append(rows, row{b.key, ok})
	}
	r.mu.Unlock()
	for _, rw := range rows {
		yield(rw.name, rw.synced)
	}
}
