package e2e

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"
	"golang.org/x/net/http2"

	"github.com/dnsd/dnsd/internal/dnstest"
	"github.com/dnsd/dnsd/internal/testpki"
)

// h2Conn is an HTTP/2 connection to a DoH listener read frame by frame.
type h2Conn struct {
	c  *tls.Conn
	fr *http2.Framer
}

func dialH2(t *testing.T, addr string, conf *tls.Config) *h2Conn {
	t.Helper()
	conf = conf.Clone()
	conf.NextProtos = []string{"h2"}
	c, err := tls.Dial("tcp", addr, conf)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if p := c.ConnectionState().NegotiatedProtocol; p != "h2" {
		t.Fatalf("negotiated %q, want h2", p)
	}
	if _, err := io.WriteString(c, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	h := &h2Conn{c: c, fr: http2.NewFramer(c, c)}
	if err := h.fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	return h
}

// maxStreams reads the server's first SETTINGS frame and returns its
// SETTINGS_MAX_CONCURRENT_STREAMS.
func (h *h2Conn) maxStreams(t *testing.T) uint32 {
	t.Helper()
	_ = h.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	for {
		f, err := h.fr.ReadFrame()
		if err != nil {
			t.Fatalf("reading the server's SETTINGS: %v", err)
		}
		if sf, ok := f.(*http2.SettingsFrame); ok && !sf.IsAck() {
			_ = h.fr.WriteSettingsAck()
			v, ok := sf.Value(http2.SettingMaxConcurrentStreams)
			if !ok {
				t.Fatal("no SETTINGS_MAX_CONCURRENT_STREAMS")
			}
			return v
		}
	}
}

// goAway reads frames until a GOAWAY (true) or the end of the connection
// or the deadline (false).
func (h *h2Conn) goAway(within time.Duration) bool {
	_ = h.c.SetReadDeadline(time.Now().Add(within))
	for {
		f, err := h.fr.ReadFrame()
		if err != nil {
			return false
		}
		if _, ok := f.(*http2.GoAwayFrame); ok {
			return true
		}
	}
}

// DoH follows a reload as TCP does: after tcp_idle_timeout and
// max_tcp_pipeline change, new connections are closed after the new idle
// timeout and advertise the new pipeline as their HTTP/2 streams; the
// connections open before are closed once answered (HTTP/2: GOAWAY), so
// their clients reconnect under the new limits.
func TestDoHFollowsReload(t *testing.T) {
	dir := t.TempDir()
	ca, leaf := testpki.Server(t, "127.0.0.1")
	writeFile(t, filepath.Join(dir, "tls.crt"), string(leaf.CertPEM))
	writeFile(t, filepath.Join(dir, "tls.key"), string(leaf.KeyPEM))
	udp, dohPort := freePort(t), freePort(t)
	cfg := func(idle string, pipeline int) string {
		return fmt.Sprintf(`listen: ["127.0.0.1:%d", "https://127.0.0.1:%d"]
tls: {cert: tls.crt, key: tls.key}
limits: {tcp_idle_timeout: %s, max_tcp_pipeline: %d}
zones:
  example.internal:
    - hosts: {entries: ["10.0.0.7 web"]}
`, udp, dohPort, idle, pipeline)
	}
	writeFile(t, filepath.Join(dir, "dnsd.yaml"), cfg("30s", 16))
	p := startDnsd(t, dir)
	p.waitLog("dnsd started", 1)
	addr := fmt.Sprintf("127.0.0.1:%d", dohPort)
	conf := &tls.Config{RootCAs: ca.Pool(), ServerName: "127.0.0.1"}

	// ask sends one DoH POST over HTTP/1.1 on c and checks the answer.
	q := new(dns.Msg)
	q.SetQuestion("web.example.internal.", dns.TypeA)
	wire, _ := q.Pack()
	ask := func(c net.Conn, br *bufio.Reader) {
		t.Helper()
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		fmt.Fprintf(c, "POST /dns-query HTTP/1.1\r\nHost: %s\r\nContent-Type: application/dns-message\r\nContent-Length: %d\r\n\r\n", addr, len(wire))
		_, _ = c.Write(wire)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("DoH over HTTP/1.1: %v", err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		r := new(dns.Msg)
		if resp.StatusCode != 200 || r.Unpack(body) != nil || dnstest.RData(r) != "NOERROR:10.0.0.7" {
			t.Fatalf("DoH over HTTP/1.1: HTTP %d %v", resp.StatusCode, r)
		}
		_ = c.SetDeadline(time.Time{})
	}
	h1 := func() (net.Conn, *bufio.Reader) {
		t.Helper()
		conf := conf.Clone()
		conf.NextProtos = []string{"http/1.1"}
		c, err := tls.Dial("tcp", addr, conf)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c, bufio.NewReader(c)
	}
	// closedWithin reports how long c took to be closed by dnsd, failing
	// when it is still open after limit.
	closedWithin := func(what string, c net.Conn, br *bufio.Reader, from time.Time, limit time.Duration) time.Duration {
		t.Helper()
		_ = c.SetReadDeadline(from.Add(limit))
		_, err := br.ReadByte()
		took := time.Since(from)
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Fatalf("%s still open %v later", what, limit)
		}
		return took
	}

	oldH2 := dialH2(t, addr, conf)
	if n := oldH2.maxStreams(t); n != 16 {
		t.Fatalf("HTTP/2 streams per connection %d, want max_tcp_pipeline 16", n)
	}
	oldH1, oldBr := h1()
	ask(oldH1, oldBr)

	writeFile(t, filepath.Join(dir, "dnsd.yaml"), cfg("1s", 3))
	reloaded := time.Now()
	p.signal(syscall.SIGHUP)
	p.waitLog("reloaded", 1)

	newH2 := dialH2(t, addr, conf)
	if n := newH2.maxStreams(t); n != 3 {
		t.Errorf("HTTP/2 streams per connection after the reload %d, want the new max_tcp_pipeline 3", n)
	}
	if !oldH2.goAway(5 * time.Second) {
		t.Errorf("an HTTP/2 connection open before the reload was not sent GOAWAY")
	}
	// Idle since its answer: closed by the reload, not 30 s later.
	closedWithin("an idle HTTP/1.1 connection open before the reload", oldH1, oldBr, reloaded, 5*time.Second)

	c, br := h1()
	ask(c, br)
	answered := time.Now()
	ask(c, br) // still open: kept alive
	if took := closedWithin("an idle HTTP/1.1 connection", c, br, answered, 6*time.Second); took < 500*time.Millisecond {
		t.Errorf("an idle connection closed %v after its answer, before the 1 s idle timeout", took)
	}
	p.stop(syscall.SIGTERM)
}

// Out of file descriptors, the TCP and DoH listeners say so once (WARN),
// retry quietly (DEBUG), and once when they accept again (INFO); DNS over
// TCP answers again at once.
func TestAcceptErrorsLoggedOnce(t *testing.T) {
	dir := t.TempDir()
	_, leaf := testpki.Server(t, "127.0.0.1")
	writeFile(t, filepath.Join(dir, "tls.crt"), string(leaf.CertPEM))
	writeFile(t, filepath.Join(dir, "tls.key"), string(leaf.KeyPEM))
	port, dohPort := freePort(t), freePort(t)
	writeFile(t, filepath.Join(dir, "dnsd.yaml"), fmt.Sprintf(`listen: ["127.0.0.1:%d", "https://127.0.0.1:%d"]
tls: {cert: tls.crt, key: tls.key}
limits: {tcp_idle_timeout: 60s, max_tcp_per_client: 1000}
zones:
  example.internal:
    - hosts: {entries: ["10.0.0.7 web"]}
`, port, dohPort))
	// 64 file descriptors: dnsd's own take about 20.
	p := startBinary(t, "/bin/sh", nil, dir, "-c", "ulimit -n 64 && exec "+dnsdBin)
	p.waitLog("dnsd started", 1)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	dial := func(a string) {
		c, err := net.DialTimeout("tcp", a, 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	for range 80 {
		dial(addr) // accepted until dnsd has no descriptor left, then queued by the kernel
	}
	dial(fmt.Sprintf("127.0.0.1:%d", dohPort))
	p.waitLog(`msg="accept failing, retrying" proto=tcp`, 1)
	p.waitLog(`msg="accept failing, retrying" proto=https`, 1)
	time.Sleep(3 * time.Second) // 5 ms doubling to 1 s: about ten retries each
	for _, proto := range []string{"tcp", "https"} {
		if n := p.stderr.Count(`msg="accept failing, retrying" proto=` + proto); n != 1 {
			t.Errorf("%d WARN lines for the %s listener's accept errors in 3 s, want 1", n, proto)
		}
	}
	if !strings.Contains(p.stderr.String(), "too many open files") {
		t.Errorf("the WARN line does not give the cause:\n%s", grep(p.stderr.String(), "accept failing"))
	}
	freed := time.Now()
	for _, c := range conns {
		c.Close()
	}
	conns = nil
	p.waitLog(`msg="accepting again" proto=tcp`, 1)
	p.waitLog(`msg="accepting again" proto=https`, 1)
	r, err := query(t, "tcp", addr, "web.example.internal", dns.TypeA)
	if err != nil || dnstest.RData(r) != "NOERROR:10.0.0.7" {
		t.Fatalf("DNS over TCP after the descriptors came back: %v %v", r, err)
	}
	t.Logf("FAULT fd-exhaustion recovery=%v (descriptors freed to a TCP answer)", time.Since(freed).Round(time.Millisecond))
	p.stop(syscall.SIGTERM)
}
