package fswatch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/dnsd/dnsd/internal/fsutil"
)

// The defaults of Options.
const (
	// Debounce is how long the watched directories must be quiet (no
	// event) before the changed files are handed over: the timer restarts
	// at every event, so a file rewritten in place (`>` redirection, cp),
	// truncated and then written in pieces, is read once the writer is
	// done, and an editor's burst of events makes one read.
	Debounce = 50 * time.Millisecond
	// EmptyGrace is how long a file held empty (Change.HoldEmpty) must
	// stay so before its emptiness is applied.
	EmptyGrace = time.Second
)

// RewatchEvery is how often the watcher looks for a watched directory
// that lost its watch (removed, or its file system unmounted) and exists
// again.
const RewatchEvery = 2 * time.Second

// Options are what a Watcher is made with besides its files and Func;
// the zero value is valid.
type Options struct {
	// Logger (nil: discarded) is told of the watcher's own events.
	Logger *slog.Logger
	// Name starts the watcher's log messages ("hosts": "hosts watcher
	// error", "hosts: watching a directory again"); "" is "file".
	Name string
	// Debounce is the quiet wait before a change is handed over
	// (0: Debounce).
	Debounce time.Duration
	// EmptyGrace is how long a file is held empty (0: EmptyGrace).
	EmptyGrace time.Duration
	// Together: the files are read as one whole (a zone file and the
	// files it includes): a change of any of them hands over all of them.
	// Default false: each file is handed over alone.
	Together bool
}

// Func is called on the watcher's goroutine with the files that changed
// and are quiet. It reads them and tells c what it found (Failed,
// HoldEmpty, Watch); c is valid only during the call. ctx ends when the
// Watcher is closed.
type Func func(ctx context.Context, c *Change)

// Change is the files handed to a Func, and what the Func found.
type Change struct {
	// Files are the watched files to read again, in the order they are
	// watched, as they were given: named by an event, no longer the
	// file last handed over (replaced, a symlink on the way swapped), in
	// a directory watched again, due a retry or an empty recheck. With
	// Options.Together, all the files. Never empty.
	Files []string

	w      *Watcher
	now    time.Time
	failed map[*file]bool
	held   map[*file]bool
	watch  []string
	rewire bool
}

// Failed says that file (a watched one) could not be read: it is handed
// over again with backoff until it is read, and at every event in its
// directory.
func (c *Change) Failed(file string) {
	if f := c.w.lookup(file); f != nil {
		c.failed[f] = true
	}
}

// HoldEmpty says that file (a watched one) turned empty, or that what the
// Func read from it lost everything it held: hold reports whether to keep
// the last data. It holds the first time it is told, and until the file
// has been held for the grace; the file is then handed over again (with
// Together, all the files), and a HoldEmpty then returns false: apply it.
// waited is how long it has been held (0 the first time). A file handed
// over and not held again (refilled) is no longer held.
func (c *Change) HoldEmpty(file string) (hold bool, waited time.Duration) {
	f := c.w.lookup(file)
	if f == nil {
		return false, 0
	}
	if f.heldSince.IsZero() {
		f.heldSince = c.now
		c.held[f] = true
		return true, 0
	}
	if waited = c.now.Sub(f.heldSince); waited < c.w.grace {
		c.held[f] = true
		return true, waited
	}
	f.heldSince = time.Time{}
	delete(c.held, f)
	return false, waited
}

// Watch makes files the watched ones from now on (a zone file's
// includes changed); the state of the files kept is kept.
func (c *Change) Watch(files []string) {
	c.watch, c.rewire = slices.Clone(files), true
}

// Watcher watches a set of files (see the package comment). Close stops
// it.
type Watcher struct {
	read     Func
	logger   *slog.Logger
	name     string
	debounce time.Duration
	grace    time.Duration
	together bool

	fsw   *fsnotify.Watcher
	files []*file // the watch goroutine's once it runs

	cancel    context.CancelFunc
	done      chan struct{}
	closeOnce sync.Once
	closeErr  error
}

// file is one watched file and what the watcher knows of it.
type file struct {
	path   string // as given
	abs    string // cleaned absolute path, as events name it
	dir    string
	target string // the directory a symlink at abs names, when elsewhere ("": none)
	// info: the file's stat just before it was last handed over (nil:
	// it failed, or could not be statted): a file that is no longer
	// this one changed, whatever event says so.
	info      os.FileInfo
	dirty     bool      // to be handed over at the next delivery
	failing   bool      // the Func could not read it
	heldSince time.Time // when the Func first held it empty (zero: not held)
}

// New watches files (read just before by the caller) and calls read on
// its own goroutine with those that change, until Close. A directory
// that cannot be watched is an error.
func New(files []string, read Func, opts Options) (*Watcher, error) {
	w := &Watcher{
		read:     read,
		logger:   opts.Logger,
		name:     opts.Name,
		debounce: opts.Debounce,
		grace:    opts.EmptyGrace,
		together: opts.Together,
		done:     make(chan struct{}),
	}
	if w.logger == nil {
		w.logger = slog.New(slog.DiscardHandler)
	}
	if w.name == "" {
		w.name = "file"
	}
	if w.debounce <= 0 {
		w.debounce = Debounce
	}
	if w.grace <= 0 {
		w.grace = EmptyGrace
	}
	for _, p := range files {
		f, err := newFile(p)
		if err != nil {
			return nil, err
		}
		if w.lookup(p) == nil {
			w.files = append(w.files, f)
		}
	}
	fsw, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("watcher: %w", err)
	}
	w.fsw = fsw
	for _, d := range w.dirs() {
		if err := fsw.Add(d); err != nil {
			fsw.Close()
			return nil, fmt.Errorf("watch directory %s: %w", d, err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	w.cancel = cancel
	go w.run(ctx)
	return w, nil
}

// newFile describes the file at p as it is now.
func newFile(p string) (*file, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return nil, fmt.Errorf("file %s: %w", p, err)
	}
	f := &file{path: p, abs: abs, dir: filepath.Dir(abs), target: fsutil.TargetDir(abs)}
	f.info, _ = os.Stat(abs)
	return f, nil
}

// Close stops watching and waits for the watch goroutine (and a Func
// running) to end. Idempotent.
func (w *Watcher) Close() error {
	w.closeOnce.Do(func() {
		w.cancel()
		if err := w.fsw.Close(); err != nil {
			w.closeErr = fmt.Errorf("close watcher: %w", err)
		}
		<-w.done
	})
	return w.closeErr
}

func (w *Watcher) lookup(p string) *file {
	for _, f := range w.files {
		if f.path == p {
			return f
		}
	}
	return nil
}

// dirs are the directories to watch: each file's, and the one its
// symlink names when elsewhere.
func (w *Watcher) dirs() []string {
	var dirs []string
	for _, f := range w.files {
		for _, d := range []string{f.dir, f.target} {
			if d != "" && !slices.Contains(dirs, d) {
				dirs = append(dirs, d)
			}
		}
	}
	return dirs
}

// add watches dir unless it is watched already; a failure is logged.
func (w *Watcher) add(dir string) {
	if dir == "" || slices.Contains(w.fsw.WatchList(), dir) {
		return
	}
	if err := w.fsw.Add(dir); err != nil {
		w.logger.Warn(w.name+": watch directory", "dir", dir, "error", err)
	}
}

// run is the watch goroutine: it collects events until the directories
// are quiet for the debounce, then hands over what changed. It ends when
// the Watcher is closed.
func (w *Watcher) run(ctx context.Context) {
	defer close(w.done)
	quiet := time.NewTimer(time.Hour)
	quiet.Stop()
	var fire <-chan time.Time // quiet's, while a debounce runs
	arm := func() {
		quiet.Reset(w.debounce)
		fire = quiet.C
	}
	graceTimer := time.NewTimer(time.Hour)
	graceTimer.Stop()
	var graceC <-chan time.Time
	rewatch := time.NewTicker(RewatchEvery)
	retry := newRetry()
	defer func() {
		quiet.Stop()
		graceTimer.Stop()
		rewatch.Stop()
		retry.stop()
	}()
	unnamed := false // an event since the last delivery named none of the files
	deliver := func() {
		if w.deliver(ctx, unnamed) {
			arm() // files newly watched: read again once they are watched
		}
		unnamed = false
		if slices.ContainsFunc(w.files, func(f *file) bool { return f.failing }) {
			retry.failed()
		} else {
			retry.succeeded()
		}
		graceC = nil
		graceTimer.Stop()
		var first time.Time
		for _, f := range w.files {
			if !f.heldSince.IsZero() && (first.IsZero() || f.heldSince.Before(first)) {
				first = f.heldSince
			}
		}
		if !first.IsZero() {
			graceTimer.Reset(max(time.Until(first.Add(w.grace)), time.Millisecond))
			graceC = graceTimer.C
		}
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-rewatch.C:
			for _, d := range rewatchDirs(w.fsw, w.dirs()) {
				w.logger.Info(w.name+": watching a directory again", "dir", d)
				for _, f := range w.files {
					if f.dir == d || f.target == d {
						f.dirty = true
					}
				}
				arm()
			}
		case ev, ok := <-w.fsw.Events:
			if !ok {
				return
			}
			name := filepath.Clean(ev.Name)
			matched := false
			for _, f := range w.files {
				if f.abs == name {
					f.dirty, matched = true, true
				}
			}
			// Another name in a watched directory: a symlink swap
			// (a ConfigMap's "..data") changes a file without an event
			// for its own name. The files are statted to find out.
			unnamed = unnamed || !matched
			arm()
		case err, ok := <-w.fsw.Errors:
			if !ok {
				return
			}
			w.logger.Warn(w.name+" watcher error", "error", err)
			if errors.Is(err, fsnotify.ErrEventOverflow) { // events lost
				for _, f := range w.files {
					f.dirty = true
				}
				arm()
			}
		case <-fire:
			fire = nil
			deliver()
		case <-retry.C:
			retry.fired()
			for _, f := range w.files {
				f.dirty = f.dirty || f.failing
			}
			if fire == nil { // else the debounce hands them over anyway
				deliver()
			}
		case <-graceC:
			graceC = nil
			for _, f := range w.files {
				f.dirty = f.dirty || !f.heldSince.IsZero()
			}
			if fire == nil {
				deliver()
			}
		}
	}
}

// deliver hands the dirty files over to the Func, with those no longer
// the file last handed over when unnamed, and keeps what it found.
func (w *Watcher) deliver(ctx context.Context, unnamed bool) (added bool) {
	due := false
	for _, f := range w.files {
		if !f.dirty && unnamed && fsutil.Moved(f.abs, f.info) {
			f.dirty = true
		}
		due = due || f.dirty
	}
	if !due {
		return false
	}
	c := &Change{w: w, now: time.Now(), failed: make(map[*file]bool), held: make(map[*file]bool)}
	var handed []*file
	for _, f := range w.files {
		if !f.dirty && !w.together {
			continue
		}
		f.dirty = false
		// Statted before it is read: a change after is seen as a move.
		f.info, _ = os.Stat(f.abs)
		// A symlink pointed elsewhere: watch where it points now.
		if f.target = fsutil.TargetDir(f.abs); f.target != "" {
			w.add(f.target)
		}
		handed = append(handed, f)
		c.Files = append(c.Files, f.path)
	}
	w.read(ctx, c)
	for f := range c.failed {
		f.failing, f.info = true, nil
	}
	for _, f := range handed {
		if c.failed[f] {
			continue // its hold, if any, is kept
		}
		f.failing = false
		if !c.held[f] {
			f.heldSince = time.Time{}
		}
	}
	if c.rewire {
		return w.setFiles(c.watch)
	}
	return false
}

// setFiles makes paths the watched files, keeping the state of those
// watched already, and reports whether it added any. An added file is
// dirty: the Func read it before its directory was watched, and a write
// in between would have no event, so it is handed over once more.
func (w *Watcher) setFiles(paths []string) (added bool) {
	files := make([]*file, 0, len(paths))
	for _, p := range paths {
		if slices.ContainsFunc(files, func(f *file) bool { return f.path == p }) {
			continue
		}
		f := w.lookup(p)
		if f == nil {
			var err error
			if f, err = newFile(p); err != nil {
				w.logger.Warn(w.name+": watch", "error", err)
				continue
			}
			f.dirty, added = true, true
		}
		files = append(files, f)
	}
	w.files = files
	for _, d := range w.dirs() {
		w.add(d)
	}
	return added
}

// rewatchDirs adds to w each of dirs that w no longer watches and that
// exists again, and returns those it added. The kernel drops a
// directory's watch when the directory is removed (or its file system
// unmounted), and no event says when it comes back: without this, a
// directory deleted and made again would never be watched, and its files
// never read, again.
func rewatchDirs(w *fsnotify.Watcher, dirs []string) (added []string) {
	watching := w.WatchList()
	for _, d := range dirs {
		if slices.Contains(watching, d) {
			continue
		}
		if err := w.Add(d); err == nil {
			added = append(added, d)
		}
	}
	return added
}
