package hosts

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/maphash"
	"log/slog"
	"net/netip"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dnsd/dnsd/internal/fswatch"
	"github.com/dnsd/dnsd/internal/pacing"
	"github.com/dnsd/dnsd/pipeline"
	"github.com/dnsd/dnsd/sources/kind"
)

// debounce is how long the watched directories must be quiet before the
// changed files are re-read (see fswatch.Debounce): a file rewritten in
// place is read once the writer is done, never half-written.
const debounce = fswatch.Debounce

// emptyGrace is how long a file that turned empty must stay empty before
// its emptiness is served: an in-place rewrite truncates first and may
// pause before it writes, and serving an empty file turns every name into
// NXDOMAIN (which clients cache). A file emptied on purpose is applied
// emptyGrace later.
const emptyGrace = fswatch.EmptyGrace

// maxBadLinesLogged caps the bad lines logged per file load; the rest are
// counted in one summary line.
const maxBadLinesLogged = 20

// maxFileSize is the largest hosts file accepted (name offsets are 32-bit).
const maxFileSize = 1 << 31

// snapshot is what readers load with one atomic operation.
type snapshot struct {
	*ttlIndex
	serial uint32
	// built is closed once the records are built ahead, or known not to
	// be (a large index, a closed backend).
	built chan struct{}
}

// Backend is a set of hosts files, loaded, indexed and watched once. It can
// be shared by any number of Sources; readers never lock. Close stops it.
type Backend struct {
	logger  *slog.Logger
	ttl     uint32
	serials *pipeline.SerialClock

	// mu guards the files' data (written by the watch goroutine) and the
	// views (taken and released by the registry). Readers never take it:
	// each reads its View's snapshot.
	mu    sync.Mutex
	views map[uint32]*view // by TTL, never empty
	files []*hostsFile
	seed  maphash.Seed
	// pacing: how a reload gives way to the server on one processor (see
	// package pacing); tests count its sleeps (under mu).
	pacing *pacing.Pacing
	// bulk is told of every reload and background record build, from its
	// first read to its last record (see kind.Bulk).
	bulk kind.Bulk

	watcher   *fswatch.Watcher // calls refresh
	stop      chan struct{}
	done      chan struct{} // closed once the watcher stopped
	closeOnce sync.Once
	// prebuilds counts the goroutines building records ahead; closed
	// (under mu) stops new ones being started.
	prebuilds sync.WaitGroup
	closed    bool
	built     atomic.Int64 // indexes whose records were built to the end (tests read it)
	// checked: the zone keys' names the files' names were counted
	// against (firstCheck), under mu.
	checked  map[string]bool
	closeErr error
}

// hostsFile is one file of a Backend and its last good data.
type hostsFile struct {
	path    string    // cleaned, absolute
	data    fileParts // last good data
	sum     uint64    // hash of the content data was parsed from
	failing bool      // unreadable since the last warning
}

// Options are what a Backend is opened with besides its files and TTL;
// the zero value is valid.
type Options struct {
	Logger *slog.Logger // nil: discarded
	// Serials hands out the SOA serials (shared by every source of the
	// process; nil: the Unix time, kept increasing per Backend).
	Serials *pipeline.SerialClock
	// Bulk (may be nil) is told of the background work: the records built
	// ahead, and every reload.
	Bulk kind.Bulk
	// Paced: the backend is opened while queries are being answered (by
	// a reload of the configuration). Its first load then gives way to
	// them on one processor, as its reloads always do (see package pacing).
	Paced bool

	sleep func(time.Duration) // tests: the pacing's sleep (nil: time.Sleep)
}

// OpenBackend reads files, indexes them and starts watching them for
// changes. ttl is the TTL of the records. A file that cannot be read is an
// error; bad lines are skipped and logged. The caller must Close the
// Backend.
func OpenBackend(files []string, ttl time.Duration, opts Options) (*Backend, error) {
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	b := &Backend{
		logger:  logger.With("source", "hosts"),
		ttl:     pipeline.TTLSeconds(ttl),
		serials: opts.Serials,
		seed:    maphash.MakeSeed(),
		pacing:  &pacing.Pacing{Sleep: opts.sleep},
		bulk:    opts.Bulk,
		stop:    make(chan struct{}),
		done:    make(chan struct{}),
	}
	var load *pacing.Pacing // the first load's
	if opts.Paced {
		load = b.pacing
	}
	seen := make(map[string]bool, len(files))
	for _, p := range files {
		abs, err := filepath.Abs(p)
		if err != nil {
			return nil, fmt.Errorf("hosts file %s: %w", p, err)
		}
		if seen[abs] {
			continue
		}
		seen[abs] = true
		f := &hostsFile{path: abs}
		sc, err := scanHosts(abs, b.seed, load) // paced when opened by a reload
		if err != nil {
			return nil, fmt.Errorf("hosts file %s: %w", p, err)
		}
		f.sum = sc.sum
		f.data, err = sc.parse(abs, b.logger)
		sc.close()
		if err != nil {
			return nil, fmt.Errorf("hosts file %s: %w", p, err)
		}
		b.files = append(b.files, f)
	}
	b.views = map[uint32]*view{b.ttl: {ttl: b.ttl}}
	b.publish(0, load)

	paths := make([]string, len(b.files))
	for i, f := range b.files {
		paths[i] = f.path
	}
	w, err := fswatch.New(paths, b.refresh, fswatch.Options{Logger: b.logger, Name: "hosts",
		Debounce: debounce, EmptyGrace: emptyGrace})
	if err != nil {
		b.stopBuilders()
		return nil, fmt.Errorf("hosts: %w", err)
	}
	b.watcher = w
	return b, nil
}

// stopBuilders closes stop, stops the goroutines building records ahead
// and waits for them (Close, or an OpenBackend that fails after
// publishing). Records of data published later are built at once.
func (b *Backend) stopBuilders() {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	close(b.stop)
	b.prebuilds.Wait()
}

// Close stops watching and waits for the watch goroutine to end. The data
// stays readable. Close is idempotent.
func (b *Backend) Close() error {
	b.closeOnce.Do(func() {
		b.stopBuilders()
		if err := b.watcher.Close(); err != nil { // waits for a refresh running
			b.closeErr = fmt.Errorf("hosts: %w", err)
		}
		close(b.done)
	})
	return b.closeErr
}

// Serial increases whenever the data changes and never goes backwards.
func (b *Backend) Serial() uint32 { return b.snapshot().serial }

// TTL is the TTL the backend was opened with, in seconds.
func (b *Backend) TTL() uint32 { return b.ttl }

// Records is the number of records held (A, AAAA and PTR).
func (b *Backend) Records() int { return b.snapshot().ix.records }

// snapshot is the data of the view with the backend's own TTL, or of any
// view when that one has been let go of.
func (b *Backend) snapshot() *snapshot {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.defaultView().cur.Load()
}

func (b *Backend) defaultView() *view {
	if v := b.views[b.ttl]; v != nil {
		return v
	}
	for _, v := range b.views {
		return v
	}
	panic("hosts: backend without a view")
}

// publish indexes the files' data once, gives every view its records
// with its TTL and stores each with one new serial from the serial clock:
// at least max(prev+1, now), and larger than any serial another source or
// Source took before from the same clock. pace: a reload's, which gives
// way to the server on one processor (see package pacing). Caller holds mu (or
// owns b, before OpenBackend returns).
func (b *Backend) publish(prev uint32, pace *pacing.Pacing) *snapshot {
	serial := max(b.serials.Next(), prev+1)
	segs := make([]*fileData, 0, len(b.files))
	for _, f := range b.files {
		segs = append(segs, f.data...)
	}
	ix := buildIndex(segs, pace)
	var last *snapshot
	for _, v := range b.views {
		last = b.store(v, ix, serial)
	}
	if ix.n >= releaseMin {
		// Reading and indexing a large file leaves more garbage than the
		// index itself (the file's bytes, the parse arena, the previous
		// index), which the runtime would keep mapped: after a GC the heap
		// may grow to twice what is live before the next one, so the pages
		// are never returned while the process is busy. Return them now.
		debug.FreeOSMemory()
	}
	return last
}

// store makes ix, with serial, v's current records. A small index's
// records are then built ahead on a goroutine and stored once built
// (unless v has moved on to newer data by then): the index answers at
// once, making records at lookup time until then, so a start or a reload
// is not held up by building records. Caller holds mu.
func (b *Backend) store(v *view, ix *index, serial uint32) *snapshot {
	s := &snapshot{ttlIndex: &ttlIndex{ix: ix, ttl: v.ttl}, serial: serial, built: make(chan struct{})}
	switch {
	case ix.n > prebuiltMax:
		close(s.built)
	case b.closed:
		s.pre = ix.prebuild(v.ttl, nil)
		close(s.built)
	default:
		v.cur.Store(s) // before the builder may swap it
		b.prebuilds.Add(1)
		end := b.bulk.Begin() // before a reload's own ends
		go func() {
			defer b.prebuilds.Done()
			defer end()
			defer close(s.built)
			// Given up when the backend closes or newer data replaces
			// this: a file rewritten faster than its records are built
			// must not pile up builders.
			abort := func() bool {
				select {
				case <-b.stop:
					return true
				default:
					return v.cur.Load() != s
				}
			}
			pre := ix.prebuild(v.ttl, abort)
			if pre == nil {
				return
			}
			b.built.Add(1)
			v.cur.CompareAndSwap(s, &snapshot{ttlIndex: &ttlIndex{ix: ix, ttl: v.ttl, pre: pre}, serial: serial, built: s.built})
		}()
		return s
	}
	v.cur.Store(s)
	return s
}

// WaitBuilt waits until the records of the current data are built ahead
// (for an index small enough to have them), so that a hit allocates
// nothing; benchmarks call it.
func (b *Backend) WaitBuilt() {
	b.mu.Lock()
	var chans []chan struct{}
	for _, v := range b.views {
		chans = append(chans, v.cur.Load().built)
	}
	b.mu.Unlock()
	for _, c := range chans {
		<-c
	}
}

// releaseMin is the number of pairs from which a (re)load returns the
// memory it used on the way to the system (1,000,000 lines: 160 MiB RSS
// without, 77 MiB with; about 20 ms).
const releaseMin = 1 << 18

// refresh is the watcher's Func: it re-reads the files that changed and
// publishes a new index when any content changed.
func (b *Backend) refresh(_ context.Context, c *fswatch.Change) {
	b.mu.Lock()
	defer b.mu.Unlock()
	defer b.bulk.Begin()() // the records built ahead begin their own
	changed := false
	for _, f := range b.files {
		if slices.Contains(c.Files, f.path) && b.reread(c, f) {
			changed = true
		}
	}
	if !changed {
		return
	}
	start := time.Now()
	snap := b.publish(b.defaultView().cur.Load().serial, b.pacing) // a reload: paced
	b.logger.Info("hosts data reloaded", "records", snap.ix.records, "files", len(b.files),
		"serial", snap.serial, "duration", time.Since(start))
}

// unreadable keeps f's last good data after a failed read (logged once
// until f is readable again, each retry at DEBUG; the watcher reads it
// again); it returns false, nothing changed.
func (b *Backend) unreadable(c *fswatch.Change, f *hostsFile, err error) bool {
	c.Failed(f.path)
	if !f.failing {
		f.failing = true
		b.logger.Warn("hosts file unreadable, keeping its last good data; reading it again until it is read",
			"file", f.path, "error", err)
	} else {
		b.logger.Debug("hosts file still unreadable", "file", f.path, "error", err)
	}
	return false
}

// reread reads f again and reports whether its content changed. A file
// that cannot be read keeps its last good data; that is logged once until
// the file is readable again.
func (b *Backend) reread(c *fswatch.Change, f *hostsFile) bool {
	sc, err := scanHosts(f.path, b.seed, b.pacing) // a reload: paced
	if err != nil {
		return b.unreadable(c, f, err)
	}
	if f.failing {
		f.failing = false
		b.logger.Info("hosts file readable again", "file", f.path)
	}
	defer sc.close()
	sum := sc.sum
	if sum == f.sum {
		return false
	}
	if sc.size == 0 && f.data.pairs() > 0 {
		hold, waited := c.HoldEmpty(f.path)
		switch {
		case hold && waited == 0:
			b.logger.Info("hosts file is empty; keeping its last data unless it stays empty", "file", f.path, "for", emptyGrace)
			return false
		case hold:
			return false
		}
		b.logger.Warn("hosts file stayed empty, serving no records from it", "file", f.path, "for", waited.Round(time.Millisecond))
	}
	fd, err := sc.parse(f.path, b.logger)
	if err != nil {
		return b.unreadable(c, f, err)
	}
	if fd.pairs() == 0 && fd.bad() > 0 && f.data.pairs() > 0 {
		// Not one line parses (binary junk, the wrong file copied in):
		// that is never a hosts file someone meant to serve, so keep the
		// last good data, as for a file that cannot be read. A file with
		// some good lines is applied without its bad ones.
		f.sum = sum
		b.logger.Warn("hosts file has no valid line, keeping its last good data", "file", f.path, "bad_lines", fd.bad())
		return false
	}
	f.sum = sum
	f.data = fd
	return true
}

// Outside counts the names with records in the current data that a
// source over zones (lower-case FQDNs, "." = root; its zone key's names)
// never serves, and returns one of them as an example: a name in none of
// zones whose addresses are in none of the reverse zones among them (with
// reverse on, such a name is served as the target of its addresses'
// PTRs; a wildcard never is). served reports whether the source serves
// any of the data. The caller logs the count once.
//
// The pairs are read in file order (not through the hash table, whose
// order is random in memory), and the zones are checked once per run of
// pairs with the same parent: a name is in a zone when its parent is, or
// when it is the zone itself. paced: queries are being answered (a
// reload), and the count gives way to them on one processor.
func (b *Backend) Outside(zones []string, reverse, paced bool) (n int, example string, served bool) {
	b.mu.Lock()
	ix, pace := b.defaultView().cur.Load().ix, b.pacing
	b.mu.Unlock()
	if !paced {
		pace = nil
	}
	var prefixes []netip.Prefix
	if reverse {
		prefixes = reversePrefixes(zones)
	}
	return ix.outside(zones, prefixes, pace)
}

// firstCheck reports whether the names of the backend's files have not
// been counted yet against zones (for a source with reverse on or off)
// and marks them counted: a build logs the count once, not at every
// reload that keeps the same zones.
func (b *Backend) firstCheck(zones []string, reverse bool) bool {
	key := strings.Join(zones, " ") + " reverse=" + strconv.FormatBool(reverse)
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.checked[key] {
		return false
	}
	if b.checked == nil {
		b.checked = make(map[string]bool)
	}
	b.checked[key] = true
	return true
}

// outside is Outside, pacing itself when pace is set; prefixes are the
// address prefixes of the reverse zones a source answers PTR in.
func (ix *index) outside(zones []string, prefixes []netip.Prefix, pace *pacing.Pacing) (n int, example string, served bool) {
	pc := pacing.New(pace)
	var buf [256]byte
	var last struct {
		d      *fileData
		parent uint32
		n      uint8
		in     bool
	}
	// ptrServed: pair (d, e) is served as a PTR in a reverse zone.
	ptrServed := func(d *fileData, e fileEntry) bool {
		if len(prefixes) == 0 || d.label(e) == "*" {
			return false
		}
		return containsAddr(prefixes, d.addr(e))
	}
	for s, d := range ix.segs {
		for k, e := range d.entries {
			pc.Step()
			if last.d != d || last.parent != e.parent || last.n != e.parentN {
				last.d, last.parent, last.n = d, e.parent, e.parentN
				last.in = slices.ContainsFunc(zones, func(z string) bool { return d.parentInZone(e, z) })
			}
			if last.in || slices.ContainsFunc(zones, func(z string) bool { return d.nameIs(e, z) }) || ptrServed(d, e) {
				served = true
				continue
			}
			id := ix.base[s] + uint32(k)
			if !ix.isTail(id, d, e) {
				continue // a duplicate, or not its name's last pair: counted once, at the last
			}
			if len(prefixes) > 0 && ix.someAddr(id, ptrServed) {
				continue // served by another of its addresses
			}
			if name := d.appendName(buf[:0], e); n == 0 || string(name) < example {
				example = string(name)
			}
			n++
		}
	}
	return n, example, served
}

// someAddr reports whether f holds for a pair of the name whose list ends
// at pair x.
func (ix *index) someAddr(x uint32, f func(*fileData, fileEntry) bool) bool {
	for id := ix.fnext[x]; id != x; id = ix.fnext[id] {
		if d, e := ix.entry(id); f(d, e) {
			return true
		}
	}
	return false
}

// reversePrefixes returns the address prefixes of the reverse zones among
// zones (10.in-addr.arpa.: 10.0.0.0/8; in-addr.arpa.: 0.0.0.0/0).
func reversePrefixes(zones []string) []netip.Prefix {
	var out []netip.Prefix
	for _, z := range zones {
		switch z {
		case "in-addr.arpa.":
			out = append(out, netip.PrefixFrom(netip.IPv4Unspecified(), 0))
			continue
		case "ip6.arpa.":
			out = append(out, netip.PrefixFrom(netip.IPv6Unspecified(), 0))
			continue
		}
		k, ok := parseReverse(z)
		if !ok {
			continue
		}
		if k.v6 {
			var a [16]byte
			binary.BigEndian.PutUint64(a[:8], k.hi)
			binary.BigEndian.PutUint64(a[8:], k.lo)
			out = append(out, netip.PrefixFrom(netip.AddrFrom16(a), 4*int(k.n)))
		} else {
			out = append(out, netip.PrefixFrom(netip.AddrFrom4(v4bytes(uint32(k.lo))), 8*int(k.n)))
		}
	}
	return out
}

func containsAddr(prefixes []netip.Prefix, a netip.Addr) bool {
	for _, p := range prefixes {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

func inZones(name string, zones []string) bool {
	for _, z := range zones {
		if pipeline.InZone(name, z) {
			return true
		}
	}
	return false
}

// view is the backend's records with one TTL and the Views holding it.
type view struct {
	ttl  uint32
	cur  atomic.Pointer[snapshot]
	refs int // under Backend.mu
}

// View is a handle on the backend's records with one TTL. Sources of the
// same files with different ttls share the backend (one watcher, one read
// of each file) through Views, and one index: a View adds only the TTL
// (and, for a small index, the records built ahead), so a reload that only
// changes ttl reads no file and indexes nothing.
type View struct {
	b    *Backend
	v    *view
	once sync.Once
}

// View returns the backend's records with TTL ttl, made from the current
// index when no View has that TTL yet. Close it when done.
func (b *Backend) View(ttl time.Duration) *View {
	t := pipeline.TTLSeconds(ttl)
	b.mu.Lock()
	defer b.mu.Unlock()
	v := b.views[t]
	if v == nil {
		v = &view{ttl: t}
		cur := b.defaultView().cur.Load()
		b.store(v, cur.ix, cur.serial)
		b.views[t] = v
	}
	v.refs++
	// Records nobody holds (those of the TTL the backend was opened with,
	// before its first View) are kept only while they are the last ones.
	for t2, o := range b.views {
		if o.refs == 0 && len(b.views) > 1 {
			delete(b.views, t2)
		}
	}
	return &View{b: b, v: v}
}

// Close releases the View; its records are dropped when no View holds
// them and others remain. Idempotent.
func (h *View) Close() error {
	h.once.Do(func() {
		b := h.b
		b.mu.Lock()
		defer b.mu.Unlock()
		h.v.refs--
		if h.v.refs <= 0 && len(b.views) > 1 && b.views[h.v.ttl] == h.v {
			delete(b.views, h.v.ttl)
		}
	})
	return nil
}

// Backend is the View's backend.
func (h *View) Backend() *Backend { return h.b }
