package file

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/dnsd/dnsd/internal/fswatch"
	"github.com/dnsd/dnsd/internal/pacing"
	"github.com/dnsd/dnsd/pipeline"
	"github.com/dnsd/dnsd/sources/kind"
)

// debounce is how long the watched directories must be quiet before the
// zone is parsed again (editors and `mv` make bursts of events; see
// fswatch.Debounce).
const debounce = fswatch.Debounce

// emptyGrace is how long a zone that lost every record must stay so
// before it is applied: an in-place rewrite truncates the file first, and
// an empty zone answers NXDOMAIN for every name it had.
const emptyGrace = fswatch.EmptyGrace

// snapshot is what readers see: the last good zone and its serial.
type snapshot struct {
	z      *zone
	serial uint32
}

// Backend holds one file source's zone and keeps it current: it watches
// the zone file's directory (and its includes'), parses again after a
// quiet debounce, and publishes the new zone with one atomic store. A
// file that turns bad (does not parse, cannot be read) keeps the last
// good zone; the error is logged once per change. A zone that loses every
// record (a file emptied) is applied once it has stayed so for
// emptyGrace.
type Backend struct {
	cfg     *Config
	logger  *slog.Logger
	serials *pipeline.SerialClock
	bulk    kind.Bulk // told of every reload
	// pacing: how a reload gives way to the server on one processor (see
	// package pacing); tests count its sleeps.
	pacing atomic.Pointer[pacing.Pacing]
	cur    atomic.Pointer[snapshot]

	watcher *fswatch.Watcher // calls reload; nil: not watching (inline records only, dry run)
	lastErr string           // the error logged last (watcher's goroutine only)
	// failing: the last reload could not read a file (watcher's
	// goroutine only); the watcher reads it again with backoff.
	failing bool
}

// Open parses the zone of c (or takes over the parse its config check made)
// and, when watch is set and c has a file, starts watching it. bulk (may
// be nil) is told of every reload.
func Open(c *Config, watch bool, logger *slog.Logger, serials *pipeline.SerialClock, bulk kind.Bulk) (*Backend, error) {
	z := c.takeParsed()
	if z == nil {
		var err error
		if z, err = load(c, nil); err != nil { // a start: not paced
			return nil, err
		}
	}
	b := &Backend{cfg: c, logger: logger.With("source", "file", "file", c.Path), serials: serials, bulk: bulk}
	b.pacing.Store(&pacing.Pacing{Sleep: time.Sleep})
	b.cur.Store(&snapshot{z: z, serial: serials.Next()})
	b.warnLoad(z)
	if !watch || c.Path == "" {
		return b, nil
	}
	// The zone file and its includes are read as one: a change of any
	// parses the zone again.
	w, err := fswatch.New(z.files, b.reload, fswatch.Options{Logger: b.logger, Name: "zone file",
		Debounce: debounce, EmptyGrace: emptyGrace, Together: true})
	if err != nil {
		return nil, err
	}
	b.watcher = w
	return b, nil
}

// Close stops watching and waits for a reload running. Idempotent.
func (b *Backend) Close() error {
	if b.watcher == nil {
		return nil
	}
	return b.watcher.Close()
}

func (b *Backend) snapshot() *snapshot { return b.cur.Load() }

var _ kind.Loader = (*Backend)(nil)

// Loaded implements kind.Loader: the records the zone file (with its
// includes and the inline records) loaded.
func (b *Backend) Loaded() []any { return []any{"records", b.snapshot().z.records} }

// turnedEmpty reports whether a file of was (the zone file or a file it
// includes) that held something is empty in z: a file rewritten in place
// is truncated first, and the records beside it (inline ones, other
// files') must not hide that.
func turnedEmpty(was, z *zone) bool {
	for i, f := range z.files {
		if i >= len(z.infos) || z.infos[i] == nil || z.infos[i].Size() != 0 {
			continue
		}
		for j, g := range was.files {
			if g == f && j < len(was.infos) && was.infos[j] != nil && was.infos[j].Size() > 0 {
				return true
			}
		}
	}
	return false
}

// reload is the watcher's Func: it parses the zone again and publishes
// it when it changed and is good. A zone without records, or one of
// whose files turned empty, is applied only after emptyGrace (held on
// the zone file: c hands it over again then).
func (b *Backend) reload(_ context.Context, c *fswatch.Change) {
	defer b.bulk.Begin()()
	prev := b.snapshot()
	z, err := load(b.cfg, b.pacing.Load()) // a reload: paced
	wasFailing := b.failing
	b.failing = err != nil && unreadable(err)
	if err != nil {
		if b.failing {
			c.Failed(b.cfg.Path) // read again with backoff
		}
		msg := err.Error()
		switch {
		case msg != b.lastErr:
			b.lastErr = msg
			if b.failing {
				msg += " (read again until it is read)"
			}
			b.logger.Error("zone file not applied, the last good zone is served", "error", msg)
		case b.failing:
			b.logger.Debug("zone file still unreadable", "error", msg)
		}
		return
	}
	if wasFailing {
		b.logger.Info("zone file readable again")
	}
	if (z.records == 0 && prev.z.records > 0 || turnedEmpty(prev.z, z)) && z.sum != prev.z.sum {
		hold, waited := c.HoldEmpty(b.cfg.Path)
		switch {
		case hold && waited == 0:
			b.lastErr = ""
			b.logger.Info("zone file has no record or turned empty; the last good zone is served unless it stays so", "for", emptyGrace)
			return
		case hold:
			return
		}
		b.logger.Warn("zone file stayed without a record or empty, serving what is left", "for", waited.Round(time.Millisecond))
	}
	if z.sum == prev.z.sum {
		b.lastErr = "" // back as it was: a new breakage is logged again
		return
	}
	b.lastErr = ""
	b.cur.Store(&snapshot{z: z, serial: max(b.serials.Next(), prev.serial+1)})
	c.Watch(z.files) // a new $INCLUDE, maybe elsewhere
	b.logger.Info("zone file reloaded", "records", z.records)
	b.warnLoad(z)
	for zone, soa := range z.soas {
		if was := prev.z.soas[zone]; was != nil && pipeline.SerialLess(soa.Serial, was.Serial) {
			b.logger.Warn("zone file's SOA serial went back: secondaries keep their copy until it passes the one they have",
				"zone", zone, "serial", soa.Serial, "was", was.Serial)
		}
	}
}

// warnLoad logs, once per load, what the load of z left out or mended:
// records outside the zone key's zones, records beside a CNAME, TTLs
// made their RRset's.
func (b *Backend) warnLoad(z *zone) {
	if z.outside > 0 {
		b.logger.Warn("zone records outside the zone key's zones are ignored", "records", z.outside, "example", z.example)
	}
	if z.conflicts > 0 {
		b.logger.Warn("zone records beside a CNAME (or a CNAME beside other data) are ignored; the first written is kept",
			"records", z.conflicts, "example", z.conflict)
	}
	if z.ttlFixed > 0 {
		b.logger.Warn("zone records with another TTL than the first of their RRset get its TTL",
			"records", z.ttlFixed, "example", z.ttlName)
	}
}
