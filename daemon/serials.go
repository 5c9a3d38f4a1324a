package daemon

import (
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/dnsd/dnsd/config"
	"github.com/dnsd/dnsd/internal/serials"
	"github.com/dnsd/dnsd/pipeline"
)

// saveEvery is how often the served serials are looked at and, when any
// rose, saved: at most one write a second.
const saveEvery = time.Second

// serialKeeper keeps the serials the zones were served with in
// state_dir/serials (package serials), so that a restart starts every
// zone above them. It looks at the current pipeline's serials every
// saveEvery and at stop. Without a state directory (the default one
// that does not exist: dnsd creates it only for sources that keep data
// there) it keeps nothing.
type serialKeeper struct {
	logger  *slog.Logger
	current func() *pipeline.Pipeline

	mu      sync.Mutex // store, failing
	store   *serials.Store
	failing bool // the last save failed (logged once until one works)

	stop chan struct{}
	done chan struct{}
}

// keptDir reports whether dnsd keeps serials in cfg's state_dir: one set
// in dnsd.yaml, or the default one when it exists.
func keptDir(cfg *config.Config) bool {
	if cfg.StateDir != config.DefaultStateDir {
		return true
	}
	fi, err := os.Stat(cfg.StateDir)
	return err == nil && fi.IsDir()
}

// newSerialKeeper opens cfg's serials file. A file that cannot be read is
// logged; the zones then start from their sources' serials.
func newSerialKeeper(cfg *config.Config, logger *slog.Logger) *serialKeeper {
	k := &serialKeeper{logger: logger}
	k.open(cfg)
	return k
}

func (k *serialKeeper) open(cfg *config.Config) {
	if !keptDir(cfg) {
		k.logger.Info("state_dir does not exist: zone serials are not kept across restarts", "state_dir", cfg.StateDir)
		return
	}
	st, err := serials.Open(cfg.StateDir)
	if err != nil {
		k.logger.Warn("zone serials file unreadable; serials start from the sources' own and are saved over it", "err", err)
	}
	k.store = st
}

// floors are the serials to start cfg's zones above (pipeline.Options):
// those known and, when cfg names another kept state_dir (a reload), those
// of its file too.
func (k *serialKeeper) floors(cfg *config.Config) map[pipeline.ZoneKey]uint32 {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out map[pipeline.ZoneKey]uint32
	if k.store != nil {
		out = k.store.Floors()
	}
	if keptDir(cfg) && (k.store == nil || k.store.Dir() != cfg.StateDir) {
		if other, err := serials.Open(cfg.StateDir); err == nil {
			if out == nil {
				out = map[pipeline.ZoneKey]uint32{}
			}
			for key, v := range other.Floors() {
				if was, ok := out[key]; !ok || pipeline.SerialLess(was, v) {
					out[key] = v
				}
			}
		}
	}
	return out
}

// reconfigure follows a reload's state_dir: the serials known move to
// the new directory's file (joined by those it holds). A state_dir not
// kept (the default one, missing) keeps the serials where they were.
func (k *serialKeeper) reconfigure(cfg *config.Config) {
	k.mu.Lock()
	defer k.mu.Unlock()
	switch {
	case !keptDir(cfg):
	case k.store == nil:
		k.open(cfg)
	default:
		if err := k.store.Move(cfg.StateDir); err != nil {
			k.logger.Warn("zone serials file unreadable in the new state_dir; saving over it", "err", err)
		}
	}
}

// start begins looking at the serials of current every saveEvery.
func (k *serialKeeper) start(current func() *pipeline.Pipeline) {
	k.current = current
	k.stop, k.done = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(k.done)
		t := time.NewTicker(saveEvery)
		defer t.Stop()
		k.save()
		for {
			select {
			case <-k.stop:
				return
			case <-t.C:
				k.save()
			}
		}
	}()
}

// close stops the looks and saves the serials served last.
func (k *serialKeeper) close() {
	if k.stop != nil {
		close(k.stop)
		<-k.done
	}
	k.save()
}

// save notes the current pipeline's serials and writes them when any rose.
func (k *serialKeeper) save() {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.store == nil || k.current == nil {
		return
	}
	p := k.current()
	if p == nil {
		return
	}
	k.store.Note(p.Serials())
	err := k.store.Save()
	switch {
	case err != nil && !k.failing:
		k.failing = true
		k.logger.Warn("zone serials not saved; a restart may serve lower serials until they are", "err", err)
	case err == nil && k.failing:
		k.failing = false
		k.logger.Info("zone serials saved again", "file", k.store.Path())
	}
}
