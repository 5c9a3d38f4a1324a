package dnstest_test

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/dnsd/dnsd/internal/dnstest"
	"github.com/dnsd/dnsd/internal/testpki"
)

// startDoT serves h over DNS over TLS on a loopback port with cert.
func startDoT(t *testing.T, cert tls.Certificate, h dns.HandlerFunc) string {
	t.Helper()
	l, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}})
	if err != nil {
		t.Fatal(err)
	}
	srv := &dns.Server{Listener: l, Net: "tcp-tls", Handler: h}
	started := make(chan struct{})
	srv.NotifyStartedFunc = func() { close(started) }
	go func() { _ = srv.ActivateAndServe() }()
	<-started
	t.Cleanup(func() { _ = srv.Shutdown() })
	return l.Addr().String()
}

// dohHandler answers RFC 8484 POSTs with dnstest.DefaultAnswer.
func dohHandler(t *testing.T) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		q := new(dns.Msg)
		if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/dns-message" || q.Unpack(body) != nil {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		rec := &recorder{}
		dnstest.DefaultAnswer(rec, q)
		wire, err := rec.msg.Pack()
		if err != nil {
			t.Error(err)
			return
		}
		w.Header().Set("Content-Type", "application/dns-message")
		_, _ = w.Write(wire)
	})
}

// recorder is the dns.ResponseWriter of dohHandler.
type recorder struct {
	dns.ResponseWriter
	msg *dns.Msg
}

func (r *recorder) WriteMsg(m *dns.Msg) error { r.msg = m; return nil }

// Every transport of Client gets the same answer; a verified TLS
// configuration is used, a wrong one fails with an error that names the
// transport.
func TestClientTransports(t *testing.T) {
	up := dnstest.StartUpstream(t, nil)
	ca, leaf := testpki.Server(t, "127.0.0.1")
	dot := startDoT(t, leaf.TLS, dnstest.DefaultAnswer)
	doh := httptest.NewUnstartedServer(dohHandler(t))
	doh.TLS = &tls.Config{Certificates: []tls.Certificate{leaf.TLS}}
	doh.EnableHTTP2 = true
	doh.StartTLS()
	t.Cleanup(doh.Close)

	verified := &tls.Config{RootCAs: ca.Pool(), ServerName: "127.0.0.1"}
	for _, c := range []struct {
		client dnstest.Client
		addr   string
	}{
		{dnstest.Client{}, up.Addr},
		{dnstest.Client{Net: "tcp"}, up.Addr},
		{dnstest.Client{Net: "tcp-tls"}, dot},
		{dnstest.Client{Net: "tcp-tls", TLS: verified}, dot},
		{dnstest.Client{Net: "https"}, doh.URL + "/dns-query"},
		{dnstest.Client{Net: "https", TLS: verified}, doh.URL + "/dns-query"},
	} {
		r := c.client.MustExchange(t, dnstest.Query("a.example.", dns.TypeA), c.addr)
		if got := dnstest.RData(r); got != "NOERROR:192.0.2.1" {
			t.Errorf("%+v: %s", c.client, got)
		}
	}
	wrong := &tls.Config{RootCAs: testpki.NewCA(t, "other").Pool(), ServerName: "127.0.0.1"}
	for _, c := range []struct{ netw, addr string }{{"tcp-tls", dot}, {"https", doh.URL}} {
		_, err := dnstest.Client{Net: c.netw, TLS: wrong, Timeout: time.Second}.Exchange(dnstest.Query("a.example.", dns.TypeA), c.addr)
		if err == nil || !strings.HasPrefix(err.Error(), c.netw+" ") {
			t.Errorf("%s with an unknown CA: err %v, want one that starts with %q", c.netw, err, c.netw)
		}
	}
	// Nothing listens: an error within the timeout.
	l, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	silent := l.LocalAddr().String()
	defer l.Close()
	start := time.Now()
	if _, err := (dnstest.Client{Timeout: 100 * time.Millisecond}).Exchange(dnstest.Query("a.example.", dns.TypeA), silent); err == nil {
		t.Error("a server that never answers: no error")
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("a 100 ms timeout took %s", took)
	}
}

func TestMustRR(t *testing.T) {
	rr := dnstest.MustRR(t, "a.example. 60 IN A 192.0.2.7")
	if a, ok := rr.(*dns.A); !ok || a.A.String() != "192.0.2.7" || a.Hdr.Ttl != 60 {
		t.Errorf("MustRR parsed %v", rr)
	}
}

// EventuallyNil returns once check does; until then it keeps asking.
func TestEventuallyNil(t *testing.T) {
	n := 0
	dnstest.EventuallyNil(t, 5*time.Second, func() error {
		if n++; n < 3 {
			return errors.New("not yet")
		}
		return nil
	})
	if n != 3 {
		t.Errorf("check called %d times, want 3", n)
	}
}

// fatalRecorder is a testing.TB whose Fatalf records instead of ending.
type fatalRecorder struct {
	testing.TB
	msg string
}

func (f *fatalRecorder) Helper()                           {}
func (f *fatalRecorder) Fatalf(format string, args ...any) { f.msg = fmt.Sprintf(format, args...) }

// A check that never passes: the failure carries its last error, and the
// polls back off (5 ms doubling to 50 ms: about ten in 300 ms, not 60).
func TestEventuallyNilTimesOut(t *testing.T) {
	rec := &fatalRecorder{TB: t}
	calls := 0
	dnstest.EventuallyNil(rec, 300*time.Millisecond, func() error {
		calls++
		return fmt.Errorf("seen %d", calls)
	})
	if want := fmt.Sprintf("after 300ms: seen %d", calls); rec.msg != want {
		t.Errorf("failure %q, want %q", rec.msg, want)
	}
	if calls < 3 || calls > 20 {
		t.Errorf("%d polls in 300 ms, want about ten", calls)
	}
	rec.msg = ""
	dnstest.Eventually(rec, "the impossible", 50*time.Millisecond, func() bool { return false })
	if rec.msg != "timed out after 50ms waiting for the impossible" {
		t.Errorf("Eventually's failure %q", rec.msg)
	}
}
