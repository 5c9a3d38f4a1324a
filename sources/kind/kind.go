package kind

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dnsd/dnsd/config"
	"github.com/dnsd/dnsd/internal/pacing"
	"github.com/dnsd/dnsd/pipeline"
)

// Kind is one source kind. A Kind value lives as long as the registry it
// is given to and may hold the kind's process-lifetime state (metrics,
// shared connections, a cache); it must be safe for concurrent use.
type Kind interface {
	config.KindParser
	// Build returns the source of one entry of a zone's source list;
	// settings is what its Settings read for it. Backends the source
	// needs are taken with env.Acquire, so that equal settings share one
	// backend across zones and reloads. In a dry run (env.DryRun) Build
	// checks what it can without touching the network and returns a
	// source that is never asked.
	Build(ctx context.Context, env *Env, z config.Zone, settings any) (pipeline.Source, error)
}

// Preparer is implemented by kinds that need to see every config being
// built, whether or not it uses them (the forward kind's response cache
// exists from the first build).
type Preparer interface {
	Prepare(env *Env)
}

// Swapper is implemented by kinds that follow the pipeline serving
// queries (called after a start or a reload swapped it in).
type Swapper interface {
	Swapped(cfg *config.Config, p *pipeline.Pipeline)
}

// ParsePacer is implemented by kinds whose settings check does long work (a
// zone file parsed in full, to report its errors with the config's). For
// a config loaded while another serves (a reload) they are handed the
// pacing that work gives way with on one processor (see package pacing).
type ParsePacer interface {
	PaceParses(pace *pacing.Pacing)
}

// CacheFlusher is implemented by kinds that keep a response cache.
type CacheFlusher interface {
	// FlushCache drops the entries for name and every name below it (""
	// or ".": all) and returns how many it dropped.
	FlushCache(name string) int
}

// A Kind that is also an io.Closer is closed when the registry closes
// (process exit), after every backend has stopped.

// Env is what the registry lends a kind during one Build call.
type Env struct {
	// Config is the whole config being built. Never nil.
	Config *config.Config
	Logger *slog.Logger // never nil
	// Registerer receives the kind's metrics; register them once per
	// Kind value, not per build. Never nil.
	Registerer prometheus.Registerer
	DryRun     bool // false: a real build
	// Serving: queries are being answered while this build runs (a
	// reload). A backend it opens loads giving way to them where the kind
	// can (see pacing in the hosts kind). False at a start.
	Serving bool
	// Serials hands out SOA serials for data changes: one clock for the
	// whole process, so a zone's serial rises with any change of any of
	// its sources. Never nil.
	Serials *pipeline.SerialClock

	// Bulk is told of a backend's bursts of background work (see Bulk);
	// nil: nobody is.
	Bulk Bulk
	// Warnings, when not nil, is handed every warning about the config
	// that Warn logs, as one line (`dnsd check` prints them).
	Warnings func(line string)
	// AcquireFunc is the registry's backend table (see Acquire). Never nil.
	AcquireFunc func(key string, open func() (any, io.Closer, error)) (value any, fresh bool, err error)
}

// Warn logs a warning about the config (msg, then slog's key-value
// args) at WARN and hands it to Warnings, when set, as one line: msg
// followed by key=value for each pair (a value with a space or a quote
// quoted).
func (e *Env) Warn(msg string, args ...any) {
	e.Logger.Warn(msg, args...)
	if e.Warnings == nil {
		return
	}
	r := slog.NewRecord(time.Time{}, slog.LevelWarn, msg, 0)
	r.Add(args...)
	var b strings.Builder
	b.WriteString(msg)
	r.Attrs(func(a slog.Attr) bool {
		v := a.Value.Resolve().String()
		if v == "" || strings.ContainsAny(v, " \t\"=") || strconv.Quote(v) != `"`+v+`"` {
			v = strconv.Quote(v)
		}
		fmt.Fprintf(&b, " %s=%s", a.Key, v)
		return true
	})
	e.Warnings(b.String())
}

// Bulk is told when a backend begins a burst of background work that
// allocates much — a file read and indexed again, records built ahead,
// an etcd prefix read — and returns the func that ends it (call it once).
// The process makes room for such work meanwhile: dnsd lets the heap grow
// further before the garbage collector runs, so a reload is not made to
// collect over and over as its new data grows (on one processor each
// collection, and each allocation that must help it, holds up the
// queries). Bursts may overlap. A nil Bulk does nothing.
type Bulk func() (end func())

// Begin begins a burst; call end once it is over.
func (b Bulk) Begin() (end func()) {
	if b == nil {
		return func() {}
	}
	return b()
}

// Acquire returns the running backend registered under key for this kind,
// or opens it with open; fresh is true when this build started it. The
// registry counts who holds each backend and closes it (the io.Closer
// open returned) once no serving pipeline uses it. open runs under the
// registry's lock: it must not call Acquire.
func (e *Env) Acquire(key string, open func() (any, io.Closer, error)) (value any, fresh bool, err error) {
	return e.AcquireFunc(key, open)
}

// Shared holds things several backends share — one connection under
// views with different ttls, one read of the same hosts files — one per
// key, counted, and closed when the last holder lets go. Opens run
// outside its lock, one at a time per key: other keys proceed, and those
// who ask for a key being opened wait for that open. The zero value is
// ready to use.
type Shared[T io.Closer] struct {
	mu sync.Mutex
	m  map[string]*sharedEntry[T]
}

type sharedEntry[T io.Closer] struct {
	refs  int
	ready chan struct{} // closed once open returned; value and err are set then
	value T
	err   error
}

// Acquire returns the value for key, opening it with open the first time
// (opened: this call did), and a release func that drops this reference
// (closing the value when it was the last, and then reporting true).
// release may be called more than once; only the first call counts. A
// call that finds key being opened waits for that open and shares its
// value, or gets its error: a failed open is not kept, the next Acquire
// opens again.
func (s *Shared[T]) Acquire(key string, open func() (T, error)) (value T, release func() (closed bool), opened bool, err error) {
	s.mu.Lock()
	e := s.m[key]
	if e != nil {
		e.refs++ // held while waiting, so a release meanwhile keeps it
		s.mu.Unlock()
		<-e.ready
		if e.err != nil {
			return value, nil, false, e.err // the failed entry is out of the map already
		}
		return e.value, s.releaser(key, e), false, nil
	}
	if s.m == nil {
		s.m = make(map[string]*sharedEntry[T])
	}
	e = &sharedEntry[T]{refs: 1, ready: make(chan struct{})}
	s.m[key] = e
	s.mu.Unlock()

	returned := false
	defer func() {
		if !returned { // open panicked: waiters get an error, not a wait forever
			s.opened(key, e, value, fmt.Errorf("opening %s panicked", key))
		}
	}()
	v, err := open()
	returned = true
	s.opened(key, e, v, err)
	if err != nil {
		return value, nil, false, err
	}
	return v, s.releaser(key, e), true, nil
}

// opened records the outcome of e's open and wakes its waiters; a failed
// open leaves the map.
func (s *Shared[T]) opened(key string, e *sharedEntry[T], v T, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e.value, e.err = v, err
	if err != nil && s.m[key] == e {
		delete(s.m, key)
	}
	close(e.ready)
}

func (s *Shared[T]) releaser(key string, e *sharedEntry[T]) func() (closed bool) {
	var once sync.Once
	return func() (closed bool) {
		once.Do(func() { closed = s.release(key, e) })
		return closed
	}
}

func (s *Shared[T]) release(key string, e *sharedEntry[T]) (closed bool) {
	s.mu.Lock()
	e.refs--
	last := e.refs == 0 && s.m[key] == e
	if last {
		delete(s.m, key)
	}
	s.mu.Unlock()
	if last {
		_ = e.value.Close()
	}
	return last
}

// CloseAll closes every value regardless of references (process exit),
// those being opened once their open returns.
func (s *Shared[T]) CloseAll() {
	s.mu.Lock()
	m := s.m
	s.m = nil
	s.mu.Unlock()
	for _, e := range m {
		<-e.ready
		if e.err == nil {
			_ = e.value.Close()
		}
	}
}

// View pairs a backend value with the release of what it shares: closing
// it closes the value, then releases, once. Opened says whether making
// the value opened the shared part (a connection, a read of files) or
// found it running: a view with another ttl starts no backend, and the
// registry's log says which (see Sharer).
type View[T io.Closer] struct {
	Value   T                    // always set
	Release func() (closed bool) // never nil
	Opened  bool                 // false: found running
	once    sync.Once
	closed  bool
}

// Close closes the value and releases the shared part, once.
func (v *View[T]) Close() error {
	v.once.Do(func() {
		_ = v.Value.Close()
		v.closed = v.Release()
	})
	return nil
}

// OpenedShared reports whether making the view opened its shared part.
func (v *View[T]) OpenedShared() bool { return v.Opened }

// ClosedShared reports whether closing the view closed its shared part
// (it was the last view of it).
func (v *View[T]) ClosedShared() bool { return v.closed }

// Loader is a backend (the value an open returned to Acquire) that says
// what its open loaded: the registry adds Loaded's key-value pairs
// ("records", 12) to its "backend started" line.
type Loader interface {
	Loaded() []any
}

// Sharer is a backend's closer that is a view of something shared
// (*View): whether making it opened, and closing it closed, that.
type Sharer interface {
	OpenedShared() bool
	ClosedShared() bool
}

// Len reports how many values are open (opens in flight not counted).
func (s *Shared[T]) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, e := range s.m {
		select {
		case <-e.ready:
			n++ // a failed open is out of the map
		default:
		}
	}
	return n
}
