// Package etcd is dnsd's etcd source (docs/sources/etcd.md): it
// serves SkyDNS-format records from one etcd prefix, kept in memory by a
// single prefix watch, so a query never reads etcd.
//
// A Backend is one etcd client and one watch: it lists the prefix at a
// revision R, then watches from R+1 (no gap, no duplicate), applying each
// event to an in-memory index in O(records of the touched name). A
// compacted watch re-lists; a lost connection is retried with backoff by
// the client, and the watch resumes where it stopped; meanwhile the last
// data keeps being served. Until the first list has been applied the
// Backend is not synced and its Sources answer Failed (SERVFAIL). A
// Backend is shared by every Source with the same settings (zones,
// reloads); a Source is one zone's view of it.
package etcd

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	grpcbackoff "google.golang.org/grpc/backoff"
	"google.golang.org/grpc/connectivity"

	"github.com/dnsd/dnsd/internal/grpctls"
	"github.com/dnsd/dnsd/internal/health"
	"github.com/dnsd/dnsd/internal/turns"
	"github.com/dnsd/dnsd/pipeline"
	"github.com/dnsd/dnsd/sources/kind"
)

// Options configure a Backend.
type Options struct {
	// Name identifies the backend in logs and metrics: endpoints and
	// prefix, never credentials.
	Name      string
	Endpoints []string // http:// or https:// URLs
	Prefix    string   // e.g. "/skydns"; "/" for the whole keyspace
	TLS       *tls.Config
	Username  string
	Password  string // never logged
	// TTL is the TTL of records whose value has no "ttl".
	TTL     time.Duration
	Logger  *slog.Logger
	Metrics *Metrics // nil: a private, unregistered set
	// Serials hands out SOA serials, shared by every source of the process
	// (nil: the Unix time, kept increasing per Backend).
	Serials *pipeline.SerialClock
	// Bulk is told of every read of the prefix, the first and a re-list,
	// from its first page on, as a burst of background work (nil: nobody
	// is; see kind.Bulk).
	Bulk kind.Bulk
	// Paced: the backend is opened while queries are being answered (by a
	// reload of the configuration), so its first read of the prefix gives
	// way to them on one processor as every re-read does (see package
	// turns). A start's first read is not paced: nothing is served yet.
	Paced bool

	// sleep is the pacing's sleep (tests count it; nil: time.Sleep).
	sleep func(time.Duration)

	// Tuning, mostly for tests; zero values mean the defaults.
	DialTimeout time.Duration // per connection attempt (default 5s)
	RetryMin    time.Duration // first backoff (default 200ms)
	RetryMax    time.Duration // longest backoff (default 10s)
	PageSize    int64         // keys per read of the initial list (default 50000)

	// beforeWatch, when set (tests), runs before each watch starts.
	beforeWatch func()
}

// Backend is one etcd client and one prefix watch feeding an index per
// default TTL in use (a View each; see View).
type Backend struct {
	opts   Options
	log    *slog.Logger
	m      *Metrics
	rangeK string // first key of the watched range: prefix + "/"

	// wmu serializes index writes (the watch goroutine) with views being
	// taken and released. Readers never take it: each holds its index.
	wmu   sync.Mutex
	views map[uint32]*view // by default TTL, never empty

	synced   atomic.Bool
	syncedCh chan struct{}
	serial   atomic.Uint32
	up       atomic.Bool
	records  atomic.Int64
	health   *health.Tracker // why etcd cannot be used right now

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once
}

var (
	errNotSynced = errors.New("etcd: not synced yet (first read of the prefix not done)")
	errCompacted = errors.New("etcd: watch revision compacted")
)

// Open checks opts and starts the backend's goroutine, which connects,
// lists the prefix and watches it. It never waits for etcd: see Synced
// and WaitSynced. Close stops it.
func Open(opts Options) (*Backend, error) {
	if len(opts.Endpoints) == 0 {
		return nil, errors.New("etcd: no endpoints")
	}
	if !strings.HasPrefix(opts.Prefix, "/") {
		return nil, fmt.Errorf("etcd: prefix %q must start with /", opts.Prefix)
	}
	if opts.Prefix != "/" {
		opts.Prefix = strings.TrimRight(opts.Prefix, "/")
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Metrics == nil {
		opts.Metrics = NewMetrics()
	}
	if opts.Name == "" {
		opts.Name = strings.Join(opts.Endpoints, ",") + " " + opts.Prefix
	}
	if opts.DialTimeout <= 0 {
		opts.DialTimeout = 5 * time.Second
	}
	if opts.RetryMin <= 0 {
		opts.RetryMin = 200 * time.Millisecond
	}
	if opts.RetryMax < opts.RetryMin {
		opts.RetryMax = max(10*time.Second, opts.RetryMin)
	}
	if opts.PageSize <= 0 {
		// etcd counts the rest of the range for every page it returns,
		// so a read costs it O(keys² / page size): 5,000-key pages took
		// it 45 s for 1,000,000 keys. A page of 50,000 keys of ~100
		// bytes is about 5 MB.
		opts.PageSize = 50_000
	}
	b := &Backend{
		opts:     opts,
		log:      opts.Logger.With("source", "etcd", "backend", opts.Name),
		health:   health.New(opts.Logger.With("source", "etcd", "backend", opts.Name)),
		m:        opts.Metrics,
		views:    map[uint32]*view{pipeline.TTLSeconds(opts.TTL): {ix: newIndex(opts.Prefix, pipeline.TTLSeconds(opts.TTL))}},
		rangeK:   strings.TrimSuffix(opts.Prefix, "/") + "/",
		syncedCh: make(chan struct{}),
	}
	b.serial.Store(opts.Serials.Next())
	b.m.hold(opts.Name)
	b.m.up.WithLabelValues(opts.Name).Set(0)
	b.m.records.WithLabelValues(opts.Name).Set(0)
	b.ctx, b.cancel = context.WithCancel(context.Background())
	b.wg.Add(1)
	go b.run()
	return b, nil
}

// Close stops the watch and closes the client, waiting for the backend's
// goroutines. The data stays readable. Idempotent.
func (b *Backend) Close() error {
	b.once.Do(func() {
		b.cancel()
		b.wg.Wait()
		b.m.forget(b.opts.Name)
	})
	return nil
}

// Synced reports whether the first list of the prefix has been applied.
func (b *Backend) Synced() bool { return b.synced.Load() }

// WaitSynced blocks until the backend has synced or ctx ends.
func (b *Backend) WaitSynced(ctx context.Context) error {
	select {
	case <-b.syncedCh:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("etcd %s: %w", b.opts.Name, ctx.Err())
	}
}

// Serial increases whenever the data changes and never goes backwards.
func (b *Backend) Serial() uint32 { return b.serial.Load() }

// TTL is the default TTL the backend was opened with, in seconds.
func (b *Backend) TTL() uint32 { return pipeline.TTLSeconds(b.opts.TTL) }

// Records is the number of DNS records held.
func (b *Backend) Records() int { return int(b.records.Load()) }

// Up reports whether the connection to etcd is up.
func (b *Backend) Up() bool { return b.up.Load() }

// Endpoint names the etcd cluster for an operator: its endpoints, never
// credentials.
func (b *Backend) Endpoint() string { return strings.Join(b.opts.Endpoints, ",") }

// Problem is why etcd cannot be used right now ("connection refused",
// "x509: ...", "authentication failed, ..."), "" when it can.
func (b *Backend) Problem() string { return b.health.Problem() }

// run owns the client: it connects, lists, watches, and re-lists or
// retries with backoff, until Close.
func (b *Backend) run() {
	defer b.wg.Done()
	retry := backoff{min: b.opts.RetryMin, max: b.opts.RetryMax}
	var cli *clientv3.Client
	for {
		var err error
		cli, err = b.connect()
		if err == nil {
			break
		}
		b.failed("connect", err, &retry)
		if !retry.wait(b.ctx) {
			return
		}
	}
	defer cli.Close()
	b.wg.Add(1)
	go b.monitor(cli.ActiveConnection())

	var rev int64 // last revision applied; 0: a list is needed
	reason := "start"
	for b.ctx.Err() == nil {
		if rev == 0 {
			r, err := b.list(cli, reason)
			if err != nil {
				b.failed("list", err, &retry)
				if !retry.wait(b.ctx) {
					return
				}
				continue
			}
			rev = r
			retry.reset()
			b.healthy()
		}
		err := b.watch(cli, &rev, &retry)
		switch {
		case b.ctx.Err() != nil:
			return
		case errors.Is(err, errCompacted):
			b.log.Warn("etcd watch fell behind a compaction; re-reading the prefix", "revision", rev)
			rev, reason = 0, "compacted"
		default:
			b.failed("watch", err, &retry)
			if !retry.wait(b.ctx) {
				return
			}
		}
	}
}

// connect creates the client. With credentials, New authenticates, which
// waits for etcd (bounded by DialTimeout and Close).
func (b *Backend) connect() (*clientv3.Client, error) {
	// With credentials New authenticates and waits for etcd up to
	// DialTimeout without saying why; if it is still waiting after
	// diagnoseAfter, find out by dialling the endpoints ourselves.
	waiting, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTimer(diagnoseAfter)
		defer t.Stop()
		select {
		case <-waiting:
			return
		case <-t.C:
		}
		b.trouble(b.diagnose())
	}()
	defer func() { close(waiting); <-done }()
	dial := []grpc.DialOption{grpc.WithConnectParams(grpc.ConnectParams{
		Backoff: grpcbackoff.Config{
			BaseDelay:  b.opts.RetryMin,
			Multiplier: 1.6,
			Jitter:     0.2,
			MaxDelay:   min(b.opts.RetryMax, 5*time.Second),
		},
		MinConnectTimeout: b.opts.DialTimeout,
	})}
	if tc := b.opts.TLS; tc != nil && tc.ServerName != "" {
		// After the client's own credentials: this one wins.
		dial = append(dial, grpc.WithTransportCredentials(grpctls.Named(tc)))
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   b.opts.Endpoints,
		TLS:         b.opts.TLS,
		Username:    b.opts.Username,
		Password:    b.opts.Password,
		DialTimeout: b.opts.DialTimeout,
		Context:     b.ctx,
		Logger:      zap.NewNop(),
		// Keepalives notice a dead server without waiting for TCP.
		DialKeepAliveTime:    10 * time.Second,
		DialKeepAliveTimeout: 5 * time.Second,
		PermitWithoutStream:  true,
		// gRPC's default reconnect backoff grows to 2 minutes: after an
		// outage etcd would be noticed late. Keep it within RetryMax.
		DialOptions: dial,
	})
	if err != nil {
		return nil, fmt.Errorf("etcd %s: %w", strings.Join(b.opts.Endpoints, ","), err)
	}
	return cli, nil
}

// failed records a failure as the backend's problem (logged once per
// change of cause, see trouble) and logs the retry at debug level, so an
// outage does not flood the log.
func (b *Backend) failed(op string, err error, retry *backoff) {
	if b.ctx.Err() != nil {
		return
	}
	if c := health.Cause(err); !health.Vague(c) || !b.health.Failing() {
		b.trouble(c)
	}
	b.log.Debug("etcd "+op+" failed; retrying", "err", err, "retry_in", retry.next().Round(time.Millisecond))
}

// list reads the whole prefix at one revision, page by page, and brings
// the index to exactly that state. It returns the revision.
func (b *Backend) list(cli *clientv3.Client, reason string) (int64, error) {
	// The burst (kind.Bulk) begins with the first page: not while etcd
	// is unreachable and the read only waits.
	var endBurst func()
	defer func() {
		if endBurst != nil {
			endBurst()
		}
	}()
	start := time.Now()
	end := clientv3.GetPrefixRangeEnd(b.rangeK)
	// A re-list marks the keys it reads, to delete those held but gone.
	relist := b.keyCount() > 0
	if relist {
		b.startMarks()
	}
	// Indexing a page of 50,000 keys holds a processor for tens of
	// milliseconds: while queries are answered, on one processor, it gives
	// way to them every millisecond.
	var pc turns.Pacer
	if relist || b.synced.Load() || b.opts.Paced {
		pc = b.pacer()
	}
	var rev int64
	from := b.rangeK
	changed, malformed, read := 0, 0, 0
	for {
		opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithLimit(b.opts.PageSize)}
		if rev != 0 {
			opts = append(opts, clientv3.WithRev(rev))
		}
		ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
		resp, err := cli.Get(ctx, from, opts...)
		cancel()
		if err != nil {
			return 0, fmt.Errorf("etcd get %s: %w", b.rangeK, err)
		}
		if rev == 0 {
			rev = resp.Header.Revision
			endBurst = b.opts.Bulk.Begin()
		}
		for _, kv := range resp.Kvs {
			pc.Step()
			k := string(kv.Key)
			ch, err := b.put(k, kv.Value, kv.ModRevision)
			if ch {
				changed++
			}
			if err != nil {
				malformed++
				b.malformed(k, kv.ModRevision, err)
			}
		}
		if !resp.More || len(resp.Kvs) == 0 {
			break
		}
		from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
		if read += len(resp.Kvs); read >= releaseMin {
			// Collect the pages read so far: left to the runtime, the
			// heap of a large read grows to up to twice the index before
			// each GC (1,000,000 keys: peak RSS 320-375 MiB for 230 MiB
			// of index), with a GC a page it stays within a page of it.
			resp = nil
			runtime.GC()
		}
	}
	if relist {
		for _, k := range b.unmarked() {
			b.del(k)
			changed++
		}
	}
	b.m.relists.WithLabelValues(b.opts.Name, reason).Inc()
	if changed > 0 || !b.synced.Load() {
		b.changed()
	}
	b.log.Info("etcd prefix read", "prefix", b.opts.Prefix, "revision", rev, "keys", b.keyCount(),
		"records", b.records.Load(), "changed", changed, "malformed", malformed, "reason", reason,
		"took", time.Since(start).Round(time.Millisecond))
	if !b.synced.Load() {
		b.synced.Store(true)
		close(b.syncedCh)
	}
	if b.keyCount() >= releaseMin {
		// A full read leaves more garbage than the index holds (every
		// page's response, every value's decoding, a re-list's set of
		// keys), which the runtime would keep mapped: after a GC the heap
		// may grow to twice what is live before the next one. Return it
		// now, once per read.
		debug.FreeOSMemory()
	}
	return rev, nil
}

// pacer paces index writes made while queries are answered (see package
// turns: only with one processor).
func (b *Backend) pacer() turns.Pacer { return turns.New(&turns.Pacing{Sleep: b.opts.sleep}) }

// releaseMin is the number of keys from which a full read of the prefix
// returns the memory it used on the way to the system (TestMemory1M shows
// the effect on RSS).
const releaseMin = 1 << 16

// watch follows the prefix from *rev+1, applying events and advancing
// *rev, until the watch ends.
func (b *Backend) watch(cli *clientv3.Client, rev *int64, retry *backoff) error {
	if b.opts.beforeWatch != nil {
		b.opts.beforeWatch()
	}
	ctx, cancel := context.WithCancel(clientv3.WithRequireLeader(b.ctx))
	defer cancel()
	// WithFragment: etcd sends a revision's events in pieces of at most
	// its request limit (1.5 MiB by default), which the client puts
	// together. Unfragmented, one transaction over a large prefix (a
	// prefix deleted at once) came as one message whose decoding held a
	// processor for tens of milliseconds.
	ch := cli.Watch(ctx, b.rangeK, clientv3.WithPrefix(), clientv3.WithRev(*rev+1), clientv3.WithProgressNotify(), clientv3.WithFragment())
	// A watch response may carry a whole transaction's events (a prefix
	// deleted at once: every key): applied while queries are answered,
	// they give way as a re-list does.
	pc := b.pacer()
	for resp := range ch {
		if resp.CompactRevision != 0 {
			return errCompacted
		}
		if err := resp.Err(); err != nil {
			return fmt.Errorf("etcd watch %s: %w", b.rangeK, err)
		}
		retry.reset()
		b.healthy()
		if resp.IsProgressNotify() {
			*rev = max(*rev, resp.Header.Revision)
			continue
		}
		changed := false
		for _, ev := range resp.Events {
			pc.Step()
			k := string(ev.Kv.Key)
			switch ev.Type {
			case clientv3.EventTypePut:
				ch, err := b.put(k, ev.Kv.Value, ev.Kv.ModRevision)
				changed = changed || ch
				if err != nil {
					b.malformed(k, ev.Kv.ModRevision, err)
				}
				b.m.events.WithLabelValues(b.opts.Name, "put").Inc()
			case clientv3.EventTypeDelete:
				changed = b.del(k) || changed
				b.m.events.WithLabelValues(b.opts.Name, "delete").Inc()
			}
			*rev = max(*rev, ev.Kv.ModRevision)
		}
		if changed {
			b.changed()
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return errors.New("etcd watch channel closed")
}

// changed publishes the new serial and record count.
func (b *Backend) changed() {
	b.serial.Store(max(b.opts.Serials.Next(), b.serial.Load()+1))
	b.wmu.Lock()
	n := b.anyIndex().records
	b.wmu.Unlock()
	b.records.Store(int64(n))
	b.m.records.WithLabelValues(b.opts.Name).Set(float64(n))
}

// put applies a put to every view's index; the result is the same for
// each (they hold the same keys).
func (b *Backend) put(key string, val []byte, modRev int64) (changed bool, err error) {
	b.wmu.Lock()
	defer b.wmu.Unlock()
	first := true
	for _, v := range b.views {
		c, e := v.ix.put(key, val, modRev)
		if first {
			changed, err, first = c, e, false
		}
	}
	return changed, err
}

// del applies a delete to every view's index.
func (b *Backend) del(key string) (changed bool) {
	b.wmu.Lock()
	defer b.wmu.Unlock()
	for _, v := range b.views {
		changed = v.ix.del(key) || changed
	}
	return changed
}

// anyIndex is one of the views' indexes (they hold the same keys). Caller
// holds wmu.
func (b *Backend) anyIndex() *index {
	for _, v := range b.views {
		return v.ix
	}
	panic("etcd: backend without a view")
}

func (b *Backend) keyCount() int {
	b.wmu.Lock()
	defer b.wmu.Unlock()
	return b.anyIndex().keyCount()
}

// startMarks starts a re-read in every view's index: the keys put from
// now on are marked.
func (b *Backend) startMarks() {
	b.wmu.Lock()
	defer b.wmu.Unlock()
	for _, v := range b.views {
		v.ix.startMarks()
	}
}

// unmarked ends the re-read and lists the keys held that it did not put.
func (b *Backend) unmarked() []string {
	b.wmu.Lock()
	defer b.wmu.Unlock()
	var out []string
	for _, v := range b.views {
		out = v.ix.unmarked() // the same keys in every index
	}
	return out
}

// malformed logs and counts a key or value that gives no record; the
// index calls it once per key revision.
func (b *Backend) malformed(key string, rev int64, err error) {
	b.m.malformed.WithLabelValues(b.opts.Name).Inc()
	b.log.Warn("etcd value skipped", "key", key, "revision", rev, "err", err)
}

// monitor follows the client connection's state: dnsd_etcd_up, and the
// backend's problem: when a connection attempt fails, it asks gRPC why
// at once (gRPC itself only says so to a call, and calls wait for the
// connection), so the cause is known within moments of the attempt.
func (b *Backend) monitor(conn *grpc.ClientConn) {
	defer b.wg.Done()
	st := conn.GetState()
	for {
		up := st == connectivity.Ready
		if was := b.up.Swap(up); was != up {
			v := 0.0
			if up {
				v = 1
			}
			b.m.up.WithLabelValues(b.opts.Name).Set(v)
		}
		switch st {
		case connectivity.Ready:
			b.healthy()
		case connectivity.TransientFailure:
			b.trouble(b.probe(conn))
		}
		if !b.waitState(conn, st) {
			return
		}
		st = conn.GetState()
	}
}

// lookup looks name up in the index of the backend's own default TTL
// (tests; Sources look up in their view's index).
func (b *Backend) lookup(name, zone string) (rrs []dns.RR, ok bool) {
	return lookupIn(b.defaultIndex(), name, zone)
}

// defaultIndex is the index of the TTL the backend was opened with, or
// any when that one has been let go of.
func (b *Backend) defaultIndex() *index {
	b.wmu.Lock()
	defer b.wmu.Unlock()
	if v := b.views[b.TTL()]; v != nil {
		return v.ix
	}
	return b.anyIndex()
}

// lookupIn is the index lookup behind a Source.
func lookupIn(ix *index, name, zone string) (rrs []dns.RR, ok bool) {
	if hasStarLabel(name) {
		return ix.expand(name)
	}
	if n := ix.lookup(name); n != nil {
		return n.records(), true
	}
	if w := ix.wildcard(name, zone); w != nil {
		return w.records(), true
	}
	return nil, false
}

// backoff is an exponential backoff with jitter.
type backoff struct {
	min, max time.Duration
	n        int
}

func (r *backoff) next() time.Duration {
	d := r.min << min(r.n, 20)
	if d > r.max || d <= 0 {
		d = r.max
	}
	return d
}

func (r *backoff) reset() { r.n = 0 }

// wait sleeps for the next backoff (with ±20% jitter); false when ctx
// ended.
func (r *backoff) wait(ctx context.Context) bool {
	d := r.next()
	d += time.Duration((rand.Float64()*0.4 - 0.2) * float64(d))
	r.n++
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
