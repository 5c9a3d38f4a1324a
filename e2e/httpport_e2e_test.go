package e2e

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/dnsd/dnsd/internal/dnstest"
)

// The HTTP port closes idle keep-alive connections after its idle timeout
// (10 s) and keeps at most 64 open: one over the cap is closed at once,
// and DNS over TCP and UDP keeps answering throughout (monitoring that
// never closes its connections once took every file descriptor).
func TestHTTPPortIdleTimeoutAndCap(t *testing.T) {
	const (
		idle    = 10 * time.Second
		maxOpen = 64
	)
	s := startYAML(t, "listen: [\"LISTEN\"]\nhttp: \"HTTP\"\nzones:\n  example.internal:\n    - hosts: {entries: [\"10.0.0.7 web\"]}\n", nil)
	hostport := fmt.Sprintf("127.0.0.1:%d", s.hport)
	// get sends GET /health on c and reads the answer.
	get := func(c net.Conn, br *bufio.Reader) error {
		_ = c.SetDeadline(time.Now().Add(3 * time.Second))
		if _, err := io.WriteString(c, "GET /health HTTP/1.1\r\nHost: "+hostport+"\r\n\r\n"); err != nil {
			return err
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			return fmt.Errorf("HTTP %d", resp.StatusCode)
		}
		return nil
	}
	type kept struct {
		c    net.Conn
		br   *bufio.Reader
		used time.Time
	}
	var conns []kept
	t.Cleanup(func() {
		for _, k := range conns {
			k.c.Close()
		}
	})
	for i := range maxOpen {
		c, err := net.Dial("tcp", hostport)
		if err != nil {
			t.Fatal(err)
		}
		k := kept{c: c, br: bufio.NewReader(c)}
		if err := get(c, k.br); err != nil {
			t.Fatalf("connection %d of %d: %v", i+1, maxOpen, err)
		}
		k.used = time.Now()
		conns = append(conns, k)
	}
	// Over the cap: closed without an answer.
	for i := range 5 {
		c, err := net.Dial("tcp", hostport)
		if err != nil {
			continue // refused is fine too
		}
		err = get(c, bufio.NewReader(c))
		c.Close()
		if err == nil {
			t.Fatalf("connection %d over the cap of %d was answered", i+1, maxOpen)
		}
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Fatalf("connection %d over the cap was left open (no answer, no close)", i+1)
		}
	}
	s.waitLog("http connections at their cap", 1)
	for _, netw := range []string{"tcp", "udp"} {
		r, err := query(t, netw, s.addr, "web.example.internal", dns.TypeA)
		if err != nil || dnstest.RData(r) != "NOERROR:10.0.0.7" {
			t.Fatalf("DNS over %s with the HTTP port full: %v %v", netw, r, err)
		}
	}
	// The idle ones close after the idle timeout, not before.
	for i, k := range conns {
		_ = k.c.SetReadDeadline(k.used.Add(idle + 10*time.Second))
		_, err := k.br.ReadByte()
		closed := time.Since(k.used)
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Fatalf("idle connection %d still open %v after its last answer", i+1, closed.Round(time.Millisecond))
		}
		if closed < idle-time.Second {
			t.Fatalf("idle connection %d closed %v after its last answer, before the idle timeout (%v): %v", i+1, closed.Round(time.Millisecond), idle, err)
		}
	}
	// Room again.
	c, err := net.Dial("tcp", hostport)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := get(c, bufio.NewReader(c)); err != nil {
		t.Fatalf("a connection after the idle ones closed: %v", err)
	}
	s.waitLog("http connections under their cap again", 1)
}

// POST /cache/flush refuses what a web page could send from a browser:
// another Origin than the listener's own, and a content type other than
// application/json (or a body without one). curl and scripts that send no
// body, or JSON, are served.
func TestHTTPPortFlushRefusesCrossOrigin(t *testing.T) {
	up := dnstest.StartUpstream(t, nil)
	s := startYAML(t, fmt.Sprintf("listen: [\"LISTEN\"]\nhttp: \"HTTP\"\nzones:\n  .:\n    - forward: {upstreams: [%q]}\n", up.Addr), nil)
	waitAnswer(t, s.addr, "example.com", dns.TypeA, "NOERROR:192.0.2.1")
	post := func(headers map[string]string, body string) (int, string) {
		t.Helper()
		var rd io.Reader
		if body != "" {
			rd = strings.NewReader(body)
		}
		req, _ := http.NewRequest("POST", s.base+"/cache/flush?name=example.com", rd)
		for k, v := range headers {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, strings.TrimSpace(string(b))
	}
	own := s.base
	for _, c := range []struct {
		what    string
		headers map[string]string
		body    string
		refused string // in the 403's message; "" when served
	}{
		{"a page elsewhere", map[string]string{"Origin": "http://evil.example"}, "", "cross-origin"},
		{"a DNS-rebound name on the port", map[string]string{"Origin": fmt.Sprintf("http://rebound.example:%d", s.hport)}, "", "cross-origin"},
		{"another port of the host", map[string]string{"Origin": "http://127.0.0.1:1"}, "", "cross-origin"},
		{"https on the address", map[string]string{"Origin": strings.Replace(own, "http:", "https:", 1)}, "", "cross-origin"},
		{"a sandboxed page", map[string]string{"Origin": "null"}, "", "cross-origin"},
		{"a form", map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, "a=b", "content type"},
		{"a multipart form", map[string]string{"Content-Type": "multipart/form-data; boundary=x"}, "--x--", "content type"},
		{"text", map[string]string{"Content-Type": "text/plain"}, "{}", "content type"},
		{"text without a body", map[string]string{"Content-Type": "text/plain"}, "", "content type"},
		{"a body without a content type", nil, "{}", "Content-Type: application/json"},
		{"JSON from another origin", map[string]string{"Origin": "http://evil.example", "Content-Type": "application/json"}, "{}", "cross-origin"},
	} {
		if code, msg := post(c.headers, c.body); code != http.StatusForbidden || !strings.Contains(msg, c.refused) {
			t.Errorf("%s: HTTP %d %q, want 403 saying %q", c.what, code, msg, c.refused)
		}
	}
	if v := metricValue(scrape(t, s.base), "dnsd_cache_entries", ""); v != 1 {
		t.Fatalf("dnsd_cache_entries = %v after refused flushes, want 1", v)
	}
	for _, c := range []struct {
		what    string
		headers map[string]string
		body    string
	}{
		{"curl -X POST", nil, ""},
		{"an empty content type", map[string]string{"Content-Type": ""}, ""},
		{"JSON", map[string]string{"Content-Type": "application/json"}, "{}"},
		{"JSON with a charset", map[string]string{"Content-Type": "Application/JSON; charset=utf-8"}, "{}"},
		{"the listener's own origin", map[string]string{"Origin": own}, ""},
		{"localhost on a loopback listener", map[string]string{"Origin": fmt.Sprintf("http://localhost:%d", s.hport)}, ""},
	} {
		waitAnswer(t, s.addr, "example.com", dns.TypeA, "NOERROR:192.0.2.1")
		if code, msg := post(c.headers, c.body); code != 200 || msg != `{"removed": 1}` {
			t.Errorf("%s: HTTP %d %q, want 200 {\"removed\": 1}", c.what, code, msg)
		}
	}
}
