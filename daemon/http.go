package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
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
	mux.HandleFunc("POST /cache/flush", func(w http.ResponseWriter, r *http.Request) {
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
	})
	h := &httpServer{
		addr: addr,
		ln:   ln,
		srv:  &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelDebug)},
		done: make(chan struct{}),
	}
	go func() {
		defer close(h.done)
		if err := h.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
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
