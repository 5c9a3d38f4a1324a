package etcd

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"math/rand/v2"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	grpcbackoff "google.golang.org/grpc/backoff"
	"google.golang.org/grpc/connectivity"

	"github.com/dnsd/dnsd/internal/grpctls"
	"github.com/dnsd/dnsd/internal/health"
	"github.com/dnsd/dnsd/internal/pacing"
	"github.com/dnsd/dnsd/pipeline"
	"github.com/dnsd/dnsd/sources/kind"
)

// Options configure a Backend.
type Options struct {
	// Name identifies the backend in logs and metrics: endpoints and
	// prefix, never credentials.
	Name      string
	Endpoints []string    // http:// or https:// URLs; none: required
	Prefix    string      // e.g. "/skydns"; "/" for the whole keyspace; required
	TLS       *tls.Config // nil: plain http
	Username  string      // "": no authentication
	Password  string      // never logged
	// TTL is the TTL of records whose value has no "ttl". Zero: such records get TTL 0.
	TTL     time.Duration
	Logger  *slog.Logger // nil: discarded
	Metrics *Metrics     // nil: a private, unregistered set
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
	// pacing). A start's first read is not paced: nothing is served yet. False at a start.
	Paced bool

	// sleep is the pacing's sleep (tests count it; nil: time.Sleep).
	sleep func(time.Duration)

	// Tuning, mostly for tests; zero values mean the defaults.
	DialTimeout time.Duration // per connection attempt (default 5s)
	RetryMin    time.Duration // first backoff (default 200ms)
	RetryMax    time.Duration // longest backoff (default 10s)
	PageSize    int64         // keys per read of the initial list (default 50000)
	// CheckEvery is how often the backend asks etcd whether it is still
	// the cluster and the history it read (default 10s); it also asks at
	// every reconnection.
	CheckEvery time.Duration

	// beforeWatch, when set (tests), runs before each watch starts;
	// beforeReread before each read of the prefix after the first.
	beforeWatch  func()
	beforeReread func()
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
	// rereading is why the prefix is being read again (etcd came back as
	// another, the watch was compacted); nil when it is not.
	rereading atomic.Pointer[string]
	// reconnected tells the watch that the connection is up again.
	reconnected chan struct{}
	// cli is the client once connected (updates write through it).
	cli atomic.Pointer[clientv3.Client]
	// applied is the etcd revision the indexes reflect: every event up to
	// it is applied (after a read of the prefix: its revision). appliedCh
	// is closed and replaced whenever it rises.
	amu       sync.Mutex
	applied   int64
	appliedCh chan struct{}

	// Owned by run: what the data held was read from.
	clusterID uint64 // of the last read (0: none yet)
	last      anchor // the last key put that was applied
	seed      maphash.Seed

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
	if opts.CheckEvery <= 0 {
		opts.CheckEvery = 10 * time.Second
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
		views:    map[uint32]*view{pipeline.TTLSeconds(opts.TTL): newView(newIndex(opts.Prefix, pipeline.TTLSeconds(opts.TTL)))},
		rangeK:   strings.TrimSuffix(opts.Prefix, "/") + "/",
		syncedCh: make(chan struct{}),
		seed:     maphash.MakeSeed(),

		appliedCh: make(chan struct{}),

		reconnected: make(chan struct{}, 1),
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
// "x509: ...", "authentication failed, ..."), or why the prefix is being
// read again (see Rereading); "" when neither.
func (b *Backend) Problem() string {
	p := b.health.Problem()
	if r := b.Rereading(); r != "" {
		if p != "" {
			return r + "; " + p
		}
		return r
	}
	return p
}

// Rereading is why the backend is reading the prefix again after its
// first sync ("etcd cluster changed (id X -> Y): re-reading"), "" when it
// is not. Meanwhile the data read before keeps being served.
func (b *Backend) Rereading() string {
	if r := b.rereading.Load(); r != nil {
		return *r
	}
	return ""
}

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
	b.cli.Store(cli)
	b.wg.Add(1)
	go b.monitor(cli.ActiveConnection())

	var rev int64   // last revision applied
	need := "start" // why the prefix must be read; "" when it need not
	fresh := false  // read it into new indexes: etcd is not the one read
	for b.ctx.Err() == nil {
		if need != "" {
			r, err := b.list(cli, need, fresh, rev)
			var other *otherError
			switch {
			case errors.As(err, &other): // found by a re-read in place
				b.reread(other.cause, rev)
				need, fresh = other.reason, true
				continue
			case err != nil:
				b.failed("list", err, &retry)
				if !retry.wait(b.ctx) {
					return
				}
				continue
			}
			b.setApplied(r, fresh) // another etcd's revisions start anew
			rev, need, fresh = r, "", false
			retry.reset()
			b.healthy()
			b.rereadDone()
		}
		err := b.watch(cli, &rev, &retry)
		var other *otherError
		switch {
		case b.ctx.Err() != nil:
			return
		case errors.As(err, &other):
			b.reread(other.cause, rev)
			need, fresh = other.reason, true
		case errors.Is(err, errCompacted):
			b.log.Warn("etcd watch fell behind a compaction; re-reading the prefix", "revision", rev)
			b.reread(fmt.Sprintf("etcd watch compacted past revision %d: re-reading", rev), rev)
			need = "compacted"
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
// the indexes to exactly that state. It returns the revision. fresh reads
// into new indexes, swapped in at the end (etcd is not the one read
// before: its keys at a revision held may have other values); otherwise
// the keys read are applied in place, and an etcd found to be another
// than the one read (held: the revision applied) is an *otherError.
func (b *Backend) list(cli *clientv3.Client, reason string, fresh bool, held int64) (int64, error) {
	if b.synced.Load() && b.opts.beforeReread != nil {
		b.opts.beforeReread()
	}
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
	// A re-list in place marks the keys it reads, to delete those held
	// but gone; a fresh one fills new indexes, one per view.
	relist := b.keyCount() > 0
	var into map[uint32]*index
	if fresh {
		into = b.newIndexes()
	} else if relist {
		b.startMarks()
	}

	// Indexing a page of 50,000 keys holds a processor for tens of
	// milliseconds: while queries are answered, on one processor, it gives
	// way to them every millisecond.
	var pc pacing.Pacer
	if relist || b.synced.Load() || b.opts.Paced {
		pc = b.pacer()
	}
	var rev int64
	var cluster uint64
	var top *mvccpb.KeyValue // the key last put, as of rev
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
			if !fresh && relist {
				if err := b.differs(resp.Header, held); err != nil {
					return 0, err
				}
			}
			rev, cluster = resp.Header.Revision, resp.Header.ClusterId
			endBurst = b.opts.Bulk.Begin()
		}
		for _, kv := range resp.Kvs {
			pc.Step()
			if top == nil || kv.ModRevision > top.ModRevision {
				top = kv
			}
			k := string(kv.Key)
			var ch bool
			if fresh {
				ch, err = putInto(into, k, kv.Value, kv.ModRevision)
			} else {
				ch, err = b.put(k, kv.Value, kv.ModRevision)
			}
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
	switch {
	case fresh:
		b.swap(into)
		changed++ // whatever the keys, the data is another's
	case relist:
		for _, k := range b.unmarked() {
			b.del(k)
			changed++
		}
	}
	b.clusterID, b.last = cluster, b.anchorOf(top)
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
// pacing: only with one processor).
func (b *Backend) pacer() pacing.Pacer { return pacing.New(&pacing.Pacing{Sleep: b.opts.sleep}) }

// newIndexes returns an empty index for each default TTL in use, for a
// fresh read of the prefix.
func (b *Backend) newIndexes() map[uint32]*index {
	b.wmu.Lock()
	defer b.wmu.Unlock()
	out := make(map[uint32]*index, len(b.views))
	for ttl := range b.views {
		out[ttl] = newIndex(b.opts.Prefix, ttl)
	}
	return out
}

// putInto applies a put to indexes nobody reads yet (a fresh read).
func putInto(into map[uint32]*index, key string, val []byte, modRev int64) (changed bool, err error) {
	first := true
	for _, ix := range into {
		c, e := ix.put(key, val, modRev)
		if first {
			changed, err, first = c, e, false
		}
	}
	return changed, err
}

// swap makes the indexes of a fresh read the views' indexes, each at once:
// a reader sees the data read before or the new data, never a mix. A view
// opened during the read (a new TTL) gets a clone of one of them.
func (b *Backend) swap(into map[uint32]*index) {
	b.wmu.Lock()
	defer b.wmu.Unlock()
	var any *index
	for _, ix := range into {
		any = ix
		break
	}
	for ttl, v := range b.views {
		ix := into[ttl]
		if ix == nil {
			ix = any.clone(ttl)
		}
		v.ix.Store(ix)
	}
}

// anchor is the last key put that the backend applied: etcd, if it is the
// one read, holds that value at that revision.
type anchor struct {
	key string // "" when none (an empty prefix)
	rev int64
	sum uint64 // of the value
}

func (b *Backend) anchorOf(kv *mvccpb.KeyValue) anchor {
	if kv == nil {
		return anchor{}
	}
	return anchor{key: string(kv.Key), rev: kv.ModRevision, sum: maphash.Bytes(b.seed, kv.Value)}
}

// otherError is etcd found to be another than the one read: another
// cluster ID, a revision below the one applied, another value at the
// revision of the last key put.
type otherError struct {
	reason string // dnsd_etcd_relists_total's
	cause  string // for /ready and the log
}

func (e *otherError) Error() string { return e.cause }

// differs compares a linearizable response's header with the cluster
// read and the revision held.
func (b *Backend) differs(h *etcdserverpb.ResponseHeader, held int64) error {
	switch {
	case h == nil:
		return nil
	case b.clusterID != 0 && h.ClusterId != b.clusterID:
		return &otherError{"cluster_changed", fmt.Sprintf("etcd cluster changed (id %x -> %x): re-reading", b.clusterID, h.ClusterId)}
	case h.Revision < held:
		return &otherError{"revision_back", fmt.Sprintf("etcd revision went back (from %d to %d): re-reading", held, h.Revision)}
	}
	return nil
}

// verify asks etcd whether it is still the one read: the same cluster ID,
// a revision not below rev, and the last key put with the value applied
// at its revision. nil when it is, or when it cannot say (etcd not
// answering: the watch says why; that revision compacted and the key
// changed since).
func (b *Backend) verify(cli *clientv3.Client, rev int64) error {
	ctx, cancel := context.WithTimeout(b.ctx, b.opts.DialTimeout)
	defer cancel()
	resp, err := cli.Get(ctx, b.rangeK)
	if err != nil {
		b.log.Debug("etcd check failed", "err", err)
		return nil
	}
	if err := b.differs(resp.Header, rev); err != nil {
		return err
	}
	a := b.last
	if a.key == "" {
		return nil
	}
	resp, err = cli.Get(ctx, a.key, clientv3.WithRev(a.rev))
	if errors.Is(err, rpctypes.ErrCompacted) {
		// What is there now says as much when it is from before rev.
		resp, err = cli.Get(ctx, a.key)
		if err == nil && (len(resp.Kvs) == 0 || resp.Kvs[0].ModRevision > rev) {
			return nil
		}
	}
	switch {
	case errors.Is(err, rpctypes.ErrFutureRev):
		return &otherError{"revision_back", fmt.Sprintf("etcd revision went back (from %d): re-reading", rev)}
	case err != nil:
		b.log.Debug("etcd check failed", "err", err)
		return nil
	}
	if len(resp.Kvs) == 1 && resp.Kvs[0].ModRevision == a.rev && maphash.Bytes(b.seed, resp.Kvs[0].Value) == a.sum {
		return nil
	}
	return &otherError{"history_changed", fmt.Sprintf("etcd history changed at revision %d (key %s): re-reading", a.rev, a.key)}
}

// reread records why the prefix is read again: /ready says so until
// rereadDone, and the log says it once per cause.
func (b *Backend) reread(cause string, rev int64) {
	if prev := b.rereading.Swap(&cause); prev != nil && *prev == cause {
		return
	}
	b.log.Warn("etcd is not as read; re-reading the prefix, serving the data read before until done",
		"cause", cause, "revision", rev, "keys", b.keyCount())
}

// rereadDone ends a re-read.
func (b *Backend) rereadDone() {
	if prev := b.rereading.Swap(nil); prev != nil {
		b.log.Info("etcd prefix read again; serving what etcd holds", "previous_cause", *prev, "records", b.records.Load())
	}
}

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
	check := time.NewTicker(b.opts.CheckEvery)
	defer check.Stop()
watching:
	for {
		var resp clientv3.WatchResponse
		select {
		case r, ok := <-ch:
			if !ok {
				break watching
			}
			resp = r
		case <-b.reconnected:
			if err := b.verify(cli, *rev); err != nil {
				return err
			}
			continue
		case <-check.C:
			if err := b.verify(cli, *rev); err != nil {
				return err
			}
			continue
		}
		// A watch response's header says which cluster sent it (not its
		// revision: a member that lags may serve the watch).
		if h := resp.Header; h != nil && b.clusterID != 0 && h.ClusterId != 0 && h.ClusterId != b.clusterID {
			return b.differs(h, 0)
		}
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
			b.advance(*rev)
			continue
		}
		changed := false
		for _, ev := range resp.Events {
			pc.Step()
			k := string(ev.Kv.Key)
			switch ev.Type {
			case clientv3.EventTypePut:
				b.last = b.anchorOf(ev.Kv)
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
		b.advance(*rev)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return errors.New("etcd watch channel closed")
}

// advance records that the indexes reflect etcd up to revision rev (with
// the serial published) and wakes those waiting for it.
func (b *Backend) advance(rev int64) { b.setApplied(rev, false) }

// setApplied sets the applied revision: to rev if it is higher, or
// whatever it is with reset (data read from another etcd).
func (b *Backend) setApplied(rev int64, reset bool) {
	b.amu.Lock()
	defer b.amu.Unlock()
	if rev > b.applied || reset && rev != b.applied {
		b.applied = rev
		close(b.appliedCh)
		b.appliedCh = make(chan struct{})
	}
}

// Applied is the etcd revision the backend's data reflects: every change
// up to it is served (0 before the first read of the prefix).
func (b *Backend) Applied() int64 {
	b.amu.Lock()
	defer b.amu.Unlock()
	return b.applied
}

// WaitApplied blocks until the backend serves etcd's data as of revision
// rev or ctx ends. A revision no key of the prefix changed at arrives
// through a progress notification, which it asks the watch for.
func (b *Backend) WaitApplied(ctx context.Context, rev int64) error {
	// The revision's events are usually on their way: ask for progress
	// only when they do not come at once.
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		b.amu.Lock()
		cur, ch := b.applied, b.appliedCh
		b.amu.Unlock()
		if cur >= rev {
			return nil
		}
		select {
		case <-ch:
		case <-tick.C:
			if cli := b.cli.Load(); cli != nil {
				// The watch's stream is the one of its context's metadata.
				_ = cli.RequestProgress(clientv3.WithRequireLeader(ctx))
			}
			tick.Reset(200 * time.Millisecond)
		case <-ctx.Done():
			return fmt.Errorf("etcd %s: revision %d not applied yet (at %d): %w", b.opts.Name, rev, cur, ctx.Err())
		case <-b.ctx.Done():
			return fmt.Errorf("etcd %s: closed", b.opts.Name)
		}
	}
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
		c, e := v.ix.Load().put(key, val, modRev)
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
		changed = v.ix.Load().del(key) || changed
	}
	return changed
}

// anyIndex is one of the views' indexes (they hold the same keys). Caller
// holds wmu.
func (b *Backend) anyIndex() *index {
	for _, v := range b.views {
		return v.ix.Load()
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
		v.ix.Load().startMarks()
	}
}

// unmarked ends the re-read and lists the keys held that it did not put.
func (b *Backend) unmarked() []string {
	b.wmu.Lock()
	defer b.wmu.Unlock()
	var out []string
	for _, v := range b.views {
		out = v.ix.Load().unmarked() // the same keys in every index
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
			if up {
				// The watch checks that etcd is still the one read.
				select {
				case b.reconnected <- struct{}{}:
				default:
				}
			}
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

// defaultView is the view of the TTL the backend was opened with, or any
// when that one has been let go of.
func (b *Backend) defaultView() *view {
	b.wmu.Lock()
	defer b.wmu.Unlock()
	if v := b.views[b.TTL()]; v != nil {
		return v
	}
	for _, v := range b.views {
		return v
	}
	panic("etcd: backend without a view")
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
