package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/miekg/dns"

	"github.com/dnsd/dnsd/authority"
	"github.com/dnsd/dnsd/config"
	"github.com/dnsd/dnsd/pipeline"
)

// Observer receives one Observation per query (metrics, query log) and
// the server's other events. It is called synchronously on the serving
// goroutine and must be cheap and safe for concurrent use.
type Observer interface {
	Observe(o Observation)
	// TCPRejected: a TCP or TLS connection was closed at once, because
	// max_tcp_connections ("total") or max_tcp_per_client ("client") was
	// reached.
	TCPRejected(reason string)
	// Transfer: a zone transfer (AXFR, IXFR) ended with result (one of
	// TransferSuccess, TransferRefused, TransferNotAuth, TransferError);
	// zone is the configured zone asked for, "" when it is not listed.
	Transfer(zone, result string)
	// Update: an UPDATE was answered with result (one of authority's
	// Update* results); zone is the zone it named when dnsd serves it,
	// else "". changed: the zone changed; d is the time to the answer.
	Update(zone, result string, changed bool, d time.Duration)
}

// Drop reasons of an Observation.
const (
	DropACL       = "acl"       // refused client, acl.drop set
	DropRate      = "rate"      // over rate_per_client, limits.rate_drop set
	DropMalformed = "malformed" // unparseable packet, or a message that is not a query
)

// Observation describes one handled query.
type Observation struct {
	Proto    string        // "udp", "tcp", "tls" or "https"; never ""
	Client   netip.Addr    // client address (IPv4-mapped addresses unmapped, zone removed); always set
	Name     string        // question name in lower case; "" when the message had not exactly one question
	Qtype    uint16        // question type; 0 when Name is ""
	Zone     string        // matched zone, "" when the pipeline was not asked or matched none
	View     string        // the view the client matched, "" for none (the default zones)
	Source   string        // kind of the answering source, "" when none
	Rcode    int           // rcode sent (0 is NOERROR); -1 when nothing was sent (Dropped)
	Duration time.Duration // from read to answer; 0 for a packet dropped unparsed
	// Dropped: no response was sent; DropReason says why (DropACL,
	// DropRate or DropMalformed). Default false: a response was sent.
	Dropped    bool
	DropReason string // "" unless Dropped
	// Panicked: answering the query panicked; the client got SERVFAIL
	// (or nothing when the query could not be parsed). Default false.
	Panicked bool
	// Truncated: the response had TC=1 (too large for the client's UDP
	// size, or the client is over its rate limit). Default false.
	Truncated bool
}

// Settings are the server's part of a generation (see Generation): what
// it applies to every query besides the resolver's answer.
type Settings struct {
	// ACL says who may query; the zero ACL admits nobody (config's
	// default has Default true).
	ACL config.ACL
	// Limits: a zero limit takes its default (the default* constants
	// below); RatePerClient 0 is no rate limit, UDPRcvBuf 0 the kernel's
	// buffer size.
	Limits config.Limits
	TLS    *tls.Config // nil: none; required when a tls:// or https:// listener is configured
	// Rotate: each response rotates its runs of A and AAAA records (same
	// owner) one step further than the last response. Default false:
	// records in the order the source holds them.
	Rotate bool
}

// Options are a Server's fixed dependencies.
type Options struct {
	// Resolver answers until the first Commit (Apply keeps the one in
	// place); nil when the caller commits its own (Prepare, Commit)
	// before it listens.
	Resolver pipeline.Resolver
	// Authority answers zone transfers and holds the TSIG keys of signed
	// queries, as Resolver until the first Commit; nil: transfers are
	// REFUSED, signed queries BADKEY.
	Authority authority.Transferer
	Observer  Observer     // nil: queries are not observed
	Logger    *slog.Logger // nil: discard
}

// Generation is one configuration as the server serves it: the resolver
// (the pipeline: zones and views, and whatever its caller keeps with
// it), the authority (transfers, TSIG keys) and the compiled settings
// (ACL, limits, TLS, rotation). The server holds exactly one; Commit
// replaces it with one atomic store. A query reads it once, as it
// arrives, and is answered by that generation's resolver under that
// generation's settings.
type Generation struct {
	res   pipeline.Resolver
	auth  authority.Transferer // nil: no transfers, no TSIG keys
	fresh pipeline.Freshness   // res, when it stamps answers: then they are kept
	set   *settings
}

func newGeneration(res pipeline.Resolver, auth authority.Transferer, st *settings) *Generation {
	g := &Generation{res: res, auth: auth, set: st}
	g.fresh, _ = res.(pipeline.Freshness)
	return g
}

// Resolver is the resolver the generation was committed with.
func (g *Generation) Resolver() pipeline.Resolver { return g.res }

// current holds the Server's generation: Commit's store, every query's
// load.
type current struct{ p atomic.Pointer[Generation] }

func (c *current) gen() *Generation { return c.p.Load() }

// Load returns the settings of the generation in place.
func (c *current) Load() *settings { return c.p.Load().set }

// authorities is what zone transfers and signed queries ask (xfr.go):
// the authority of the generation in place; one without any refuses
// every transfer and knows no key.
type authorities struct{ c *current }

func (a authorities) Transfer(ctx context.Context, req *authority.Request) authority.Result {
	if x := a.c.gen().auth; x != nil {
		return x.Transfer(ctx, req)
	}
	return authority.Result{Rcode: dns.RcodeRefused}
}

func (a authorities) TransferZone(name string) string {
	if x := a.c.gen().auth; x != nil {
		return x.TransferZone(name)
	}
	return ""
}

func (a authorities) TSIGKey(name string) *authority.TSIGKey {
	if x := a.c.gen().auth; x != nil {
		return x.TSIGKey(name)
	}
	return nil
}

// Defaults applied when a Settings field is zero (config normally sets them).
const (
	defaultUDPBuffer = 1232
	defaultMaxTCP    = 1000
	defaultMaxPer    = 64
	defaultPipeline  = 16
	defaultIdle      = 10 * time.Second
	defaultXfrs      = 10
)

// settings is the compiled, immutable form of Settings.
type settings struct {
	acl       acl
	udpBuffer int
	maxTCP    int
	maxPer    int
	pipeline  int
	rcvbuf    int
	idle      time.Duration
	rate      int
	rateDrop  bool
	rotate    bool
	tls       *tls.Config
	maxXfrs   int // limits.max_transfers
}

func compile(set Settings) *settings {
	st := &settings{
		acl:       newACL(set.ACL),
		udpBuffer: int(set.Limits.UDPBuffer),
		maxTCP:    set.Limits.MaxTCPConnections,
		maxPer:    set.Limits.MaxTCPPerClient,
		pipeline:  set.Limits.MaxTCPPipeline,
		rcvbuf:    set.Limits.UDPRcvBuf,
		idle:      set.Limits.TCPIdleTimeout,
		rate:      set.Limits.RatePerClient,
		rateDrop:  set.Limits.RateDrop,
		rotate:    set.Rotate,
		maxXfrs:   set.Limits.MaxTransfers,
		tls:       dotTLS(set.TLS),
	}
	if st.udpBuffer == 0 {
		st.udpBuffer = defaultUDPBuffer
	}
	if st.udpBuffer < 512 {
		st.udpBuffer = 512
	}
	if st.maxTCP <= 0 {
		st.maxTCP = defaultMaxTCP
	}
	if st.maxPer <= 0 {
		st.maxPer = defaultMaxPer
	}
	if st.pipeline <= 0 {
		st.pipeline = defaultPipeline
	}
	if st.idle <= 0 {
		st.idle = defaultIdle
	}
	if st.rate < 0 {
		st.rate = 0
	}
	if st.maxXfrs <= 0 {
		st.maxXfrs = defaultXfrs
	}
	return st
}

// Server serves DNS on a changing set of listen addresses. Create it with
// New, bind with Apply (or Prepare and Commit), stop with Shutdown.
type Server struct {
	// auth: see authorities. Queries are resolved by their generation's
	// resolver (set).
	auth     authority.Transferer
	answers  *answerCache // nil: answers are never kept
	names    *nameTable
	observer Observer
	log      *slog.Logger

	set     current // the generation in place
	limiter *limiter
	panics  panicLog
	rotors  *rotors // answer rotation: a step per name and type answered
	faults  faults
	tcpPer  tcpClients
	watch   answerWatch // relieves TCP readers and takes over UDP batches stuck on an answer
	xfrs    transfers   // zone transfers being sent (xfr.go)

	// ctx is handed to the Resolver; it is cancelled when Shutdown gives
	// up waiting (or has finished).
	ctx    context.Context
	cancel context.CancelFunc

	// mu serializes changes (from Prepare to its Commit or Abort) and
	// Shutdown; it guards units, order, closed.
	mu     sync.Mutex
	units  map[unitKey]*unit
	order  []unitKey
	closed bool

	stopping atomic.Bool    // Shutdown has begun
	loops    sync.WaitGroup // socket reader and accept goroutines
	handlers sync.WaitGroup // in-flight UDP queries and TCP connections
	workers  sync.WaitGroup // UDP worker goroutines and the TCP watchdog
	nworkers atomic.Int64
	done     chan struct{} // closed at the end of Shutdown: idle workers exit
	udpq     chan *udpJob  // hand-off from UDP readers to idle workers
	tcpConns atomic.Int64

	jobs      sync.Pool // *udpJob
	packs     sync.Pool // *[]byte pack buffers
	batches   sync.Pool // *udpBatch (Linux)
	scratches sync.Pool // *scratch (DNS over HTTPS requests, TCP and TLS readers)
	wbufs     sync.Pool // *[]byte, answers a TCP or TLS reader holds until it writes them
}

// New returns a Server that is not listening yet. Until the first Commit
// (or Apply) it uses the default settings (safe ACL default, default
// limits) and opts.Resolver.
func New(opts Options) *Server {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{
		answers:  newAnswerCache(),
		names:    newNameTable(),
		observer: opts.Observer,
		log:      log,
		limiter:  newLimiter(),
		rotors:   &rotors{seed: maphash.MakeSeed()},
		faults:   newFaults(),
		ctx:      ctx,
		cancel:   cancel,
		units:    make(map[unitKey]*unit),
		done:     make(chan struct{}),
		udpq:     make(chan *udpJob),
	}
	s.auth = authorities{&s.set}
	s.xfrs.init()
	s.jobs.New = func() any { return new(udpJob) }
	s.batches.New = newBatchAny
	s.scratches.New = func() any { return new(scratch) }
	s.wbufs.New = func() any {
		b := make([]byte, 0, tcpReadSize)
		return &b
	}
	s.packs.New = func() any {
		b := make([]byte, packBufSize)
		return &b
	}
	s.set.p.Store(newGeneration(opts.Resolver, opts.Authority, compile(Settings{ACL: config.ACL{Default: true}})))
	return s
}

// where is the config position of a listen entry as an error's prefix
// ("dnsd.yaml:3:9: "), "" when it has none.
func where(l config.Listen) string {
	if l.Pos.File == "" {
		return ""
	}
	return l.Pos.String() + ": "
}

// Change is a prepared change of listeners and settings (Prepare), to be
// committed or aborted.
type Change struct {
	set   *settings
	want  map[unitKey]bool
	order []unitKey
	bound []*unit // bound by Prepare, not serving until Commit
	// freed: units being removed that Prepare closed early, because a
	// new address needs their port (127.0.0.1:53 → 0.0.0.0:53); Abort
	// binds them again.
	freed []*unit
	done  bool
}

// Apply makes the server listen on exactly the given entries with the
// given settings, answering with the resolver in place: Prepare, then
// Commit. On error the server is unchanged (sockets and settings). Apply
// is used at start and on every reload of callers that keep one
// resolver.
func (s *Server) Apply(ctx context.Context, listen []config.Listen, set Settings) error {
	c, err := s.Prepare(ctx, listen, set)
	if err != nil {
		return err
	}
	g := s.set.gen()
	s.Commit(c, g.res, g.auth)
	return nil
}

// Prepare checks listen and set and binds the entries that are not bound
// yet (same proto and address as written are kept). Nothing is answered
// on the new sockets, and nothing the server answers changes, until
// Commit; the one exception is a socket of a removed entry that holds a
// port a new entry needs, which is closed now. If any bind fails,
// everything bound by this call is closed, the sockets closed for their
// port are bound again, and an error is returned: the server is then
// unchanged. After a Prepare that succeeded, exactly one Commit or Abort
// must follow: the server takes no other change (nor Shutdown) until
// then.
func (s *Server) Prepare(ctx context.Context, listen []config.Listen, set Settings) (*Change, error) {
	s.mu.Lock()
	c, err := s.prepare(ctx, listen, set)
	if err != nil {
		s.mu.Unlock()
		return nil, err
	}
	return c, nil
}

func (s *Server) prepare(ctx context.Context, listen []config.Listen, set Settings) (*Change, error) {
	if s.closed {
		return nil, errors.New("server: apply after shutdown")
	}
	for _, l := range listen {
		if (l.Proto == "tls" || l.Proto == "https") && set.TLS == nil {
			return nil, fmt.Errorf("%slisten %s: tls listener needs a TLS certificate (tls:)", where(l), l)
		}
		switch l.Proto {
		case "", "udp", "tcp", "tls", "https":
		default:
			return nil, fmt.Errorf("%slisten %s: unknown protocol %q", where(l), l, l.Proto)
		}
	}

	c := &Change{want: make(map[unitKey]bool)}
	for _, l := range listen {
		for _, k := range unitKeys(l) {
			c.want[k] = true
		}
	}
	seen := make(map[unitKey]bool)
	for _, l := range listen {
		keys := unitKeys(l)
		var missing []unitKey
		for _, k := range keys {
			if seen[k] {
				continue
			}
			seen[k] = true
			c.order = append(c.order, k)
			if s.units[k] == nil {
				missing = append(missing, k)
			}
		}
		if len(missing) == 0 {
			continue
		}
		us, err := bindUnits(ctx, l.Addr, missing, !s.holdsUDPPort(missing, c.bound))
		if errors.Is(err, syscall.EADDRINUSE) {
			if f := s.freePorts(missing, c.want); len(f) > 0 {
				c.freed = append(c.freed, f...)
				us, err = bindUnits(ctx, l.Addr, missing, !s.holdsUDPPort(missing, c.bound))
			}
		}
		if err != nil {
			s.undo(ctx, c)
			return nil, fmt.Errorf("%slisten %s: %w%s", where(l), l, err, bindHint(l.Addr, err))
		}
		c.bound = append(c.bound, us...)
	}
	c.set = compile(set)
	return c, nil
}

// bindHint is what a bind error on addr adds for the operator: for a
// port below 1024 refused with EACCES, the capability it takes and the
// ways to have it.
func bindHint(addr string, err error) string {
	if !errors.Is(err, syscall.EACCES) {
		return ""
	}
	_, port, perr := net.SplitHostPort(addr)
	if perr != nil {
		return ""
	}
	if n, perr := strconv.Atoi(port); perr != nil || n >= 1024 {
		return ""
	}
	return " (ports below 1024 need CAP_NET_BIND_SERVICE: run dnsd as root, from the packaged " +
		"dnsd.service, which grants it (AmbientCapabilities=CAP_NET_BIND_SERVICE), or after " +
		"setcap cap_net_bind_service=+ep on the binary)"
}

// undo closes what c bound and binds again what it freed. s.mu is held.
func (s *Server) undo(ctx context.Context, c *Change) {
	for _, u := range c.bound {
		u.closeSockets()
	}
	s.rebind(ctx, c.freed)
}

// Abort undoes a prepared change: the server is as it was before Prepare
// (the sockets it closed for their port are bound again).
func (s *Server) Abort(ctx context.Context, c *Change) {
	if c.done {
		return
	}
	c.done = true
	defer s.mu.Unlock()
	s.undo(ctx, c)
}

// Commit makes the change, res and auth the server's generation, with
// one atomic store: every query read after it is answered by res (and
// transfers by auth) under the change's settings, none before. Then the
// listeners the change bound start serving and those it removed close.
func (s *Server) Commit(c *Change, res pipeline.Resolver, auth authority.Transferer) {
	if c.done {
		return
	}
	c.done = true
	defer s.mu.Unlock()
	st := c.set
	s.set.p.Store(newGeneration(res, auth, st))
	for _, u := range c.bound {
		s.units[u.key] = u
		s.start(u)
	}
	for _, u := range s.units {
		if u.doh != nil {
			s.followDoH(u, st) // TCP and TLS read the settings as they serve
		}
	}
	if st.rcvbuf > 0 {
		s.setRcvBufs(st.rcvbuf)
	}
	for k, u := range s.units {
		if !c.want[k] {
			s.remove(u, "stopped listening")
		}
	}
	for _, u := range c.bound {
		s.log.Info("listening", "proto", u.key.proto, "addr", u.addr().String())
	}
	s.order = c.order
}

// Current returns the generation in place.
func (s *Server) Current() *Generation { return s.set.gen() }

// freePorts stops and closes the units that a change is removing (not in
// want) and that hold the port of one of keys for the same transport, so
// that keys can be bound; it returns them. s.mu is held.
func (s *Server) freePorts(keys []unitKey, want map[unitKey]bool) []*unit {
	var freed []*unit
	for k, u := range s.units {
		if want[k] || !slices.ContainsFunc(keys, func(n unitKey) bool { return u.holdsPortOf(n) }) {
			continue
		}
		s.remove(u, "stopped listening to free its port")
		freed = append(freed, u)
	}
	return freed
}

// holdsUDPPort reports whether dnsd holds a UDP socket (in s.units or
// among bound, the units a Prepare has bound so far) on the port of one of
// keys. s.mu is held.
func (s *Server) holdsUDPPort(keys []unitKey, bound []*unit) bool {
	holds := func(u *unit) bool {
		return u.key.proto == "udp" && slices.ContainsFunc(keys, func(k unitKey) bool { return k.proto == "udp" && u.holdsPortOf(k) })
	}
	for _, u := range s.units {
		if holds(u) {
			return true
		}
	}
	return slices.ContainsFunc(bound, holds)
}

// remove stops u, closes its sockets, waits for its loops and logs msg.
// s.mu is held.
func (s *Server) remove(u *unit, msg string) {
	delete(s.units, u.key)
	u.stop()
	u.closeSockets()
	u.loops.Wait()
	s.log.Info(msg, "proto", u.key.proto, "addr", u.addr().String())
}

// holdsPortOf reports whether u holds the port that k would bind, for the
// same transport (UDP, or TCP for tcp, tls and https).
func (u *unit) holdsPortOf(k unitKey) bool {
	if (u.key.proto == "udp") != (k.proto == "udp") {
		return false
	}
	_, port, err := net.SplitHostPort(k.addr)
	if err != nil || port == "0" {
		return false
	}
	_, held, err := net.SplitHostPort(u.addr().String())
	return err == nil && held == port
}

// rebind binds and starts again the units freePorts closed, after a
// Prepare that failed or an Abort. s.mu is held.
func (s *Server) rebind(ctx context.Context, units []*unit) {
	for _, old := range units {
		// The address as written, with the port it had (port 0 resolved).
		addr := old.key.addr
		if host, _, err := net.SplitHostPort(addr); err == nil {
			if _, port, err := net.SplitHostPort(old.addr().String()); err == nil {
				addr = net.JoinHostPort(host, port)
			}
		}
		us, err := bindUnits(ctx, addr, []unitKey{old.key}, false)
		if err != nil {
			s.log.Error("cannot listen again after a failed reload", "proto", old.key.proto, "addr", old.key.addr, "err", err)
			continue
		}
		s.units[old.key] = us[0]
		s.start(us[0])
		s.log.Info("listening", "proto", old.key.proto, "addr", us[0].addr().String())
	}
}

// Addrs returns the bound addresses (port 0 resolved) in listen order:
// for each entry its TCP or TLS address (a *net.TCPAddr) and/or its UDP
// address (a *net.UDPAddr); an entry without a protocol gives TCP then UDP.
func (s *Server) Addrs() []net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]net.Addr, 0, len(s.order))
	for _, k := range s.order {
		if u := s.units[k]; u != nil {
			out = append(out, u.addr())
		}
	}
	return out
}

// Shutdown stops reading and accepting, waits for in-flight queries to be
// answered (until ctx ends), then closes every socket. When ctx ends first,
// in-flight resolutions are cancelled, connections closed, and ctx's error
// is returned.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	units := make([]*unit, 0, len(s.units))
	for _, u := range s.units {
		units = append(units, u)
	}
	s.units = map[unitKey]*unit{}
	s.order = nil
	s.mu.Unlock()

	s.stopping.Store(true)
	s.xfrs.end() // a transfer cannot finish in a stop's time: its secondary retries
	// Answers still being resolved halfway to ctx's deadline (a forward
	// to upstreams that do not answer: up to timeout x upstreams) are
	// cancelled then, so that the stop ends in time: their clients get
	// SERVFAIL, and a reader answering a batch inline is free to exit.
	drained := make(chan struct{})
	defer close(drained)
	go func() {
		t := time.NewTimer(drainFor(ctx))
		defer t.Stop()
		select {
		case <-t.C:
			s.log.Warn("answers still in flight at stop: cancelling them (their clients get SERVFAIL)")
			s.cancel()
		case <-drained:
		}
	}()
	for _, u := range units {
		u.stop()
	}

	finished := make(chan struct{})
	go func() {
		s.loops.Wait() // readers and accept loops exit after stop, once their batch is answered
		s.handlers.Wait()
		close(finished)
	}()
	select {
	case <-finished:
	case <-ctx.Done():
		// Give up: cancel resolutions, close everything and return. Handlers
		// still inside a Resolver that ignores ctx finish on their own; their
		// writes then fail on closed sockets.
		s.cancel()
		for _, u := range units {
			u.closeConns()
			u.closeSockets()
		}
		close(s.done)
		return fmt.Errorf("server shutdown: %w", ctx.Err())
	}
	s.cancel()
	close(s.done)
	s.workers.Wait()
	for _, u := range units {
		u.closeSockets()
	}
	return nil
}

// drainFor is how long Shutdown lets answers in flight finish before it
// cancels them: half of what is left to ctx's deadline, drainGrace when it
// has none.
func drainFor(ctx context.Context) time.Duration {
	if d, ok := ctx.Deadline(); ok {
		return max(time.Until(d)/2, 0)
	}
	return drainGrace
}

// drainGrace: see drainFor.
const drainGrace = 5 * time.Second

// setRcvBufs applies limits.udp_rcvbuf to every UDP socket (new ones and
// those kept from before, so a reload applies a change), and says once
// when the kernel granted less. Caller holds s.mu.
func (s *Server) setRcvBufs(n int) {
	least := n
	for _, u := range s.units {
		for _, c := range u.udp {
			got, err := setRcvBuf(c, n)
			if err != nil {
				s.log.Warn("cannot set the UDP receive buffer", "addr", c.LocalAddr().String(), "err", err)
				continue
			}
			least = min(least, got)
		}
	}
	if least < n {
		s.log.Warn("UDP receive buffer smaller than limits.udp_rcvbuf: the kernel caps it (raise net.core.rmem_max, or run with CAP_NET_ADMIN)",
			"wanted", n, "got", least)
	}
}

// rcvBufs reports the granted receive buffer of every UDP socket (tests).
func (s *Server) rcvBufs() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []int
	for _, u := range s.units {
		for _, c := range u.udp {
			got, err := getRcvBuf(c)
			if err == nil {
				out = append(out, got)
			}
		}
	}
	return out
}
