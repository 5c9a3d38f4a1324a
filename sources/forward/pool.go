package forward

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
	"golang.org/x/sync/singleflight"

	"github.com/dnsd/dnsd/internal/fsutil"
	"github.com/dnsd/dnsd/pipeline"
)

// Policies: the order in which a query tries the upstreams.
const (
	PolicyRandom     = "random"
	PolicyRoundRobin = "round_robin"
	PolicySequential = "sequential"
)

// PoolOptions are everything a pool's behaviour depends on.
type PoolOptions struct {
	Upstreams []Upstream // required, at least one
	TLSCA     string     // PEM bundle for tls upstreams ("" = system roots)
	// TLSCASum identifies TLSCA's content when the pool is made (CASum),
	// so that a reload after the file was rewritten makes a pool that
	// reads it again. "": no TLSCA.
	TLSCASum      string
	Policy        string        // random (default) | round_robin | sequential
	Timeout       time.Duration // per attempt; required, > 0
	HealthCheck   time.Duration // required, > 0
	MaxFails      int           // required, >= 1
	MaxConcurrent int           // required, >= 1
	UDPSize       uint16        // EDNS0 buffer size advertised upstream; below 512 (0): 1232
}

// Key identifies a pool: sources whose options are equal share one.
func (o PoolOptions) Key() string {
	var b strings.Builder
	b.WriteString("upstreams=")
	for i, u := range o.Upstreams {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(u.String())
	}
	fmt.Fprintf(&b, " tls_ca=%s tls_ca_sum=%s policy=%s timeout=%s health_check=%s max_fails=%d max_concurrent=%d udp_buffer=%d",
		o.TLSCA, o.TLSCASum, o.Policy, o.Timeout, o.HealthCheck, o.MaxFails, o.MaxConcurrent, o.UDPSize)
	return b.String()
}

// answersKey names what a pool's answers depend on: its upstreams and
// the CA they are verified with. The cache keeps answers apart by it.
func (o PoolOptions) answersKey() string {
	var b strings.Builder
	for i, u := range o.Upstreams {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(u.String())
	}
	b.WriteString(" tls_ca=")
	b.WriteString(o.TLSCA)
	return b.String()
}

// Connection pooling for TCP and TLS upstreams.
var (
	// idleExpiry: an idle connection older than this is closed rather
	// than reused (servers close idle DNS connections after 10-30 s).
	idleExpiry = 10 * time.Second
	// maxIdle bounds the idle connections kept per upstream.
	maxIdle = 32
)

var (
	errTooMany   = errors.New("max_concurrent forwards in flight")
	errLoop      = errors.New("every upstream is a forwarding loop")
	errMalformed = errors.New("malformed response")
)

// Pool is a health-checked set of upstreams with their connections. It is
// a registry backend: shared by every forward source with the same
// options, across zones and reloads. Safe for concurrent use.
type Pool struct {
	opts PoolOptions
	// answers is the Upstreams of this pool's cache keys: the cache's
	// number for opts.answersKey(), set by the kind when it makes the pool.
	answers uint32
	ups     []*upstream
	log     *slog.Logger
	met     *Metrics

	rr       atomic.Uint32
	inflight atomic.Int64
	// recoveries counts upstreams coming back up: a stale entry whose
	// refresh failed before the last recovery is refreshed at once
	// instead of after the failure recheck window.
	recoveries atomic.Uint64
	// group coalesces identical queries in flight (cache misses and
	// prefetches) into one upstream exchange.
	group singleflight.Group

	ctx    context.Context // canceled by Close
	cancel context.CancelFunc
	goMu   sync.Mutex // guards closed and wg.Add against Close
	closed bool
	wg     sync.WaitGroup

	loopMu    sync.Mutex
	loopZones map[string]bool // zones with a loop check running
	probes    *LoopProbes
}

// CASum identifies the content of the CA file at path ("" when it
// cannot be read: loading it then fails as it would).
func CASum(path string) string {
	b, err := fsutil.ReadSmall(path)
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// LoadCA reads a PEM bundle into a certificate pool.
func LoadCA(path string) (*x509.CertPool, error) {
	b, err := fsutil.ReadSmall(path)
	if err != nil {
		return nil, err
	}
	cp := x509.NewCertPool()
	if !cp.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("%s: no PEM certificate", path)
	}
	return cp, nil
}

// NewPool starts a pool (no network traffic until the first query). met,
// probes and log may be nil (probes nil: a set of the pool's own).
func NewPool(o PoolOptions, met *Metrics, probes *LoopProbes, log *slog.Logger) (*Pool, error) {
	if len(o.Upstreams) == 0 {
		return nil, errors.New("no upstreams")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if met == nil {
		met = NewMetrics(nil, nil)
	}
	if probes == nil {
		probes = NewLoopProbes()
	}
	if o.Policy == "" {
		o.Policy = PolicyRandom
	}
	if o.Timeout <= 0 {
		o.Timeout = 2 * time.Second
	}
	if o.HealthCheck <= 0 {
		o.HealthCheck = 500 * time.Millisecond
	}
	o.MaxFails = max(o.MaxFails, 1)
	if o.MaxConcurrent <= 0 {
		o.MaxConcurrent = 1000
	}
	if o.UDPSize < dns.MinMsgSize {
		o.UDPSize = 1232
	}
	var roots *x509.CertPool
	if o.TLSCA != "" {
		var err error
		if roots, err = LoadCA(o.TLSCA); err != nil {
			return nil, fmt.Errorf("tls_ca: %w", err)
		}
	}
	p := &Pool{opts: o, log: log, met: met, probes: probes, loopZones: map[string]bool{}}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	sessions := tls.NewLRUClientSessionCache(64)
	for _, u := range o.Upstreams {
		up := &upstream{Upstream: u, pool: p, label: u.String()}
		up.requests = met.requests.MustCurryWith(map[string]string{"upstream": up.label})
		up.latency = met.latency.WithLabelValues(up.label)
		if u.Proto == "tls" || u.Proto == "https" {
			host, _, err := net.SplitHostPort(u.Addr)
			if err != nil {
				return nil, fmt.Errorf("upstream %s: %w", u, err)
			}
			name := u.ServerName
			if name == "" {
				name = host // verified against the certificate's IP SANs
			}
			up.tls = &tls.Config{ServerName: name, RootCAs: roots, MinVersion: tls.VersionTLS12, ClientSessionCache: sessions}
		}
		if u.Proto == "https" {
			up.doh = newDoHClient(up)
		}
		p.ups = append(p.ups, up)
	}
	met.addPool(p)
	p.spawn(p.janitor)
	return p, nil
}

// spawn runs f in a goroutine that Close waits for; false (f not run)
// once the pool is closed.
func (p *Pool) spawn(f func()) bool {
	p.goMu.Lock()
	defer p.goMu.Unlock()
	if p.closed {
		return false
	}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		f()
	}()
	return true
}

// Close stops health checks and probes and closes idle connections.
func (p *Pool) Close() error {
	p.goMu.Lock()
	p.closed = true
	p.cancel()
	p.goMu.Unlock()
	p.wg.Wait()
	for _, u := range p.ups {
		u.closeIdle(true)
	}
	p.met.removePool(p)
	return nil
}

// Upstreams returns the pool's upstreams, in configuration order.
func (p *Pool) Upstreams() []Upstream {
	out := make([]Upstream, len(p.ups))
	for i, u := range p.ups {
		out[i] = u.Upstream
	}
	return out
}

// Up reports, per upstream in configuration order, whether it is usable.
func (p *Pool) Up() []bool {
	out := make([]bool, len(p.ups))
	for i, u := range p.ups {
		out[i] = u.usable()
	}
	return out
}

// acquire takes one of max_concurrent slots; false when all are taken.
func (p *Pool) acquire() bool {
	if p.inflight.Add(1) > int64(p.opts.MaxConcurrent) {
		p.inflight.Add(-1)
		return false
	}
	return true
}

func (p *Pool) release() { p.inflight.Add(-1) }

// Exchange asks the upstreams for k in policy order, skipping those marked
// down, and returns the first response that is not SERVFAIL or REFUSED.
// A timeout, a network error, SERVFAIL or REFUSED moves on to the next
// upstream; only timeouts and errors count against max_fails. With every
// upstream down, one is tried anyway (the policy's first). The response's
// OPT record is removed.
func (p *Pool) Exchange(ctx context.Context, k Key) (*dns.Msg, error) {
	wire, err := packQuery(k, p.opts.UDPSize)
	if err != nil {
		return nil, err
	}
	var buf [16]*upstream
	order := p.order(buf[:0])
	if len(order) == 0 {
		return nil, errLoop
	}
	var errs []error
	var theirs pipeline.UpstreamEDEs // why upstreams answered SERVFAIL or REFUSED
	var plain []byte                 // the query without EDNS0, packed when first needed
	for _, u := range order {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		m, err := u.exchange(ctx, wire, k)
		if err == nil && m.Rcode == dns.RcodeFormatError && m.IsEdns0() == nil {
			// An upstream that does not speak EDNS0 answers FORMERR
			// without an OPT: ask it again without one (RFC 6891 §7).
			if plain == nil {
				if plain, err = packQuery(k, 0); err != nil {
					return nil, err
				}
			}
			m, err = u.exchange(ctx, plain, k)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", u.label, err))
			continue
		}
		if m.Rcode == dns.RcodeServerFailure || m.Rcode == dns.RcodeRefused {
			errs = append(errs, fmt.Errorf("%s: %s", u.label, dns.RcodeToString[m.Rcode]))
			if opt := m.IsEdns0(); opt != nil {
				for _, o := range opt.Option {
					if x, ok := o.(*dns.EDNS0_EDE); ok && len(theirs) < maxUpstreamEDEs && !slices.ContainsFunc(theirs, func(y *dns.EDNS0_EDE) bool { return *x == *y }) {
						theirs = append(theirs, x)
					}
				}
			}
			continue
		}
		stripOPT(m)
		return m, nil
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if len(theirs) > 0 {
		errs = append(errs, theirs)
	}
	return nil, fmt.Errorf("%w: every upstream failed: %w", pipeline.ErrUnreachable, errors.Join(errs...))
}

// maxUpstreamEDEs bounds the upstreams' Extended DNS Errors a failure
// passes on (distinct ones; their text is the upstreams', bounded by
// their message size).
const maxUpstreamEDEs = 4

// order returns the upstreams to try, in policy order: the usable ones,
// or when none is, the first one that is not a loop.
func (p *Pool) order(buf []*upstream) []*upstream {
	n := len(p.ups)
	buf = append(buf, p.ups...)
	switch p.opts.Policy {
	case PolicyRoundRobin:
		start := int(p.rr.Add(1)-1) % n
		buf = append(buf[start:], buf[:start]...)
	case PolicySequential:
	default: // random
		for i := n - 1; i > 0; i-- {
			j := rand.IntN(i + 1)
			buf[i], buf[j] = buf[j], buf[i]
		}
	}
	var fallback *upstream
	out := buf[:0]
	for _, u := range buf {
		if u.looping.Load() {
			continue
		}
		if fallback == nil {
			fallback = u
		}
		if !u.down.Load() {
			out = append(out, u)
		}
	}
	if len(out) == 0 && fallback != nil {
		out = append(out, fallback)
	}
	return out
}

// packQuery builds the upstream query for k: RD=1, CD as the client's,
// EDNS0 with our buffer size and the client's DO bit (udpSize 0: no EDNS0,
// for upstreams that reject it). The ID (first two bytes) is set per
// attempt.
func packQuery(k Key, udpSize uint16) ([]byte, error) {
	m := &dns.Msg{MsgHdr: dns.MsgHdr{RecursionDesired: true, CheckingDisabled: k.CD}}
	m.Question = []dns.Question{{Name: k.Name, Qtype: k.Type, Qclass: dns.ClassINET}}
	if udpSize == 0 {
		return m.Pack()
	}
	opt := &dns.OPT{Hdr: dns.RR_Header{Name: ".", Rrtype: dns.TypeOPT, Class: udpSize}}
	if k.DO {
		opt.SetDo()
	}
	m.Extra = []dns.RR{opt}
	return m.Pack()
}

// stripOPT removes the upstream's OPT record (the server adds its own),
// keeping only its Extended DNS Errors, which the server passes on to
// clients that speak EDNS0.
func stripOPT(m *dns.Msg) {
	for i, rr := range m.Extra {
		opt, ok := rr.(*dns.OPT)
		if !ok {
			continue
		}
		var ede []dns.EDNS0
		for _, o := range opt.Option {
			if o.Option() == dns.EDNS0EDE {
				ede = append(ede, o)
			}
		}
		if len(ede) == 0 {
			m.Extra = append(m.Extra[:i:i], m.Extra[i+1:]...)
			return
		}
		m.Extra[i] = &dns.OPT{Hdr: dns.RR_Header{Name: ".", Rrtype: dns.TypeOPT}, Option: ede}
		return
	}
}

// janitor closes expired idle connections.
func (p *Pool) janitor() {
	t := time.NewTicker(idleExpiry / 2)
	defer t.Stop()
	for {
		select {
		case <-p.ctx.Done():
			return
		case <-t.C:
			for _, u := range p.ups {
				u.closeIdle(false)
			}
		}
	}
}

// Loop detection. CheckLoop sends each upstream one query for a random
// name under the zone (dnsd-loop-<hex>.<zone>); a forward source that is
// asked that very name (Source.Lookup) knows the query came back to this
// process, so that upstream forwards to dnsd: it is marked looping and no
// longer used, until a later check finds the loop gone.

const loopPrefix = "dnsd-loop-"

// loopGrace: how long a probe name stays known after its check ended (a
// looping query may come back late).
const loopGrace = time.Second

// probeState is one loop probe in flight.
type probeState struct {
	u    *upstream
	back atomic.Bool // the probe came back to dnsd
}

// LoopProbes is the set of loop probes in flight. One set is shared by
// every pool of the process (the forward Kind owns it): a probe sent by
// one pool may come back through any forward source.
type LoopProbes struct {
	m sync.Map // name -> *probeState
	n atomic.Int64
}

// NewLoopProbes returns an empty set.
func NewLoopProbes() *LoopProbes { return &LoopProbes{} }

func (l *LoopProbes) register(name string, ps *probeState) {
	l.m.Store(name, ps)
	l.n.Add(1)
}

func (l *LoopProbes) unregister(name string) {
	if _, ok := l.m.LoadAndDelete(name); ok {
		l.n.Add(-1)
	}
}

// find returns the probe named name, or nil when name is not one of ours.
func (l *LoopProbes) find(name string) *probeState {
	if l.n.Load() == 0 || !strings.HasPrefix(name, loopPrefix) {
		return nil
	}
	if v, ok := l.m.Load(name); ok {
		return v.(*probeState)
	}
	return nil
}

// CheckLoop probes every upstream for a forwarding loop through zone; dnsd
// calls it after every start and reload (a check of the zone still
// running makes it a no-op). It runs in the background, starts 100 ms
// late and retries a probe that got no answer, SERVFAIL or REFUSED twice,
// a second apart (at start dnsd may not listen yet; a relay in front of
// it may answer SERVFAIL). An upstream marked looping whose new probe is
// answered (NOERROR, NXDOMAIN) without coming back is used again.
func (p *Pool) CheckLoop(zone string) {
	p.loopMu.Lock()
	if p.loopZones[zone] || p.ctx.Err() != nil {
		p.loopMu.Unlock()
		return
	}
	p.loopZones[zone] = true
	p.loopMu.Unlock()
	suffix := zone
	if zone == "." {
		suffix = ""
	}
	names := make([]string, len(p.ups))
	probes := make([]*probeState, len(p.ups))
	for i, u := range p.ups {
		names[i] = loopPrefix + strconv.FormatUint(rand.Uint64(), 16) + "." + suffix
		probes[i] = &probeState{u: u}
		p.probes.register(names[i], probes[i])
	}
	done := func() {
		for _, name := range names {
			p.probes.unregister(name)
		}
		p.loopMu.Lock()
		delete(p.loopZones, zone)
		p.loopMu.Unlock()
	}
	wait := func(d time.Duration) bool {
		select {
		case <-p.ctx.Done():
			return false
		case <-time.After(d):
			return true
		}
	}
	ok := p.spawn(func() {
		defer done()
		if !wait(100 * time.Millisecond) {
			return
		}
		for i, pr := range probes {
			k := Key{Name: names[i], Type: dns.TypeHINFO}
			wire, err := packQuery(k, p.opts.UDPSize)
			if err != nil {
				continue
			}
			for try := 0; try < 3 && !pr.back.Load(); try++ {
				if try > 0 && !wait(time.Second) {
					return
				}
				m, err := pr.u.attempt(p.ctx, wire, k)
				if err == nil && m.Rcode != dns.RcodeServerFailure && m.Rcode != dns.RcodeRefused {
					if !pr.back.Load() && pr.u.looping.CompareAndSwap(true, false) {
						p.log.Warn("no forwarding loop through this upstream any more; using it again", "upstream", pr.u.label)
					}
					break
				}
			}
		}
		wait(loopGrace)
	})
	if !ok {
		done()
	}
}
