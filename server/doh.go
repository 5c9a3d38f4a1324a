package server

import (
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

// newDoHServer returns the unit's HTTP server; it is served by serveHTTPS.
func (s *Server) newDoHServer(u *unit) *http.Server {
	mux := http.NewServeMux()
	mux.HandleFunc(dohPath, func(w http.ResponseWriter, r *http.Request) { s.serveDoH(u, w, r) })
	idle := s.set.Load().idle
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
		ErrorLog:       slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
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

// serveHTTPS serves the unit's listener until it is closed.
func (s *Server) serveHTTPS(u *unit) {
	err := u.http.ServeTLS(&capListener{Listener: u.ln, s: s}, "", "")
	if err != nil && !errors.Is(err, http.ErrServerClosed) && !errors.Is(err, net.ErrClosed) && !u.stopping.Load() {
		s.log.Warn("https listener stopped", "addr", u.ln.Addr().String(), "err", err)
	}
}

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

// capListener applies max_tcp_connections and max_tcp_per_client to the
// connections of an https listener.
type capListener struct {
	net.Listener
	s *Server
}

func (l *capListener) Accept() (net.Conn, error) {
	s := l.s
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		key, ok := s.admit(c)
		if !ok {
			continue
		}
		return &countedConn{Conn: c, release: func() { s.leave(key) }}, nil
	}
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
