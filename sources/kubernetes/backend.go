package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/watchlist"
	"k8s.io/klog/v2"

	"github.com/dnsd/dnsd/internal/health"
	"github.com/dnsd/dnsd/pipeline"
)

// Client QPS and burst: informers only list and watch, so these matter
// when many informers relist at once after an outage; high enough not to
// slow a big cluster's relist, low enough to be a polite client.
const (
	clientQPS   = 50
	clientBurst = 100
)

// byServiceIndex indexes endpoint slices by "<namespace>/<service>".
const byServiceIndex = "service"

// ClientConfig says how to reach a cluster.
type ClientConfig struct {
	// Kubeconfig is a kubeconfig file; "" means in-cluster config, then
	// $KUBECONFIG, then ~/.kube/config.
	Kubeconfig string
	Context    string // "": the current context
	UserAgent  string // "": client-go's default
	// Logger, when set, hears when the API server becomes unreachable and
	// reachable again (once per transition, not per retry). Nil: nobody hears.
	Logger *slog.Logger
	// Health, when set, receives the connection's problems (and logs
	// them); nil: a tracker of its own that logs to Logger.
	Health *health.Tracker
}

// RESTConfig builds the client configuration without contacting the API
// server (it reads files only). Errors do not name the source kind: the
// caller's context does.
func RESTConfig(c ClientConfig) (*rest.Config, error) {
	var cfg *rest.Config
	if c.Kubeconfig == "" {
		ic, err := rest.InClusterConfig()
		switch {
		case err == nil:
			cfg = ic
		case errors.Is(err, rest.ErrNotInCluster):
		default:
			return nil, fmt.Errorf("in-cluster config: %w", err)
		}
	}
	if cfg == nil {
		rules, ok := kubeconfigRules(c.Kubeconfig)
		if !ok {
			return nil, errors.New("no cluster configuration: not running in a pod, $KUBECONFIG unset and no ~/.kube/config (set kubeconfig)")
		}
		overrides := &clientcmd.ConfigOverrides{CurrentContext: c.Context}
		kc, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides).ClientConfig()
		if err != nil {
			return nil, fmt.Errorf("kubeconfig: %w", err)
		}
		cfg = kc
	}
	cfg.QPS, cfg.Burst = clientQPS, clientBurst
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	// No gzip: on the LAN or host a DNS server shares with its API
	// server, compressing the lists costs the API server and dnsd more
	// time than sending them whole (first answer on 100,000 endpoints
	// 1.20 -> 0.96 s, dnsd's CPU to it -0.12 s).
	cfg.DisableCompression = true
	cfg.UserAgent = c.UserAgent
	cfg.WarningHandler = rest.NoWarnings{}
	if c.Logger != nil || c.Health != nil {
		h := c.Health
		if h == nil {
			h = health.New(c.Logger)
		}
		cw := &connWatch{health: h, host: cfg.Host}
		cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
			cw.rt = rt
			return cw
		})
	}
	return cfg, nil
}

// patientLW is a ListerWatcher whose List and Watch first wait while the API
// server is known unreachable (wait). client-go's reflector retries a
// failed list with a backoff that grows to 30 s, with jitter up to twice
// that: each attempt made during an outage lengthens the wait after it,
// so changes made once the API server is back could take a minute to be
// served. Waiting here instead keeps the failed attempts few, and the
// list goes out as soon as the server says it is ready.
//
// It also tells relist of the lists and watches the API server refuses
// for their resource version, and of the complete lists after them.
type patientLW struct {
	cache.ListerWatcher
	wait   func()
	relist *relisting
}

// List is ListWithContext without a context (the ListerWatcher interface
// the informer takes requires it; the reflector calls the context form).
func (l patientLW) List(options metav1.ListOptions) (runtime.Object, error) {
	return l.ListWithContext(context.Background(), options)
}

// Watch is WatchWithContext without a context, as List.
func (l patientLW) Watch(options metav1.ListOptions) (watch.Interface, error) {
	return l.WatchWithContext(context.Background(), options)
}

// ListWithContext waits, then lists through the wrapped ListerWatcher.
func (l patientLW) ListWithContext(ctx context.Context, options metav1.ListOptions) (runtime.Object, error) {
	l.wait()
	if l.relist.pending() && options.Continue == "" {
		// The versions held are ahead of the server: the current state.
		options.ResourceVersion, options.ResourceVersionMatch = "", ""
	}
	obj, err := cache.ToListerWatcherWithContext(l.ListerWatcher).ListWithContext(ctx, options)
	if err == nil {
		if m, merr := apimeta.ListAccessor(obj); merr == nil && m.GetContinue() == "" { // the last page
			l.relist.listed()
		}
	} else {
		l.relist.refused(err, options.ResourceVersion)
	}
	return obj, err
}

// WatchWithContext waits as ListWithContext does: after a broken watch
// the reflector watches again from where it was, with the same backoff.
func (l patientLW) WatchWithContext(ctx context.Context, options metav1.ListOptions) (watch.Interface, error) {
	l.wait()
	initial := options.SendInitialEvents != nil && *options.SendInitialEvents
	if l.relist.pending() {
		if !initial {
			// A watch from the versions held would wait for the server
			// to reach them: the informer lists first.
			return nil, errRelist
		}
		// A streamed list from the versions held, ahead of the server:
		// from its current state instead.
		options.ResourceVersion = ""
	}
	w, err := cache.ToListerWatcherWithContext(l.ListerWatcher).WatchWithContext(ctx, options)
	if err != nil {
		l.relist.refused(err, options.ResourceVersion)
		return w, err
	}
	if initial || l.relist.pending() {
		// Only these watches' events are looked at: a watch that lists,
		// or one started while a list is due.
		w = l.relist.watching(w, options)
	}
	l.relist.setCurrent(w)
	return w, nil
}

// IsWatchListSemanticsUnSupported says what the wrapped ListerWatcher
// says (the reflector asks whether it may stream the initial list).
func (l patientLW) IsWatchListSemanticsUnSupported() bool {
	return watchlist.DoesClientNotSupportWatchListSemantics(l.ListerWatcher)
}

// reachWait bounds how long a list or watch waits for the API server to
// say it is ready (then it is tried, and fails, as without the wait);
// reachPoll is how often it asks.
const (
	reachWait = 30 * time.Second
	reachPoll = 250 * time.Millisecond
)

// readier is an API that can say whether its server answers (restAPI).
type readier interface {
	Ready(ctx context.Context) error
}

// waitReachable returns at once unless the connection is failing (its
// tracker has a problem); then when the API server says it is ready, the
// backend is closed, or reachWait has passed.
func (b *Backend) waitReachable(r readier) {
	if !b.health.Failing() {
		return
	}
	ctx, cancel := context.WithTimeout(b.ctx, reachWait)
	defer cancel()
	for {
		rctx, rcancel := context.WithTimeout(ctx, 2*time.Second)
		err := r.Ready(rctx)
		rcancel()
		if err == nil {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(reachPoll):
		}
	}
}

// connWatch records the API server's reachability in a health tracker:
// the informers retry with backoff through an outage, and an operator
// wants one line with the cause when it starts (or the cause changes) and
// one when it ends. A 401 (credentials refused) counts as a connection
// problem: every request gets it.
type connWatch struct {
	rt     http.RoundTripper
	health *health.Tracker
	host   string
}

func (c *connWatch) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := c.rt.RoundTrip(req)
	if err != nil && req.Context().Err() != nil {
		return resp, err // cancelled by us (shutdown, watch end)
	}
	switch {
	case err != nil:
		c.health.Fail("kubernetes API server unreachable; retrying (what was synced is still served)", health.Cause(err), "host", c.host)
	case resp.StatusCode == http.StatusUnauthorized:
		c.health.Fail("kubernetes API server refuses dnsd's credentials; retrying (what was synced is still served)", resp.Status, "host", c.host)
	default:
		if c.health.Failing() {
			c.health.Recover("kubernetes API server reachable again", "host", c.host)
		}
	}
	return resp, err
}

// kubeconfigRules are the loading rules of the kubeconfig a source reads
// when it does not take the in-cluster configuration: path, else
// $KUBECONFIG or ~/.kube/config; ok is false when there is none of those.
func kubeconfigRules(path string) (*clientcmd.ClientConfigLoadingRules, bool) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if path != "" {
		rules.ExplicitPath = path
		return rules, true
	}
	return rules, anyFile(rules.Precedence)
}

func anyFile(paths []string) bool {
	for _, p := range paths {
		if p == "" {
			continue
		}
		if st, err := os.Stat(filepath.Clean(p)); err == nil && !st.IsDir() {
			return true
		}
	}
	return false
}

// Backend is one connection to a cluster: a clientset and shared
// informers on Services, EndpointSlices, Namespaces and (when asked)
// Pods. Any number of Sources register their handlers on it. Opening
// never waits for the API server: the informers list and watch in the
// background, and client-go retries with backoff through outages while
// the stores keep their last contents.
type Backend struct {
	logger  *slog.Logger
	metrics *Metrics

	services cache.SharedIndexInformer
	slices   cache.SharedIndexInformer
	ns       cache.SharedIndexInformer
	// pods is nil until a source needs it (pods: verified): podInformer
	// starts it on this connection then, so turning pods on is no new
	// connection and no re-list of the rest. Read under podsMu.
	pods   cache.SharedIndexInformer
	podsMu sync.Mutex
	newInf func(resource string, indexers cache.Indexers) cache.SharedIndexInformer
	ctx    context.Context // the informers' (cancelled by Close)
	// health is the connection's problem (shared with the transport);
	// listErr the last list/watch error of each informer.
	health   *health.Tracker
	endpoint string
	listMu   sync.Mutex
	listErr  map[cache.SharedIndexInformer]string
	// relisting is why an informer lists again (by resource): the API
	// server refused its resource version (see relisting).
	relistMu  sync.Mutex
	relisting map[string]string
	relists   []*relisting // every informer's (on a real API server)
	// serial is the SOA serial of every source over this backend: it
	// starts at a serial of serials and advances to a new one with each
	// change applied.
	serial    atomic.Uint32
	serials   *pipeline.SerialClock
	cancel    context.CancelFunc
	running   sync.WaitGroup // the informers
	closeOnce sync.Once
}

// BackendOptions configure a Backend.
type BackendOptions struct {
	// Pods adds a Pod informer (pods: verified). False: none.
	Pods    bool
	Logger  *slog.Logger // nil: discarded
	Metrics *Metrics     // nil: not recorded
	// Health is the connection's tracker, the one given to RESTConfig
	// (nil: one of its own that only list/watch errors reach).
	Health *health.Tracker
	// Endpoint names the API server for an operator (its URL). "": unnamed.
	Endpoint string
	// Serials hands out SOA serials, shared by every source of the
	// process (nil: the Unix time, still rising with every change).
	Serials *pipeline.SerialClock
}

// NewBackend starts informers over api. Close stops them.
func NewBackend(api API, opts BackendOptions) *Backend {
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	m := opts.Metrics
	if m == nil {
		m = NewMetrics()
	}
	b := &Backend{logger: logger, metrics: m, health: opts.Health, endpoint: opts.Endpoint, listErr: make(map[cache.SharedIndexInformer]string), relisting: make(map[string]string)}
	if b.health == nil {
		b.health = health.New(logger)
	}
	b.serials = opts.Serials
	b.serial.Store(b.serials.Next())
	informer := func(resource string, indexers cache.Indexers) cache.SharedIndexInformer {
		lw := api.ListWatch(resource)
		var rl *relisting
		if r, ok := api.(readier); ok {
			rl = &relisting{b: b, resource: resource}
			lw = patientLW{ListerWatcher: lw, wait: func() { b.waitReachable(r) }, relist: rl}
		}
		inf := cache.NewSharedIndexInformer(lw, objectOf(resource), 0, indexers)
		_ = inf.SetTransform(b.strip)
		if rl != nil {
			rl.inf = inf
			b.relistMu.Lock()
			b.relists = append(b.relists, rl)
			b.relistMu.Unlock()
		}
		return inf
	}
	b.newInf = informer
	b.services = informer(resServices, cache.Indexers{})
	b.slices = informer(resSlices, cache.Indexers{byServiceIndex: sliceServiceIndex})
	b.ns = informer(resNamespace, cache.Indexers{})
	b.count(b.services, "service")
	b.count(b.slices, "endpointslice")
	b.count(b.ns, "namespace")
	for _, inf := range b.informers() {
		b.watchErrors(inf)
	}
	ctx, cancel := context.WithCancel(context.Background())
	b.cancel = cancel
	b.ctx = klog.NewContext(ctx, logr.FromSlogHandler(logger.Handler()))
	for _, inf := range b.informers() {
		b.running.Go(func() { inf.RunWithContext(b.ctx) })
	}
	if _, ok := api.(readier); ok {
		b.running.Go(func() { b.checkVersions(api) })
	}
	if opts.Pods {
		b.podInformer()
	}
	return b
}

// podInformer returns the Pod informer, starting it on first use (nil
// once the backend is closed and it never ran).
func (b *Backend) podInformer() cache.SharedIndexInformer {
	b.podsMu.Lock()
	defer b.podsMu.Unlock()
	if b.pods != nil || b.ctx.Err() != nil {
		return b.pods
	}
	inf := b.newInf(resPods, cache.Indexers{})
	b.count(inf, "pod")
	b.watchErrors(inf)
	b.running.Go(func() { inf.RunWithContext(b.ctx) })
	b.pods = inf
	b.logger.Info("kubernetes: watching pods on this connection (pods: verified)", "host", b.endpoint)
	return inf
}

func (b *Backend) informers() []cache.SharedIndexInformer {
	l := []cache.SharedIndexInformer{b.services, b.slices, b.ns}
	b.podsMu.Lock()
	if b.pods != nil {
		l = append(l, b.pods)
	}
	b.podsMu.Unlock()
	return l
}

// count records every event of inf in the event counter.
func (b *Backend) count(inf cache.SharedIndexInformer, resource string) {
	add := b.metrics.events.WithLabelValues(resource, "add")
	upd := b.metrics.events.WithLabelValues(resource, "update")
	del := b.metrics.events.WithLabelValues(resource, "delete")
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { add.Inc() },
		UpdateFunc: func(any, any) { upd.Inc() },
		DeleteFunc: func(any) { del.Inc() },
	})
}

// watchErrors logs list/watch failures the API server answers (e.g. a
// missing RBAC permission), at most once a minute per informer, and keeps
// the last one for Problem; the informer keeps retrying. Connection
// failures are logged by the transport (RESTConfig): while the connection
// has a problem, the informers' errors are that problem again and are
// logged at debug level only.
func (b *Backend) watchErrors(inf cache.SharedIndexInformer) {
	var mu sync.Mutex
	var last time.Time
	_ = inf.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *cache.Reflector, err error) {
		// client-go's default handler would log every retry at ERROR; the
		// failure is logged here instead, once per change of state.
		if errors.Is(err, context.Canceled) || errors.Is(err, io.EOF) || errors.Is(err, errRelist) {
			return
		}
		cause := health.Cause(err)
		b.listMu.Lock()
		b.listErr[inf] = r.TypeDescription() + ": " + cause
		b.listMu.Unlock()
		mu.Lock()
		now := time.Now()
		quiet := now.Sub(last) < time.Minute || b.health.Failing()
		if !quiet {
			last = now
		}
		mu.Unlock()
		lvl := slog.LevelWarn
		if quiet {
			lvl = slog.LevelDebug
		}
		b.logger.Log(ctx, lvl, "kubernetes API list/watch failed; retrying (what was synced is still served)", "resource", r.TypeDescription(), "err", cause)
	})
}

// Endpoint names the API server (its URL, never credentials).
func (b *Backend) Endpoint() string { return b.endpoint }

// Problem is why the backend cannot use the API server right now: the
// connection's problem ("connection refused", "x509: ...", "401
// Unauthorized"), else the last list/watch error of an informer that has
// not synced yet (e.g. a missing permission); "" when there is none.
func (b *Backend) Problem() string {
	if r := b.Rereading(); r != "" {
		if p := b.health.Problem(); p != "" {
			return r + "; " + p
		}
		return r
	}
	if p := b.health.Problem(); p != "" {
		return p
	}
	b.listMu.Lock()
	defer b.listMu.Unlock()
	for _, inf := range b.informers() {
		if e := b.listErr[inf]; e != "" && !inf.HasSynced() {
			return e
		}
	}
	return ""
}

// Synced reports whether every informer has listed once.
func (b *Backend) Synced() bool {
	for _, inf := range b.informers() {
		if !inf.HasSynced() {
			return false
		}
	}
	return true
}

// Close stops the informers and waits for them. Idempotent.
//
// It waits for the informers at most closeWait: client-go's reflector
// sleeps out its retry backoff (up to 30 s against an API server that is
// down) without looking at its context, and a stop must not wait for
// that. An informer still asleep then ends by itself when it wakes (its
// context is cancelled).
func (b *Backend) Close() error {
	b.closeOnce.Do(func() {
		b.podsMu.Lock() // no pod informer starts after this
		b.cancel()
		b.podsMu.Unlock()
		done := make(chan struct{})
		go func() {
			b.running.Wait()
			close(done)
		}()
		select {
		case <-done:
		case <-time.After(closeWait):
			b.logger.Info("kubernetes informers still backing off from a failed connection; they stop when they wake", "waited", closeWait)
		}
	})
	return nil
}

// closeWait bounds how long Close waits for the informers.
const closeWait = 2 * time.Second

func sliceServiceIndex(obj any) ([]string, error) {
	sl, ok := obj.(*sliceObj)
	if !ok || sl.service == "" {
		return nil, nil
	}
	return []string{sl.namespace + "/" + sl.service}, nil
}

// strip keeps only what DNS needs of an object before it enters an
// informer's store (to save memory): services and endpoint slices in
// their compact forms (object.go); namespaces and pods without managed
// fields, annotations, labels, specs. It is idempotent (a compact form is
// kept as it is).
func (b *Backend) strip(obj any) (any, error) {
	switch o := obj.(type) {
	case *corev1.Service:
		return newServiceObj(o), nil
	case *discoveryv1.EndpointSlice:
		return newSliceObj(o), nil
	case *corev1.Namespace:
		return &corev1.Namespace{ObjectMeta: meta(&o.ObjectMeta)}, nil
	case *corev1.Pod:
		out := &corev1.Pod{ObjectMeta: meta(&o.ObjectMeta)}
		out.DeletionTimestamp = o.DeletionTimestamp
		out.Status.Phase = o.Status.Phase
		out.Status.PodIP = o.Status.PodIP
		out.Status.PodIPs = o.Status.PodIPs
		return out, nil
	}
	return obj, nil
}

func meta(m *metav1.ObjectMeta) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: m.Name, Namespace: m.Namespace, UID: m.UID, ResourceVersion: m.ResourceVersion, DeletionTimestamp: m.DeletionTimestamp}
}
