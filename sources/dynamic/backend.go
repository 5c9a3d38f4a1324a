package dynamic

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/miekg/dns"

	"github.com/dnsd/dnsd/pipeline"
	"github.com/dnsd/dnsd/sources/kind"
)

// DefaultOpenTimeout is how long Open waits for the store's file lock,
// held by another process (another dnsd on the same state_dir), before it
// fails.
const DefaultOpenTimeout = 5 * time.Second

// closeWait bounds how long Close waits for an update in progress.
const closeWait = 10 * time.Second

// The store's layout: bucket names holds one key per owner name (its
// lower-case presentation form) whose value is the owner's records in
// wire form, each preceded by its length (2 bytes, big endian); bucket
// meta holds the format, the zones and the serial of the last commit.
var (
	bucketNames = []byte("names")
	bucketMeta  = []byte("meta")
	keyFormat   = []byte("format")
	keyZones    = []byte("zones")
	keySerial   = []byte("serial")
	formatV1    = []byte("1")
)

// Options configure a Backend.
type Options struct {
	Logger  *slog.Logger          // nil: discarded
	Serials *pipeline.SerialClock // nil: the Unix time
	// OpenTimeout: how long to wait for the file lock; 0: DefaultOpenTimeout.
	OpenTimeout time.Duration
	// Bulk is told of update bursts (see Backend.busy); nil: nobody.
	Bulk kind.Bulk
}

// burstIdle is how long after its last commit an update burst ends.
const burstIdle = 2 * time.Second

// Backend is one zone key's store and the index served from it. It is
// safe for concurrent use: lookups read the current index, updates take
// turns through the update lock.
type Backend struct {
	path    string
	zones   []string // the zone key's zones, lower-case FQDNs
	db      *bolt.DB
	logger  *slog.Logger
	serials *pipeline.SerialClock
	cur     atomic.Pointer[index]
	// lock is the update lock: held (full) from BeginUpdate to Commit or
	// Abort, and by Close.
	lock chan struct{}
	// failCommit, when set (tests), fails a commit inside its bbolt
	// transaction after every write, so that the transaction rolls back.
	failCommit func() error

	// An update burst: updates allocate (decoding, the store's pages,
	// the index parts they copy), and at the steady collector target a
	// stream of them starts a collection every few milliseconds, which
	// the queries beside them pay for. While commits keep coming (one
	// within burstIdle of the last) the process is told of a burst of
	// background work (kind.Bulk), as a reload tells it.
	bulk      kind.Bulk
	burstMu   sync.Mutex
	burstEnd  func()      // set while a burst is under way
	lastBusy  time.Time   // the last commit of the burst
	burstTime *time.Timer // ends the burst burstIdle after lastBusy
}

// StoreName is the file name of the store of a zone key with zones
// (lower-case FQDNs): the zones sorted, without their final dot ("@" for
// the root), joined by commas, each byte outside [a-z0-9_.-] written as
// %XX, then ".db"; a name longer than 200 bytes keeps its first 180 and a
// hash of the whole. Two sets of zones never share a name.
func StoreName(zones []string) string {
	zs := slices.Clone(zones)
	slices.Sort(zs)
	var b strings.Builder
	for i, z := range zs {
		if i > 0 {
			b.WriteByte(',')
		}
		if z == "." {
			b.WriteByte('@')
			continue
		}
		z = strings.TrimSuffix(z, ".")
		for j := 0; j < len(z); j++ {
			c := z[j]
			if c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.' {
				b.WriteByte(c)
				continue
			}
			fmt.Fprintf(&b, "%%%02x", c)
		}
	}
	name := b.String()
	if len(name) > 200 {
		h := fnv.New64a()
		h.Write([]byte(name))
		name = fmt.Sprintf("%s~%016x", name[:180], h.Sum64())
	}
	return name + ".db"
}

// StorePath is where the store of a zone key with zones lives under
// stateDir.
func StorePath(stateDir string, zones []string) string {
	return filepath.Join(stateDir, "dynamic", StoreName(zones))
}

// Open opens (creating it, and its directory, on first use) the store at
// path for zones and loads its records. It waits at most
// opts.OpenTimeout for another process holding the store to let go.
// Records the store holds that cannot be decoded, or are outside zones,
// are skipped and logged once.
func Open(path string, zones []string, opts Options) (*Backend, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.OpenTimeout <= 0 {
		opts.OpenTimeout = DefaultOpenTimeout
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return nil, fmt.Errorf("creating the directory of dynamic store %s: %w", path, err)
	}
	db, err := bolt.Open(path, 0o640, &bolt.Options{Timeout: opts.OpenTimeout})
	if errors.Is(err, bolterrors.ErrTimeout) {
		return nil, fmt.Errorf("dynamic store %s is held by another process (another dnsd with this state_dir?); gave up after %s: %w", path, opts.OpenTimeout, err)
	}
	if err != nil {
		return nil, fmt.Errorf("opening dynamic store %s: %w", path, err)
	}
	b := &Backend{path: path, zones: slices.Clone(zones), db: db, serials: opts.Serials, lock: make(chan struct{}, 1),
		logger: opts.Logger.With("source", "dynamic", "store", path), bulk: opts.Bulk}
	ix, err := b.load()
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("dynamic store %s: %w", path, err)
	}
	ix.serial = max(b.serials.Next(), ix.serial+1)
	b.cur.Store(ix)
	b.logger.Info("dynamic store opened", "names", ix.names, "records", ix.records)
	return b, nil
}

// load creates the store's buckets when it is new, and reads its records
// into an index whose serial is the last commit's.
func (b *Backend) load() (*index, error) {
	err := b.db.Update(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		if meta != nil {
			if f := meta.Get(keyFormat); string(f) != string(formatV1) {
				return fmt.Errorf("store format %q, this dnsd reads %q", f, formatV1)
			}
			return nil
		}
		meta, err := tx.CreateBucket(bucketMeta)
		if err != nil {
			return err
		}
		if _, err := tx.CreateBucketIfNotExists(bucketNames); err != nil {
			return err
		}
		if err := meta.Put(keyFormat, formatV1); err != nil {
			return err
		}
		return meta.Put(keyZones, []byte(strings.Join(b.zones, " ")))
	})
	if err != nil {
		return nil, err
	}
	ix := &index{}
	var skipped int
	var example string
	err = b.db.View(func(tx *bolt.Tx) error {
		if s := tx.Bucket(bucketMeta).Get(keySerial); len(s) == 4 {
			ix.serial = binary.BigEndian.Uint32(s)
		}
		names := tx.Bucket(bucketNames)
		if names == nil {
			return errors.New("the store has no bucket names")
		}
		ed := ix.edit(b.zones)
		err := names.ForEach(func(k, v []byte) error {
			name := string(k)
			rrs, bad := decode(name, v)
			if zoneOf(name, b.zones) == "" {
				bad, rrs = max(bad+len(rrs), 1), nil
			}
			if bad > 0 {
				if skipped == 0 {
					example = name
				}
				skipped += bad
			}
			if len(rrs) > 0 {
				ed.set(name, rrs)
			}
			return nil
		})
		ix = ed.ix
		return err
	})
	if err != nil {
		return nil, err
	}
	if skipped > 0 {
		b.logger.Warn("dynamic store records that cannot be read, or outside the zones, are skipped", "records", skipped, "example", example)
	}
	return ix, nil
}

// decode reads the records of name from their stored form; bad counts
// those that do not decode (the rest of the value is then skipped).
func decode(name string, v []byte) (rrs []dns.RR, bad int) {
	for len(v) > 0 {
		if len(v) < 2 {
			return rrs, bad + 1
		}
		n := int(binary.BigEndian.Uint16(v))
		if len(v) < 2+n {
			return rrs, bad + 1
		}
		rr, _, err := dns.UnpackRR(v[2:2+n], 0)
		v = v[2+n:]
		if err != nil || rr == nil || !strings.EqualFold(rr.Header().Name, name) {
			bad++
			continue
		}
		rr.Header().Name = name
		rrs = append(rrs, rr)
	}
	return rrs, bad
}

// encode is the stored form of rrs, and the records as the index keeps
// them: decoded from it (the index holds its own copies, owner name
// lower case).
func encode(name string, rrs []dns.RR) ([]byte, []dns.RR, error) {
	var out []byte
	for _, rr := range rrs {
		n := dns.Len(rr)
		if n > 0xffff {
			return nil, nil, fmt.Errorf("record %s is too large", rr.Header().Name)
		}
		buf := make([]byte, n)
		w, err := dns.PackRR(rr, buf, 0, nil, false)
		if err != nil {
			return nil, nil, fmt.Errorf("record %s: %w", rr.Header().Name, err)
		}
		out = binary.BigEndian.AppendUint16(out, uint16(w))
		out = append(out, buf[:w]...)
	}
	back, bad := decode(name, out)
	if bad > 0 {
		return nil, nil, fmt.Errorf("records at %s do not survive their wire form", name)
	}
	return out, back, nil
}

func (b *Backend) snapshot() *index { return b.cur.Load() }

// Path is the store's file.
func (b *Backend) Path() string { return b.path }

// Close waits for an update in progress (at most closeWait) and closes the
// store. Idempotent.
func (b *Backend) Close() error {
	t := time.NewTimer(closeWait)
	defer t.Stop()
	select {
	case b.lock <- struct{}{}:
		defer func() { <-b.lock }()
	case <-t.C:
		b.logger.Warn("closing the dynamic store with an update still open", "waited", closeWait)
	}
	b.endBurst()
	if err := b.db.Close(); err != nil {
		return fmt.Errorf("closing dynamic store %s: %w", b.path, err)
	}
	return nil
}

// begin takes the update lock, or fails when ctx ends first.
func (b *Backend) begin(ctx context.Context, zone string) error {
	if !slices.Contains(b.zones, zone) {
		return fmt.Errorf("dynamic store %s does not hold zone %s", b.path, zone)
	}
	select {
	case b.lock <- struct{}{}:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("waiting for the update of %s in progress: %w", zone, ctx.Err())
	}
}

func (b *Backend) end() { <-b.lock }

// commit applies sets (the update lock held): checked, written in one
// fsync'd transaction, then published. maxRecords bounds the store.
func (b *Backend) commit(ctx context.Context, sets map[string][]dns.RR, maxRecords int) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("update not committed: %w", err)
	}
	cur := b.snapshot()
	type change struct {
		name string
		wire []byte
		rrs  []dns.RR
	}
	changes := make([]change, 0, len(sets))
	total := cur.records
	for name, rrs := range sets {
		if name != strings.ToLower(name) || !dns.IsFqdn(name) || zoneOf(name, b.zones) == "" {
			return fmt.Errorf("update not committed: %s is not a lower-case name of the store's zones", name)
		}
		for _, rr := range rrs {
			if h := rr.Header(); !strings.EqualFold(h.Name, name) || h.Class != dns.ClassINET {
				return fmt.Errorf("update not committed: record %s (class %s) is not an IN record at %s", h.Name, dns.Class(h.Class), name)
			}
		}
		old := cur.rrs(name)
		if pipeline.SameRecords(old, rrs) {
			continue
		}
		wire, own, err := encode(name, rrs)
		if err != nil {
			return fmt.Errorf("update not committed: %w", err)
		}
		total += len(own) - len(old)
		changes = append(changes, change{name: name, wire: wire, rrs: own})
	}
	if len(changes) == 0 {
		return nil // nothing changes: the serial stays
	}
	if total > maxRecords && total > cur.records {
		return fmt.Errorf("%w: the store would hold %d records, dynamic max_records is %d", pipeline.ErrTooManyRecords, total, maxRecords)
	}
	serial := max(b.serials.Next(), cur.serial+1)
	err := b.db.Update(func(tx *bolt.Tx) error {
		names := tx.Bucket(bucketNames)
		for _, c := range changes {
			var err error
			if len(c.rrs) == 0 {
				err = names.Delete([]byte(c.name))
			} else {
				err = names.Put([]byte(c.name), c.wire)
			}
			if err != nil {
				return fmt.Errorf("writing %s: %w", c.name, err)
			}
		}
		if err := tx.Bucket(bucketMeta).Put(keySerial, binary.BigEndian.AppendUint32(nil, serial)); err != nil {
			return err
		}
		if b.failCommit != nil {
			return b.failCommit()
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("update not committed to dynamic store %s: %w", b.path, err)
	}
	ed := cur.edit(b.zones)
	for _, c := range changes {
		ed.set(c.name, c.rrs)
	}
	ed.ix.serial = serial
	b.cur.Store(ed.ix)
	b.busy()
	return nil
}

// busy notes a commit: it begins a burst (kind.Bulk) unless one is under
// way, which then lasts until burstIdle after this commit.
func (b *Backend) busy() {
	if b.bulk == nil {
		return
	}
	b.burstMu.Lock()
	defer b.burstMu.Unlock()
	b.lastBusy = time.Now()
	if b.burstEnd == nil {
		b.burstEnd = b.bulk()
		b.burstTime = time.AfterFunc(burstIdle, b.idle)
	}
}

// idle ends the burst once burstIdle has passed since its last commit,
// else looks again when it will have.
func (b *Backend) idle() {
	b.burstMu.Lock()
	defer b.burstMu.Unlock()
	if b.burstEnd == nil {
		return
	}
	if wait := burstIdle - time.Since(b.lastBusy); wait > 0 {
		b.burstTime.Reset(wait)
		return
	}
	b.burstEnd()
	b.burstEnd = nil
}

// endBurst ends a burst under way at once (Close).
func (b *Backend) endBurst() {
	b.burstMu.Lock()
	defer b.burstMu.Unlock()
	if b.burstEnd != nil {
		b.burstTime.Stop()
		b.burstEnd()
		b.burstEnd = nil
	}
}
