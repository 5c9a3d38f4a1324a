package server

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
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
	"golang.org/x/net/http2"
)

// DNS over HTTPS (RFC 8484): an https:// listen entry serves /dns-query
// over HTTP/2 and HTTP/1.1 with TLS (net/http; HTTP/2 by x/net's server,
// each answer in TLS records of its own), GET with ?dns=<base64url>
// and POST with an application/dns-message body. Each request goes through
// serveRaw like any other query: the same ACL (by the HTTP client's
// address; a refused client gets 200 with a REFUSED message), the same
// pipeline. Connections count against max_tcp_connections and
// max_tcp_per_client; as TCP, DoH is never rate-limited (rate_per_client
// is for UDP, whose client addresses can be forged).

const dohPath = "/dns-query"

// newDoHServer returns an HTTP server for the unit's connections with the
// timeouts and streams of st; it is served by followDoH. HTTP/1.1 is
// net/http's; HTTP/2 is x/net's server on a responseRecords connection,
// so that each answer leaves in TLS records of its own.
func (s *Server) newDoHServer(u *unit, st *settings) (*http.Server, error) {
	mux := http.NewServeMux()
	mux.HandleFunc(dohPath, func(w http.ResponseWriter, r *http.Request) { s.serveDoH(u, w, r) })
	idle := st.idle
	srv := &http.Server{
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
	// ConfigureServer reads the idle timeout and registers the GOAWAY of
	// a Shutdown; the HTTP/2 settings come from srv.HTTP2.
	//lint:ignore SA1019 net/http cannot serve HTTP/2 on a wrapped conn (see below)
	h2 := &http2.Server{}
	//lint:ignore SA1019 as above
	if err := http2.ConfigureServer(srv, h2); err != nil {
		return nil, fmt.Errorf("https %s: %w", u.ln.Addr(), err)
	}
	srv.TLSNextProto[http2.NextProtoTLS] = func(hs *http.Server, c *tls.Conn, h http.Handler) {
		// What net/http's own HTTP/2 does, on c wrapped (net/http has
		// no way to wrap it; x/net marks ServeConn deprecated for that).
		ctx := context.Background()
		if bc, ok := h.(interface{ BaseContext() context.Context }); ok {
			ctx = bc.BaseContext()
		}
		raw, _ := c.NetConn().(*dohConn)
		//lint:ignore SA1019 the one way to serve HTTP/2 on a wrapped conn
		h2.ServeConn(&responseRecords{Conn: c, raw: raw}, &http2.ServeConnOpts{Context: ctx, Handler: h, BaseConfig: hs})
	}
	return srv, nil
}

// responseRecords is an HTTP/2 server connection whose writes go to TLS
// cut after each frame that ends a stream: an answer never shares a TLS
// record with the next one. HTTP/2 allows any cut, and Go's server sends
// the answers that are ready at once in one write, so in a few records;
// but clients that take one answer per TLS read (dnsperf's DoH mode)
// lose the other answers of that read. The records of one write still
// leave in one write to the socket (raw gathers them). A write that ends
// inside a frame is written as it is (the rest comes with the next one).
type responseRecords struct {
	*tls.Conn // and its ConnectionState, which the HTTP/2 server reads
	raw       *dohConn
	frames    frameCutter
}

func (c *responseRecords) Write(p []byte) (int, error) {
	k := c.frames.cut(p)
	if k == len(p) || c.raw == nil {
		return c.writePieces(p, k)
	}
	// The last piece's TLS write sends the records of all: a Close
	// meanwhile closes the socket at once, as during any TLS write.
	c.raw.gather()
	n := 0
	for {
		if k == len(p) {
			c.raw.sendWithNext()
		}
		m, err := c.Conn.Write(p[:k])
		n += m
		if err != nil {
			c.raw.drop()
			return n, err
		}
		if p = p[k:]; len(p) == 0 {
			return n, nil
		}
		k = c.frames.cut(p)
	}
}

// writePieces writes p to TLS in pieces, k the length of the first.
func (c *responseRecords) writePieces(p []byte, k int) (int, error) {
	n := 0
	for {
		m, err := c.Conn.Write(p[:k])
		n += m
		if err != nil {
			return n, err
		}
		if p = p[k:]; len(p) == 0 {
			return n, nil
		}
		k = c.frames.cut(p)
	}
}

// HTTP/2 frame header (RFC 9113 section 4.1): length (24 bits), type,
// flags, stream.
const (
	h2FrameHeaderLen   = 9
	h2TypeData         = 0x0
	h2TypeHeaders      = 0x1
	h2TypeContinuation = 0x9
	h2FlagEndStream    = 0x1
	h2FlagEndHeaders   = 0x4
)

// frameCutter follows the HTTP/2 frames of a byte stream written in
// pieces of any size.
type frameCutter struct {
	hdr  [h2FrameHeaderLen]byte
	nhdr int  // bytes of hdr read
	left int  // payload bytes of the current frame still to come
	ends bool // the current frame ends a stream
	// headersEnd: a HEADERS frame with END_STREAM whose header block goes
	// on in CONTINUATION frames; the last of them ends the stream.
	headersEnd bool
}

// cut returns the length of p's first piece: up to the end of the first
// frame in p that ends a stream, else all of p.
func (f *frameCutter) cut(p []byte) int {
	i := 0
	for i < len(p) {
		if f.left > 0 {
			k := min(f.left, len(p)-i)
			f.left -= k
			i += k
		} else {
			k := copy(f.hdr[f.nhdr:], p[i:])
			f.nhdr += k
			i += k
			if f.nhdr < h2FrameHeaderLen {
				return i
			}
			f.nhdr = 0
			f.left = int(f.hdr[0])<<16 | int(f.hdr[1])<<8 | int(f.hdr[2])
			f.ends = f.endsStream(f.hdr[3], f.hdr[4])
		}
		if f.left == 0 && f.ends {
			f.ends = false
			return i
		}
	}
	return i
}

func (f *frameCutter) endsStream(typ, flags byte) bool {
	switch typ {
	case h2TypeData:
		return flags&h2FlagEndStream != 0
	case h2TypeHeaders:
		if flags&h2FlagEndStream == 0 {
			f.headersEnd = false
			return false
		}
		f.headersEnd = flags&h2FlagEndHeaders == 0
		return !f.headersEnd
	case h2TypeContinuation:
		if f.headersEnd && flags&h2FlagEndHeaders != 0 {
			f.headersEnd = false
			return true
		}
	}
	return false
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
	bufs         sync.Pool      // of *[]byte: the records dohConns gather
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
	srv, err := s.newDoHServer(u, st)
	if err != nil {
		// Only a TLS configuration without HTTP/2's cipher suites fails,
		// and dnsd sets none: keep the server that there is.
		s.log.Error("https server not configured", "addr", u.ln.Addr().String(), "err", err)
		return
	}
	g := &dohGen{srv: srv, q: newConnQueue(u.ln.Addr()), idle: st.idle, pipe: st.pipeline}
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
	s.accept(u, func(c net.Conn, key uint64) bool {
		return u.doh.hand(&dohConn{Conn: c, release: func() { s.leave(key) }, bufs: &u.doh.bufs})
	})
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

// dohConn is an accepted https connection, under its TLS. It gives its
// place back when closed (once), and gathers the TLS records of one
// HTTP/2 write into one write to the socket (see responseRecords).
type dohConn struct {
	net.Conn
	once    sync.Once
	release func()
	bufs    *sync.Pool // of *[]byte, the unit's

	mu       sync.Mutex
	gathered *[]byte // nil: writes go through
	sendNext bool    // the next write sends the gathered ones with it
}

func (c *dohConn) Close() error {
	c.once.Do(c.release)
	return c.Conn.Close()
}

func (c *dohConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gathered == nil {
		return c.Conn.Write(p)
	}
	*c.gathered = append(*c.gathered, p...)
	if !c.sendNext {
		return len(p), nil
	}
	_, err := c.Conn.Write(*c.gathered)
	c.putLocked()
	if err != nil {
		return 0, err
	}
	return len(p), nil
}

// gather keeps what is written from now on, until sendWithNext.
func (c *dohConn) gather() {
	c.mu.Lock()
	defer c.mu.Unlock()
	b, _ := c.bufs.Get().(*[]byte)
	if b == nil {
		b = new([]byte)
	}
	c.gathered = b
}

// sendWithNext: the next write sends what was gathered, and itself.
func (c *dohConn) sendWithNext() {
	c.mu.Lock()
	c.sendNext = true
	c.mu.Unlock()
}

// drop forgets what was gathered (the TLS write failed).
func (c *dohConn) drop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gathered != nil {
		c.putLocked()
	}
}

func (c *dohConn) putLocked() {
	b := c.gathered
	*b = (*b)[:0]
	c.bufs.Put(b)
	c.gathered, c.sendNext = nil, false
}

// isDNSMessage reports whether a Content-Type is application/dns-message:
// media types are case-insensitive and may carry parameters (RFC 9110
// section 8.3.1).
func isDNSMessage(ct string) bool {
	mt, _, _ := strings.Cut(ct, ";")
	return strings.EqualFold(strings.TrimSpace(mt), "application/dns-message")
}
