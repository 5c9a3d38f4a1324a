package server

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"
)

// DNS over HTTPS (RFC 8484): an https:// listen entry serves /dns-query
// over HTTP/2 and HTTP/1.1 with TLS (net/http), GET with ?dns=<base64url>
// and POST with an application/dns-message body. Each request goes through
// serveRaw like any other query: the same ACL (by the HTTP client's
// address; a refused client gets 200 with a REFUSED message), the same
// pipeline. Connections count against max_tcp_connections and
// max_tcp_per_client; as TCP, DoH is never rate-limited (rate_per_client
// is for UDP, whose client addresses can be forged).

const dohPath = "/dns-query"

// newDoHServer returns an HTTP server for the unit's connections with the
// timeouts and streams of st; it is served by serveDoHGen.
func (s *Server) newDoHServer(u *unit, st *settings) *http.Server {
	mux := http.NewServeMux()
	mux.HandleFunc(dohPath, func(w http.ResponseWriter, r *http.Request) { s.serveDoH(u, w, r) })
	idle := st.idle
	return &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: idle,
		ReadTimeout:       idle,
		// The write deadline starts with the request, as the read one:
		// twice the idle timeout leaves a request whose body stopped
		// coming (cut at idle) the time to be told 408, and a slow
		// answer (a forward that waits) the time to be written.
		WriteTimeout:   2 * idle,
		IdleTimeout:    idle,
		MaxHeaderBytes: 16 << 10,
		// max_tcp_pipeline bounds the streams of an HTTP/2 connection
		// answered at once, as it bounds a TCP connection's queries.
		HTTP2:    &http.HTTP2Config{MaxConcurrentStreams: st.pipeline},
		ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
		TLSConfig: &tls.Config{
			MinVersion: tls.VersionTLS12,
			// The certificate of the running settings: a reload that
			// changes tls: applies to new connections.
			GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
				st := s.set.Load()
				if st.tls == nil || len(st.tls.Certificates) == 0 {
					return nil, errors.New("no certificate")
				}
				return &st.tls.Certificates[0], nil
			},
		},
	}
}

// An https unit's connections are served by the HTTP server of the limits
// they were accepted under (net/http reads a server's timeouts and
// HTTP/2 settings while it serves, so they cannot change in place). The
// unit's accept loop (acceptHTTPS) hands each connection to the current
// dohGen; a reload that changes tcp_idle_timeout or max_tcp_pipeline
// starts a new one (followDoH) and retires the old: its idle connections
// close at once, its HTTP/1.1 ones after their request, its HTTP/2 ones
// are sent GOAWAY and close once their streams are answered, and clients
// reconnect to the new one. A retiring server gets twice its idle timeout
// and a second (its requests' own bound) before it is closed.
type dohUnit struct {
	mu   sync.Mutex
	cur  *dohGen
	gens map[*dohGen]bool // cur and the retiring ones
	// noKeepAlives: the unit is stopping; new servers start without.
	noKeepAlives bool
	wg           sync.WaitGroup // the servers' and retirements' goroutines
}

// dohGen is one HTTP server of an https unit and the queue it takes its
// connections from.
type dohGen struct {
	srv  *http.Server
	q    *connQueue
	idle time.Duration
	pipe int
}

// followDoH makes new connections of an https unit use st's idle timeout
// and pipeline, retiring the server that used others. s.mu is held (or u
// is being started).
func (s *Server) followDoH(u *unit, st *settings) {
	d := u.doh
	d.mu.Lock()
	defer d.mu.Unlock()
	old := d.cur
	if old != nil && old.idle == st.idle && old.pipe == st.pipeline {
		return
	}
	g := &dohGen{srv: s.newDoHServer(u, st), q: newConnQueue(u.ln.Addr()), idle: st.idle, pipe: st.pipeline}
	if d.noKeepAlives {
		g.srv.SetKeepAlivesEnabled(false)
	}
	if d.gens == nil {
		d.gens = make(map[*dohGen]bool)
	}
	d.gens[g] = true
	d.cur = g
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		defer g.q.Close() // a server that failed takes no more connections
		err := g.srv.ServeTLS(g.q, "", "")
		if err != nil && !errors.Is(err, http.ErrServerClosed) && !errors.Is(err, net.ErrClosed) {
			s.log.Warn("https server stopped", "addr", u.ln.Addr().String(), "err", err)
		}
	}()
	if old == nil {
		return
	}
	s.log.Debug("https limits changed: new connections get the new ones, open ones close once answered",
		"addr", u.ln.Addr().String(), "tcp_idle_timeout", st.idle, "max_tcp_pipeline", st.pipeline)
	old.q.Close()
	ctx, cancel := context.WithTimeout(s.ctx, 2*old.idle+time.Second)
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		defer cancel()
		_ = old.srv.Shutdown(ctx)
		_ = old.srv.Close()
		d.mu.Lock()
		delete(d.gens, old)
		d.mu.Unlock()
	}()
}

// hand gives c to the current server; false when the unit is stopping.
func (d *dohUnit) hand(c net.Conn) bool {
	for {
		d.mu.Lock()
		g := d.cur
		d.mu.Unlock()
		if g == nil {
			return false
		}
		if g.q.put(c) {
			return true
		}
		// Retired meanwhile: the next one is current.
		d.mu.Lock()
		stopped := d.cur == g
		d.mu.Unlock()
		if stopped {
			return false
		}
	}
}

// stopAccepting closes the servers' queues: they serve no new connection.
func (d *dohUnit) stopAccepting() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for g := range d.gens {
		g.q.Close()
	}
}

// noMoreRequests: no new requests on open connections; idle ones close.
func (d *dohUnit) noMoreRequests() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.noKeepAlives = true
	for g := range d.gens {
		g.srv.SetKeepAlivesEnabled(false)
	}
}

// close closes every server and its connections and waits for their
// goroutines.
func (d *dohUnit) close() {
	d.mu.Lock()
	for g := range d.gens {
		g.q.Close()
		_ = g.srv.Close()
	}
	d.mu.Unlock()
	d.wg.Wait()
}

// acceptHTTPS accepts the connections of an https unit until it is
// stopped, applies max_tcp_connections and max_tcp_per_client to them and
// hands them to the unit's current HTTP server.
func (s *Server) acceptHTTPS(u *unit) {
	defer u.doh.stopAccepting()
	errs := acceptLog{log: s.log, proto: u.key.proto, addr: u.ln.Addr().String()}
	for {
		c, err := u.ln.Accept()
		if err != nil {
			if u.stopping.Load() || errors.Is(err, net.ErrClosed) {
				return
			}
			time.Sleep(errs.failed(err))
			continue
		}
		errs.ok()
		key, ok := s.admit(c)
		if !ok {
			continue
		}
		if !u.doh.hand(&countedConn{Conn: c, release: func() { s.leave(key) }}) {
			s.leave(key)
			_ = c.Close()
			return
		}
	}
}

// connQueue is a net.Listener whose connections are put to it.
type connQueue struct {
	addr   net.Addr
	conns  chan net.Conn
	closed chan struct{}
	once   sync.Once
}

func newConnQueue(addr net.Addr) *connQueue {
	return &connQueue{addr: addr, conns: make(chan net.Conn), closed: make(chan struct{})}
}

// put hands c to Accept; false when the queue is closed.
func (q *connQueue) put(c net.Conn) bool {
	select {
	case <-q.closed:
		return false
	default:
	}
	select {
	case q.conns <- c:
		return true
	case <-q.closed:
		return false
	}
}

func (q *connQueue) Accept() (net.Conn, error) {
	select {
	case c := <-q.conns:
		return c, nil
	case <-q.closed:
		return nil, net.ErrClosed
	}
}

func (q *connQueue) Close() error {
	q.once.Do(func() { close(q.closed) })
	return nil
}

func (q *connQueue) Addr() net.Addr { return q.addr }

func (s *Server) serveDoH(u *unit, w http.ResponseWriter, r *http.Request) {
	var msg []byte
	switch r.Method {
	case http.MethodGet:
		q := r.URL.Query().Get("dns")
		if q == "" {
			http.Error(w, "missing dns parameter", http.StatusBadRequest)
			return
		}
		b, err := base64.RawURLEncoding.DecodeString(q)
		if err != nil {
			http.Error(w, "dns parameter is not base64url", http.StatusBadRequest)
			return
		}
		msg = b
	case http.MethodPost:
		if !isDNSMessage(r.Header.Get("Content-Type")) {
			http.Error(w, "content type must be application/dns-message", http.StatusUnsupportedMediaType)
			return
		}
		b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, dns.MaxMsgSize))
		if err != nil {
			if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
				http.Error(w, "body too large", http.StatusRequestEntityTooLarge)
				return
			}
			if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
				// Sent too slowly for the idle timeout.
				http.Error(w, "body not received in time", http.StatusRequestTimeout)
				return
			}
			http.Error(w, "body unreadable", http.StatusBadRequest)
			return
		}
		msg = b
	default:
		w.Header().Set("Allow", "GET, POST")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	client := httpClient(r)
	s.handlers.Add(1)
	defer s.handlers.Done()
	if s.stopping.Load() {
		http.Error(w, "shutting down", http.StatusServiceUnavailable)
		return
	}
	sc := s.scratches.Get().(*scratch)
	defer s.scratches.Put(sc)
	defer s.release(sc)
	sc.listen = u.listen
	out := s.serveRaw(r.Context(), sc, protoHTTPS, client, u.loopback, msg)
	if out == nil {
		http.Error(w, "not a DNS query", http.StatusBadRequest)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/dns-message")
	h.Set("Content-Length", strconv.Itoa(len(out)))
	if ttl, ok := sc.responseTTL(); ok {
		h.Set("Cache-Control", "max-age="+strconv.FormatUint(uint64(ttl), 10))
	}
	_, _ = w.Write(out)
}

// minTTL is the smallest TTL of a response's records (RFC 8484 §5.1:
// HTTP caches must not keep the answer longer).
func minTTL(m *dns.Msg) (uint32, bool) {
	var ttl uint32
	found := false
	for _, sec := range [][]dns.RR{m.Answer, m.Ns, m.Extra} {
		for _, rr := range sec {
			if rr.Header().Rrtype == dns.TypeOPT {
				continue
			}
			if t := rr.Header().Ttl; !found || t < ttl {
				ttl, found = t, true
			}
		}
	}
	return ttl, found
}

func httpClient(r *http.Request) netip.Addr {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return netip.Addr{}
	}
	return ap.Addr().Unmap().WithZone("")
}

// countedConn gives its place back when closed (once).
type countedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *countedConn) Close() error {
	c.once.Do(c.release)
	return c.Conn.Close()
}

// isDNSMessage reports whether a Content-Type is application/dns-message:
// media types are case-insensitive and may carry parameters (RFC 9110
// section 8.3.1).
func isDNSMessage(ct string) bool {
	mt, _, _ := strings.Cut(ct, ";")
	return strings.EqualFold(strings.TrimSpace(mt), "application/dns-message")
}
