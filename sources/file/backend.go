package file

import (
	"errors"
	"log/slog"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/dnsd/dnsd/internal/fsutil"
	"github.com/dnsd/dnsd/internal/turns"
	"github.com/dnsd/dnsd/pipeline"
	"github.com/dnsd/dnsd/sources/kind"
)

// debounce is how long the watched directories must be quiet before the
// zone is parsed again (editors and `mv` make bursts of events).
const debounce = 50 * time.Millisecond

// emptyGrace is how long a zone that lost every record must stay so
// before it is applied: an in-place rewrite truncates the file first, and
// an empty zone answers NXDOMAIN for every name it had.
const emptyGrace = time.Second

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
	// package turns); tests count its sleeps.
	pacing atomic.Pointer[turns.Pacing]
	cur    atomic.Pointer[snapshot]

	watcher *fsnotify.Watcher // nil: not watching (inline records only, dry run)
	stop    chan struct{}
	done    chan struct{}
	once    sync.Once
	lastErr string // the error logged last (run goroutine only)
	// failing: the last reload could not read a file (run goroutine
	// only); it is read again with backoff (see run).
	failing bool
	// emptySince: when the zone was first read without a record while
	// the one served has some (run goroutine only).
	emptySince time.Time
}

// Open parses the zone of c (or takes over the parse ParseSettings made)
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
	b := &Backend{cfg: c, logger: logger.With("source", "file", "file", c.Path), serials: serials,
		bulk: bulk, stop: make(chan struct{}), done: make(chan struct{})}
	b.pacing.Store(&turns.Pacing{Sleep: time.Sleep})
	b.cur.Store(&snapshot{z: z, serial: serials.Next()})
	b.warnLoad(z)
	if !watch || c.Path == "" {
		close(b.done)
		return b, nil
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, err
	}
	b.watcher = w
	if err := b.watchDirs(z); err != nil {
		w.Close()
		return nil, err
	}
	go b.run()
	return b, nil
}

// watchDirs watches the directories of the zone's files.
func (b *Backend) watchDirs(z *zone) error {
	for _, d := range b.dirs(z) {
		if err := b.watcher.Add(d); err != nil {
			return err
		}
	}
	return nil
}

// dirs are the directories of the zone's files and, for a symlink into
// another directory, that one too, where the file it names changes.
func (b *Backend) dirs(z *zone) []string {
	var dirs []string
	for _, f := range z.files {
		for _, d := range []string{filepath.Dir(f), fsutil.TargetDir(f)} {
			if d != "" && !slices.Contains(dirs, d) {
				dirs = append(dirs, d)
			}
		}
	}
	return dirs
}

// Close stops watching and waits for the watch goroutine.
func (b *Backend) Close() error {
	b.once.Do(func() {
		close(b.stop)
		if b.watcher != nil {
			b.watcher.Close()
		}
	})
	<-b.done
	return nil
}

func (b *Backend) snapshot() *snapshot { return b.cur.Load() }

// run collects events until the directories are quiet for debounce, then
// parses the zone again — when an event named one of its files, or one
// of them is no longer the file, or of the size or time, it was when
// read (a symlink swapped elsewhere in the directory): other files of the
// directories changing cost a stat each, not a parse. It ends when Close
// is called.
func (b *Backend) run() {
	defer close(b.done)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	named := false // an event since the last reload named a file of the zone
	rewatch := time.NewTicker(fsutil.RewatchEvery)
	defer rewatch.Stop()
	// A file that could not be read is read again with backoff until it
	// is: nothing on the filesystem may change when the cause goes away.
	retry := fsutil.NewRetry()
	defer retry.Stop()
	reload := func() {
		again := b.reload()
		if again > 0 {
			timer.Reset(again)
		}
		if b.failing {
			retry.Failed()
		} else {
			retry.Succeeded()
		}
	}
	for {
		select {
		case <-b.stop:
			return
		case <-rewatch.C:
			// A directory removed (or unmounted) and back: read again.
			if dirs := fsutil.Rewatch(b.watcher, b.dirs(b.snapshot().z)); len(dirs) > 0 {
				b.logger.Info("zone file: watching a directory again", "dirs", dirs)
				named = true
				timer.Reset(debounce)
			}
		case ev, ok := <-b.watcher.Events:
			if !ok {
				return
			}
			named = named || slices.Contains(b.snapshot().z.files, filepath.Clean(ev.Name))
			timer.Reset(debounce)
		case err, ok := <-b.watcher.Errors:
			if !ok {
				return
			}
			b.logger.Warn("zone file watcher error", "error", err)
			if errors.Is(err, fsnotify.ErrEventOverflow) {
				named = true // events lost: read again
				timer.Reset(debounce)
			}
		case <-timer.C:
			named = named || !b.emptySince.IsZero() // the empty zone's recheck
			if named || b.movedOnDisk() {
				reload()
			}
			named = false
		case <-retry.C:
			retry.Fired()
			reload()
		}
	}
}

// movedOnDisk reports whether a file of the zone is not the file, or not
// of the size or modification time, that it was when last read.
func (b *Backend) movedOnDisk() bool {
	z := b.snapshot().z
	for i, f := range z.files {
		if i >= len(z.infos) || fsutil.Moved(f, z.infos[i]) {
			return true
		}
	}
	return false
}

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

// reload parses the zone again and publishes it when it changed and is
// good. It returns when to read the zone again without an event (0: not
// needed): a zone without records, or one of whose files turned empty, is
// applied only after emptyGrace.
func (b *Backend) reload() (again time.Duration) {
	defer b.bulk.Begin()()
	prev := b.snapshot()
	z, err := load(b.cfg, b.pacing.Load()) // a reload: paced
	wasFailing := b.failing
	b.failing = err != nil && unreadable(err)
	if err != nil {
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
		return 0
	}
	if wasFailing {
		b.logger.Info("zone file readable again")
	}
	if (z.records == 0 && prev.z.records > 0 || turnedEmpty(prev.z, z)) && z.sum != prev.z.sum {
		now := time.Now()
		if b.emptySince.IsZero() {
			b.emptySince = now
			b.lastErr = ""
			b.logger.Info("zone file has no record or turned empty; the last good zone is served unless it stays so", "for", emptyGrace)
			return emptyGrace
		}
		if waited := now.Sub(b.emptySince); waited < emptyGrace {
			return emptyGrace - waited
		}
		b.logger.Warn("zone file stayed without a record or empty, serving what is left", "for", now.Sub(b.emptySince).Round(time.Millisecond))
	}
	b.emptySince = time.Time{}
	if z.sum == prev.z.sum {
		b.lastErr = "" // back as it was: a new breakage is logged again
		return 0
	}
	b.lastErr = ""
	b.cur.Store(&snapshot{z: z, serial: max(b.serials.Next(), prev.serial+1)})
	if err := b.watchDirs(z); err != nil { // a new $INCLUDE elsewhere
		b.logger.Warn("zone file watcher", "error", err)
	}
	b.logger.Info("zone file reloaded", "records", z.records)
	b.warnLoad(z)
	for zone, soa := range z.soas {
		if was := prev.z.soas[zone]; was != nil && pipeline.SerialLess(soa.Serial, was.Serial) {
			b.logger.Warn("zone file's SOA serial went back: secondaries keep their copy until it passes the one they have",
				"zone", zone, "serial", soa.Serial, "was", was.Serial)
		}
	}
	return 0
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
