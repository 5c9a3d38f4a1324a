package forward

import (
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/dnsd/dnsd/pipeline"
)

// dohUpstream is an in-process DNS over HTTPS server (HTTP/2 over TLS
// with a test CA) answering A queries with 192.0.2.53; it counts the
// connections it accepted and the requests it served over HTTP/2.
type dohUpstream struct {
	srv      *httptest.Server
	addr     string
	caFile   string
	conns    atomic.Int64
	h2       atomic.Int64
	requests atomic.Int64
	status   atomic.Int64 // when non-zero, answer this HTTP status
	// nonZeroID counts queries whose ID was not 0 (RFC 8484 §4.1).
	nonZeroID atomic.Int64
}

func startDoHUpstream(t *testing.T, name string) *dohUpstream {
	t.Helper()
	caPEM, cert := testCA(t, name)
	u := &dohUpstream{caFile: filepath.Join(t.TempDir(), "ca.pem")}
	if err := os.WriteFile(u.caFile, caPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	u.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.requests.Add(1)
		if r.ProtoMajor == 2 {
			u.h2.Add(1)
		}
		if st := u.status.Load(); st != 0 {
			w.WriteHeader(int(st))
			return
		}
		if r.Method != http.MethodPost || r.URL.Path != "/custom-query" || r.Header.Get("Content-Type") != "application/dns-message" {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		body, _ := io.ReadAll(r.Body)
		q := new(dns.Msg)
		if q.Unpack(body) != nil {
			http.Error(w, "bad message", http.StatusBadRequest)
			return
		}
		if q.Id != 0 {
			u.nonZeroID.Add(1)
		}
		m := new(dns.Msg)
		m.SetReply(q)
		m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: q.Question[0].Name, Rrtype: dns.TypeA, Ttl: 60}, A: net.ParseIP("192.0.2.53")})
		out, _ := m.Pack()
		w.Header().Set("Content-Type", "application/dns-message")
		_, _ = w.Write(out)
	}))
	u.srv.EnableHTTP2 = true
	u.srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	u.srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			u.conns.Add(1)
		}
	}
	u.srv.StartTLS()
	t.Cleanup(u.srv.Close)
	u.addr = u.srv.Listener.Addr().String()
	return u
}

// DoH upstreams: answers over HTTP/2 on one reused connection, verified
// against tls_ca and the server name; an upstream answering HTTP errors
// fails over to the next one.
func TestDoHUpstream(t *testing.T) {
	doh := startDoHUpstream(t, "doh.test")
	o := poolOpts()
	o.Upstreams = []Upstream{{Proto: "https", Addr: doh.addr, Path: "/custom-query", ServerName: "doh.test"}}
	o.TLSCA = doh.caFile
	o.Timeout = 2 * time.Second
	s := newTestSource(t, o, CacheConfig{}) // no cache: every lookup goes upstream
	for i := 0; i < 5; i++ {
		r := s.lookup(t, "a.example.", dns.TypeA)
		if got := answerA(r); got != "NOERROR:192.0.2.53/60" {
			t.Fatalf("lookup %d over DoH: %q (%+v)", i, got, r)
		}
	}
	if c, h2, n := doh.conns.Load(), doh.h2.Load(), doh.requests.Load(); c != 1 || h2 != 5 || n != 5 {
		t.Errorf("5 queries: %d connections, %d of %d requests over HTTP/2; want 1 connection, all HTTP/2", c, h2, n)
	}
	if n := doh.nonZeroID.Load(); n != 0 {
		t.Errorf("%d of 5 queries with an ID other than 0 (RFC 8484 §4.1: use 0)", n)
	}
	if got := s.pool.Upstreams()[0].String(); got != "https://"+doh.addr+"/custom-query@doh.test" {
		t.Errorf("label %q", got)
	}

	// A wrong server name fails verification.
	o2 := o
	o2.Upstreams = []Upstream{{Proto: "https", Addr: doh.addr, Path: "/custom-query", ServerName: "other.test"}}
	if r := newTestSource(t, o2, CacheConfig{}).lookup(t, "b.example.", dns.TypeA); r.Status != pipeline.Failed {
		t.Errorf("certificate for another name: %+v, want Failed", r)
	}

	// HTTP 500 from the first upstream: the next one answers.
	bad := startDoHUpstream(t, "doh.test")
	bad.status.Store(http.StatusInternalServerError)
	up := startUpstream(t)
	o3 := o
	o3.Upstreams = []Upstream{{Proto: "https", Addr: bad.addr, Path: "/custom-query", ServerName: "doh.test"}, {Proto: "udp", Addr: up.Addr}}
	o3.TLSCA = bad.caFile
	if got := answerA(newTestSource(t, o3, CacheConfig{}).lookup(t, "c.example.", dns.TypeA)); got != "NOERROR:192.0.2.1/300" {
		t.Errorf("after an HTTP 500: %q, want the next upstream's answer", got)
	}
}
