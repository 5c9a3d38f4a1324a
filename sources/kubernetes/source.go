package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/dnsd/dnsd/internal/pacing"
	"github.com/dnsd/dnsd/pipeline"
	"github.com/dnsd/dnsd/sources/kind"
)

// ErrNotSynced is a Source's failure until its first sync is done.
var ErrNotSynced = errors.New("kubernetes: not synced with the API server yet")

// Options configure a Source.
type Options struct {
	// Zones are the zone key's names (lower-case FQDNs). Reverse zones
	// (in-addr.arpa., ip6.arpa.) get PTR records; records of the other
	// zones are built under each of them. Required.
	Zones            []string
	TTL              time.Duration // 0: answers with TTL 0
	Pods             string        // PodsDisabled (default), PodsInsecure, PodsVerified
	Namespaces       []string      // none: all
	EndpointPodNames bool          // false: dashed IPs
	External         bool          // expose: external; false: cluster_ip
	Logger           *slog.Logger  // nil: discarded
	// Bulk is told of a large batch of changes applied after the first
	// sync (a re-list of the cluster): see bulkBatch. Nil: nobody is.
	Bulk kind.Bulk

	// sleep is the pacing's sleep (tests count it; nil: time.Sleep).
	sleep func(time.Duration)

	// lazyHook, for tests, runs in the first sync once the source has
	// declared itself synced and before it applies the services.
	lazyHook func()
}

// Source is one zone key's kubernetes records. It implements
// pipeline.Source and pipeline.Syncer.
type Source struct {
	b      *Backend
	pods   cache.SharedIndexInformer // b's, when pods: verified (nil otherwise)
	s      settings
	ix     *index
	logger *slog.Logger

	regs []registration

	mu    sync.Mutex
	dirty map[objKey]time.Time
	wake  chan struct{}

	informersSynced atomic.Bool
	synced          atomic.Bool
	syncedCh        chan struct{}

	// The first sync's services are applied after the source declares
	// itself synced (see firstSync): while lazy is set, pending holds
	// those not applied yet, and a lookup applies the service its name
	// belongs to first (claiming it under first). applied is closed when
	// every one is.
	lazy    atomic.Bool
	first   sync.Mutex
	pending map[objKey]struct{}
	applied chan struct{}
	// lazyHook: Options.lazyHook.
	lazyHook func()
	// bulk, sleep: Options.Bulk, Options.sleep.
	bulk  kind.Bulk
	sleep func(time.Duration)

	stop      chan struct{}
	wg        sync.WaitGroup
	closeOnce sync.Once
}

var (
	_ pipeline.Source = (*Source)(nil)
	_ pipeline.Syncer = (*Source)(nil)
)

type registration struct {
	inf cache.SharedIndexInformer
	reg cache.ResourceEventHandlerRegistration
}

type objKind uint8

const (
	kindService objKind = iota
	kindNamespace
	kindPod
)

// objKey names an object to recompute: its store key ("ns/name", or
// "name" for a namespace).
type objKey struct {
	kind objKind
	key  string
}

// NewSource starts a view of b. Close it before closing b.
func NewSource(b *Backend, opts Options) (*Source, error) {
	var pods cache.SharedIndexInformer
	s := settings{
		ttl:      pipeline.TTLSeconds(opts.TTL),
		podNames: opts.EndpointPodNames,
		external: opts.External,
		pods:     opts.Pods,
	}
	if s.pods == "" {
		s.pods = PodsDisabled
	}
	switch s.pods {
	case PodsDisabled, PodsInsecure:
	case PodsVerified:
		if opts.External {
			break
		}
		if pods = b.podInformer(); pods == nil {
			return nil, errors.New("kubernetes: the connection is closed")
		}
	default:
		return nil, fmt.Errorf("kubernetes: unknown pods mode %q", s.pods)
	}
	if s.external && s.pods != PodsDisabled {
		s.pods = PodsDisabled // pod records are cluster-internal
	}
	if len(opts.Namespaces) > 0 {
		s.namespaces = make(map[string]bool, len(opts.Namespaces))
		for _, ns := range opts.Namespaces {
			s.namespaces[strings.ToLower(ns)] = true
		}
	}
	var roots []string
	for _, z := range opts.Zones {
		z = strings.ToLower(dns.Fqdn(z))
		roots = append(roots, z)
		if pipeline.Reverse(z) {
			s.reverse = append(s.reverse, z)
		} else {
			s.zones = append(s.zones, z)
		}
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	src := &Source{
		b:        b,
		pods:     pods,
		s:        s,
		ix:       newIndex(roots, &b.serial),
		logger:   logger,
		dirty:    make(map[objKey]time.Time),
		wake:     make(chan struct{}, 1),
		syncedCh: make(chan struct{}),
		applied:  make(chan struct{}),
		lazyHook: opts.lazyHook,
		bulk:     opts.Bulk,
		sleep:    opts.sleep,
		stop:     make(chan struct{}),
	}
	src.ix.clock = b.serials
	src.ix.set("static", staticRecords(&src.s))
	src.ix.bump() // a new view (a reload) is new data
	if err := src.register(b.services, func(obj any) { src.enqueueMeta(kindService, obj) }, nil); err != nil {
		return nil, err
	}
	if err := src.register(b.slices, src.enqueueSlice, func(old, cur any) {
		src.enqueueSlice(old)
		src.enqueueSlice(cur)
	}); err != nil {
		src.Close()
		return nil, err
	}
	if err := src.register(b.ns, func(obj any) { src.enqueueMeta(kindNamespace, obj) }, nil); err != nil {
		src.Close()
		return nil, err
	}
	if s.pods == PodsVerified {
		if err := src.register(pods, func(obj any) { src.enqueueMeta(kindPod, obj) }, nil); err != nil {
			src.Close()
			return nil, err
		}
	}
	src.wg.Add(2)
	go src.run()
	go src.waitInformers()
	return src, nil
}

// register adds handlers to inf; update defaults to on(new).
func (src *Source) register(inf cache.SharedIndexInformer, on func(any), update func(old, cur any)) error {
	if update == nil {
		update = func(_, cur any) { on(cur) }
	}
	reg, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    on,
		UpdateFunc: update,
		DeleteFunc: on,
	})
	if err != nil {
		return fmt.Errorf("kubernetes: informer handler: %w", err)
	}
	src.regs = append(src.regs, registration{inf, reg})
	return nil
}

func (src *Source) enqueueMeta(kind objKind, obj any) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil || key == "" {
		return
	}
	if kind != kindNamespace {
		ns, _, _ := strings.Cut(key, "/")
		if !src.s.exposed(ns) {
			return
		}
	} else if !src.s.exposed(key) {
		return
	}
	src.enqueue(objKey{kind, key})
}

func (src *Source) enqueueSlice(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	sl, ok := obj.(*sliceObj)
	if !ok || !src.s.exposed(sl.namespace) || sl.service == "" {
		return
	}
	src.enqueueAt(objKey{kindService, sl.namespace + "/" + sl.service}, changeTime(sl))
}

// changeTime is when the change behind a slice happened: the endpoint
// slice controller's last-change-trigger-time annotation when it has a
// sane one (the pod or service change that caused the update), else now,
// the event's arrival.
func changeTime(sl *sliceObj) time.Time {
	now := time.Now()
	t := sl.changed
	if t.IsZero() || t.After(now) || now.Sub(t) > time.Hour {
		return now
	}
	return t
}

func (src *Source) enqueue(k objKey) { src.enqueueAt(k, time.Now()) }

// enqueueAt marks k dirty; at is when the change happened, for the
// programming latency (the earliest pending change of k counts).
func (src *Source) enqueueAt(k objKey, at time.Time) {
	src.mu.Lock()
	if t, ok := src.dirty[k]; !ok || at.Before(t) {
		src.dirty[k] = at
	}
	src.mu.Unlock()
	select {
	case src.wake <- struct{}{}:
	default:
	}
}

// run is the worker: it recomputes the objects marked dirty, in batches
// (events on one object in a burst are applied once). Until the informers
// have delivered their first lists it only collects: a service applied
// when the services' list arrives would be applied again when its
// EndpointSlices' list does, and the first sync is mostly that work.
func (src *Source) run() {
	defer src.wg.Done()
	for {
		select {
		case <-src.stop:
			return
		case <-src.wake:
		}
		if !src.informersSynced.Load() {
			continue
		}
		if !src.synced.Load() {
			src.firstSync()
		}
		for {
			src.mu.Lock()
			batch := src.dirty
			if len(batch) == 0 {
				src.mu.Unlock()
				break
			}
			src.dirty = make(map[objKey]time.Time)
			src.mu.Unlock()
			src.applyBatch(batch)
			src.ix.bump()
			now := time.Now()
			for _, t := range batch {
				src.b.metrics.latency.Observe(now.Sub(t).Seconds())
			}
		}
	}
}

// bulkBatch is the size from which a batch of changes is a burst of
// background work (kind.Bulk): an informer's re-list of the cluster (its
// watch expired) marks every object changed at once.
const bulkBatch = 1000

// applyBatch applies the objects of batch. On one processor it gives way
// to the queries every millisecond (see package pacing): the batch a
// re-list makes (every service of the cluster: 10,000 services with
// 100,000 endpoints take a core for a good fraction of a second) would
// otherwise hold them up for the runtime's 10 ms time slices. The first
// sync is not paced (see firstSync).
func (src *Source) applyBatch(batch map[objKey]time.Time) {
	if len(batch) >= bulkBatch {
		defer src.bulk.Begin()()
	}
	pc := pacing.New(&pacing.Pacing{Sleep: src.sleep})
	for k := range batch {
		pc.Check() // an object is a larger unit than a line: the clock each time
		src.apply(k)
	}
}

// firstSync applies what the informers' first lists hold, once every
// informer has delivered its list. Namespaces and pods are applied first;
// then the source declares itself synced and applies the services (most
// of the work: every record of every service and endpoint) afterwards,
// while it answers. A lookup in the meantime applies the service its name
// belongs to before it looks (ensure), so no answer lacks a record the
// lists hold: a cluster of 100,000 endpoints answers its first question
// a third of a second sooner than if every record were built first.
func (src *Source) firstSync() {
	src.mu.Lock()
	batch := src.dirty
	src.dirty = make(map[objKey]time.Time)
	src.mu.Unlock()
	services := make([]objKey, 0, len(batch))
	for k := range batch {
		if k.kind == kindService {
			services = append(services, k)
		} else {
			src.apply(k)
		}
	}
	src.pending = make(map[objKey]struct{}, len(services))
	for _, k := range services {
		src.pending[k] = struct{}{}
	}
	src.lazy.Store(true)
	src.ix.bump()
	src.synced.Store(true)
	close(src.syncedCh)
	if src.lazyHook != nil {
		src.lazyHook()
	}
	for _, k := range services {
		src.claim(k)
	}
	src.lazy.Store(false)
	src.ix.bump()
	close(src.applied)
	names := src.ix.count.Load()
	src.logger.Info("kubernetes source synced", "zones", src.zoneNames(), "names", names)
	if names >= releaseMin {
		// The first list leaves more garbage than the stores and the index
		// hold (every object decoded whole before strip, the worker's
		// batches), which the runtime would keep mapped: after a GC the
		// heap may grow to twice what is live before the next one. Return
		// it now, once.
		debug.FreeOSMemory()
	}
}

// releaseMin is the number of names from which a first sync returns the
// memory it used on the way to the system (TestMemoryReal shows the
// effect on RSS).
const releaseMin = 1 << 14

func (src *Source) zoneNames() string {
	return strings.Join(append(append([]string(nil), src.s.zones...), src.s.reverse...), " ")
}

// waitInformers waits for every handler registration to have received
// its initial objects, then lets the worker declare the sync.
func (src *Source) waitInformers() {
	defer src.wg.Done()
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		done := true
		for _, r := range src.regs {
			if !r.reg.HasSynced() {
				done = false
				break
			}
		}
		if done {
			src.informersSynced.Store(true)
			select {
			case src.wake <- struct{}{}:
			default:
			}
			return
		}
		select {
		case <-src.stop:
			return
		case <-t.C:
		}
	}
}

// claim applies service k if the first sync has not applied it yet.
func (src *Source) claim(k objKey) {
	src.first.Lock()
	defer src.first.Unlock()
	if _, ok := src.pending[k]; ok {
		delete(src.pending, k)
		src.apply(k)
	}
}

// ensure makes the records at name complete while the first sync applies
// services (lazy): a name below <svc>.<ns>.svc.<zone> has its service
// applied now; the names of namespaces, pods and the zones' own are
// complete already; any other (reverse names, expose: external) waits
// until every service is applied.
func (src *Source) ensure(ctx context.Context, name string) error {
	if !src.s.external {
		for _, z := range src.s.zones {
			if !pipeline.InZone(name, z) {
				continue
			}
			rel, ok := strings.CutSuffix(name[:len(name)-len(z)], "svc.")
			if !ok || (rel != "" && !strings.HasSuffix(rel, ".")) {
				return nil // not below svc.<zone>
			}
			labels := strings.Split(strings.TrimSuffix(rel, "."), ".")
			if len(labels) < 2 {
				return nil // svc.<zone>, <ns>.svc.<zone>: namespaces are applied
			}
			ns, svc := labels[len(labels)-1], labels[len(labels)-2]
			src.claim(objKey{kindService, ns + "/" + svc})
			return nil
		}
	}
	return src.waitApplied(ctx)
}

// waitApplied waits until the first sync has applied every service.
func (src *Source) waitApplied(ctx context.Context) error {
	select {
	case <-src.applied:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// apply recomputes one object's records from the informers' stores.
func (src *Source) apply(k objKey) {
	switch k.kind {
	case kindService:
		var svc *serviceObj
		var slices []*sliceObj
		if obj, ok, _ := src.b.services.GetIndexer().GetByKey(k.key); ok {
			svc, _ = obj.(*serviceObj)
		}
		if svc != nil {
			objs, _ := src.b.slices.GetIndexer().ByIndex(byServiceIndex, k.key)
			slices = make([]*sliceObj, 0, len(objs))
			for _, o := range objs {
				if sl, ok := o.(*sliceObj); ok {
					slices = append(slices, sl)
				}
			}
		}
		src.ix.set("s/"+k.key, serviceRecords(&src.s, svc, slices))
	case kindNamespace:
		var ns *corev1.Namespace
		if obj, ok, _ := src.b.ns.GetIndexer().GetByKey(k.key); ok {
			ns, _ = obj.(*corev1.Namespace)
		}
		src.ix.set("n/"+k.key, namespaceRecords(&src.s, ns))
	case kindPod:
		var p *corev1.Pod
		if obj, ok, _ := src.pods.GetIndexer().GetByKey(k.key); ok {
			p, _ = obj.(*corev1.Pod)
		}
		src.ix.set("p/"+k.key, podRecords(&src.s, p))
	}
}

// Kind is "kubernetes".
func (src *Source) Kind() string { return "kubernetes" }

// TTL is the records' TTL in seconds.
func (src *Source) TTL() uint32 { return src.s.ttl }

// Serial increases with every applied batch of changes. It is the
// backend's, so a source rebuilt by a reload over the same connection
// never goes back.
func (src *Source) Serial() uint32 { return src.ix.serial.Load() }

// Synced reports whether the first full sync is done and no informer is
// listing again after the API server refused its resource version (its
// resource versions went back); meanwhile the source answers from what
// it holds, and /ready says why.
func (src *Source) Synced() bool { return src.synced.Load() && src.b.Rereading() == "" }

// Endpoint names the API server behind the source.
func (src *Source) Endpoint() string { return src.b.Endpoint() }

// Problem is why the source's backend cannot use the API server right
// now, "" when it can (see Backend.Problem).
func (src *Source) Problem() string { return src.b.Problem() }

// WaitSynced blocks until the first sync is done or ctx ends.
func (src *Source) WaitSynced(ctx context.Context) error {
	select {
	case <-src.syncedCh:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Lookup returns the records at q.Name: Failed until the first sync,
// then Found (records, or none for a name that exists without records)
// or NotMine. A hit does not allocate, except for pods: insecure names,
// which are synthesized.
func (src *Source) Lookup(ctx context.Context, q *pipeline.Question) pipeline.Result {
	if !src.synced.Load() {
		return pipeline.Result{Status: pipeline.Failed, Err: ErrNotSynced}
	}
	if src.lazy.Load() {
		if err := src.ensure(ctx, q.Name); err != nil {
			return pipeline.Result{Status: pipeline.Failed, Err: err}
		}
	}
	if rrs, ok := src.ix.lookup(q.Name); ok {
		return pipeline.Result{Status: pipeline.Found, RRs: rrs}
	}
	if src.s.pods == PodsInsecure {
		if rr := src.insecurePod(q.Name, q.Zone); rr != nil {
			return pipeline.Result{Status: pipeline.Found, RRs: []dns.RR{rr}}
		}
	}
	return pipeline.Result{Status: pipeline.NotMine}
}

// insecurePod answers a-b-c-d.<ns>.pod.<zone> (pods: insecure) with the
// address the name spells, for an existing, exposed namespace.
func (src *Source) insecurePod(name, zone string) dns.RR {
	a, ok := podName(name, zone)
	if !ok {
		return nil
	}
	dot := strings.IndexByte(name, '.')
	if _, exists := src.ix.lookup(name[dot+1:]); !exists { // <ns>.pod.<zone>
		return nil
	}
	hdr := dns.RR_Header{Name: name, Class: dns.ClassINET, Ttl: src.s.ttl}
	if a.Is4() {
		hdr.Rrtype = dns.TypeA
		v := a.As4()
		return &dns.A{Hdr: hdr, A: v[:]}
	}
	hdr.Rrtype = dns.TypeAAAA
	v := a.As16()
	return &dns.AAAA{Hdr: hdr, AAAA: v[:]}
}

// podName parses "<dashed-ip>.<ns>.pod.<zone>".
func podName(name, zone string) (netip.Addr, bool) {
	if zone == "" || !strings.HasSuffix(name, ".pod."+zone) {
		return netip.Addr{}, false
	}
	rel := name[:len(name)-len(".pod."+zone)] // <dashed-ip>.<ns>
	label, ns, ok := strings.Cut(rel, ".")
	if !ok || ns == "" || strings.IndexByte(ns, '.') >= 0 {
		return netip.Addr{}, false
	}
	return undash(label)
}

// Close unregisters the source's handlers and stops its worker. The
// backend keeps running. Idempotent.
func (src *Source) Close() error {
	src.closeOnce.Do(func() {
		for _, r := range src.regs {
			_ = r.inf.RemoveEventHandler(r.reg)
		}
		close(src.stop)
		src.wg.Wait()
	})
	return nil
}

var _ pipeline.Lister = (*Source)(nil)

// List yields every record of the index at names in zone, for zone
// transfers: services, endpoints, SRV, PTR, dns-version and, in pods:
// verified mode only, pods (pods: insecure answers any dashed address and
// has nothing to list). It fails until the first sync.
func (src *Source) List(zone string, yield func(dns.RR) bool) error {
	if !src.synced.Load() {
		return ErrNotSynced
	}
	<-src.applied
	src.ix.each(func(name string, e *entry) bool {
		if !pipeline.InZone(name, zone) {
			return true
		}
		p := e.rrs.Load()
		if p == nil {
			return true
		}
		for _, rr := range *p {
			if !yield(rr) {
				return false
			}
		}
		return true
	})
	return nil
}
