package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// The HTTP port's bounds. A request's headers must arrive within
// httpReadHeaderTimeout of the connection's wait for them, the whole
// request within httpReadTimeout; its answer must be written within
// httpWriteTimeout of the end of the request (a scrape of a large
// /metrics from a slow network included). A keep-alive connection
// closes after httpIdleTimeout without a request. At most httpMaxConns
// connections are open at once: a connection over it is closed at once,
// so that scrapers and probes that never close theirs cannot take the
// file descriptors DNS needs. There is no /debug endpoint.
const (
	httpReadHeaderTimeout = 5 * time.Second
	httpReadTimeout       = 10 * time.Second
	httpWriteTimeout      = 30 * time.Second
	httpIdleTimeout       = 10 * time.Second
	httpMaxConns          = 64
)

// httpServer serves /metrics, /health, /ready and /cache/flush on one
// address.
type httpServer struct {
	addr string
	ln   net.Listener
	srv  *http.Server
	done chan struct{}
}

// startHTTP binds addr and serves in an owned goroutine until stop.
func startHTTP(addr string, gatherer prometheus.Gatherer, ready func() (bool, string), flush func(name string) int, logger *slog.Logger) (*httpServer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("http %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(gatherer, promhttp.HandlerOpts{ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelWarn)}))
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /ready", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		ok, why := ready()
		if !ok {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(strings.TrimSpace(why) + "\n"))
			return
		}
		_, _ = w.Write([]byte("ready\n"))
		if why != "" { // ready, but a backend serves its last data
			_, _ = w.Write([]byte(strings.TrimSpace(why) + "\n"))
		}
	})
	// POST /cache/flush[?name=N]: drop the response cache's entries (for N
	// and every name below it). Other methods get 405 from the mux.
	mux.HandleFunc("POST /cache/flush", sameOrigin(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		name := q.Get("name")
		if q.Has("name") && name == "" {
			// An unset variable in a script ("?name=$NAME") must not
			// empty the whole cache.
			http.Error(w, "name is empty (leave it out to flush everything)", http.StatusBadRequest)
			return
		}
		if name != "" {
			if _, ok := dns.IsDomainName(name); !ok {
				http.Error(w, fmt.Sprintf("name %q is not a domain name", name), http.StatusBadRequest)
				return
			}
			name = strings.ToLower(dns.Fqdn(name))
		}
		n := flush(name)
		logger.Info("response cache flushed", "name", name, "removed", n)
		w.Header().Set("Content-Type", "application/json")
		_, _ = fmt.Fprintf(w, "{\"removed\": %d}\n", n)
	}))
	h := &httpServer{
		addr: addr,
		ln:   ln,
		srv: &http.Server{
			Handler:           mux,
			ReadHeaderTimeout: httpReadHeaderTimeout,
			ReadTimeout:       httpReadTimeout,
			WriteTimeout:      httpWriteTimeout,
			IdleTimeout:       httpIdleTimeout,
			MaxHeaderBytes:    16 << 10,
			ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelDebug),
		},
		done: make(chan struct{}),
	}
	capped := &connCap{Listener: ln, max: httpMaxConns, log: logger}
	go func() {
		defer close(h.done)
		if err := h.srv.Serve(capped); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("http server", "addr", addr, "err", err)
		}
	}()
	return h, nil
}

// stop shuts the server down and waits for its goroutine.
func (h *httpServer) stop(ctx context.Context) {
	if h == nil {
		return
	}
	_ = h.srv.Shutdown(ctx)
	<-h.done
}

// sameOrigin refuses, with 403, the requests a web page in a browser could
// make to a state-changing endpoint: those with an Origin header other than
// the listener's own (http://IP:port as connected to, or
// http://localhost:port on a loopback address; a DNS-rebound name is not
// the listener's own), and those with a content type other than
// application/json, or a body without a content type. A request with no
// body and no content type (curl -X POST) is served.
func sameOrigin(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if why := crossOrigin(r); why != "" {
			http.Error(w, why, http.StatusForbidden)
			return
		}
		next(w, r)
	}
}

// crossOrigin says why r is refused by sameOrigin, "" when it is not.
func crossOrigin(r *http.Request) string {
	if origins := r.Header.Values("Origin"); len(origins) > 0 {
		if len(origins) > 1 || !ownOrigin(r, origins[0]) {
			return fmt.Sprintf("cross-origin request refused: Origin %q is not this listener", quoteShort(strings.Join(origins, ", ")))
		}
	}
	if ct := r.Header.Get("Content-Type"); ct != "" {
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
			return fmt.Sprintf("content type %q refused: send no body, or application/json", quoteShort(ct))
		}
	} else if r.ContentLength != 0 { // -1: chunked
		return "a request body needs Content-Type: application/json"
	}
	return ""
}

// ownOrigin reports whether origin is the listener r arrived on:
// http://IP:port of the connection's local address, or localhost:port when
// that address is a loopback one.
func ownOrigin(r *http.Request, origin string) bool {
	local, ok := r.Context().Value(http.LocalAddrContextKey).(*net.TCPAddr)
	if !ok {
		return false
	}
	u, err := url.Parse(origin)
	if err != nil || u.Scheme != "http" || u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
		return false
	}
	host, port, err := net.SplitHostPort(u.Host)
	if err != nil || port != fmt.Sprint(local.Port) {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return local.IP.IsLoopback()
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.Equal(local.IP)
}

// quoteShort cuts s to 80 bytes for an error message.
func quoteShort(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}

// connCap is a listener that keeps at most max of its connections open:
// one accepted over it is closed at once. It says so once when it starts
// closing connections, and once when it accepts again.
type connCap struct {
	net.Listener
	max int
	log *slog.Logger

	mu   sync.Mutex
	open int
	full bool // the last connection accepted was over max
}

func (l *connCap) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		l.mu.Lock()
		over := l.open >= l.max
		if !over {
			l.open++
		}
		changed := over != l.full
		l.full = over
		l.mu.Unlock()
		if changed && over {
			l.log.Warn("http connections at their cap: closing new ones until some close", "addr", l.Addr().String(), "max", l.max)
		} else if changed {
			l.log.Info("http connections under their cap again: accepting", "addr", l.Addr().String(), "max", l.max)
		}
		if over {
			_ = c.Close()
			continue
		}
		return &cappedConn{Conn: c, l: l}, nil
	}
}

// cappedConn gives its place back when closed (once).
type cappedConn struct {
	net.Conn
	l    *connCap
	once sync.Once
}

func (c *cappedConn) Close() error {
	c.once.Do(func() {
		c.l.mu.Lock()
		c.l.open--
		c.l.mu.Unlock()
	})
	return c.Conn.Close()
}
