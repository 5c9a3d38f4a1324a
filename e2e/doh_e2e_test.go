package e2e

import (
	"bytes"
	"crypto/tls"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/dnsd/dnsd/internal/dnstest"
	"github.com/dnsd/dnsd/internal/testpki"
)

// DNS over HTTPS through the binary: GET and POST over HTTP/2 and
// HTTP/1.1 give what dig gets over UDP; the HTTP errors are what HTTP
// wants; the ACL answers REFUSED inside a 200; curl and kdig (when
// installed) get the same answers.
func TestDoHListener(t *testing.T) {
	dir := t.TempDir()
	ca, leaf := testpki.Server(t, "127.0.0.1", "localhost")
	writeFile(t, filepath.Join(dir, "tls.crt"), string(leaf.CertPEM))
	writeFile(t, filepath.Join(dir, "tls.key"), string(leaf.KeyPEM))
	writeFile(t, filepath.Join(dir, "ca.crt"), string(ca.CertPEM))
	udp, hport, dohPort := freePort(t), freePort(t), freePort(t)
	writeFile(t, filepath.Join(dir, "dnsd.yaml"), fmt.Sprintf(`listen: ["127.0.0.1:%d", "https://127.0.0.1:%d"]
http: "127.0.0.1:%d"
tls: {cert: tls.crt, key: tls.key}
acl: {allow: [127.0.0.1/32]}
limits: {rate_per_client: 1, tcp_idle_timeout: 2s} # rate: UDP only; DoH, as TCP, is never rate-limited
zones:
  example.internal:
    - hosts: {entries: ["10.0.0.7 web", "10.0.0.8 web"], ttl: 90s}
`, udp, dohPort, hport))
	p := startDnsd(t, dir)
	p.waitLog("dnsd started", 1)
	url := fmt.Sprintf("https://127.0.0.1:%d/dns-query", dohPort)
	want := dnstest.RData(dnstest.Ask(t, fmt.Sprintf("127.0.0.1:%d", udp), "web.example.internal.", dns.TypeA))
	if want != "NOERROR:10.0.0.7,10.0.0.8" {
		t.Fatalf("UDP answer %q", want)
	}
	q := new(dns.Msg)
	q.SetQuestion("web.example.internal.", dns.TypeA)
	q.Id = 0 // RFC 8484 §4.1: GETs use ID 0 to be cache friendly
	wire, _ := q.Pack()

	tlsConf := &tls.Config{RootCAs: ca.Pool(), ServerName: "127.0.0.1"}
	var only2 http.Protocols
	only2.SetHTTP2(true)
	// Each transport its own config: an HTTP/2 transport adds "h2" to the
	// NextProtos of the config it is given.
	h2 := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsConf.Clone(), Protocols: &only2}}
	h1 := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsConf, TLSNextProto: map[string]func(string, *tls.Conn) http.RoundTripper{}}}
	for name, c := range map[string]*http.Client{"HTTP/2": h2, "HTTP/1.1": h1} {
		for _, method := range []string{"GET", "POST"} {
			var req *http.Request
			if method == "GET" {
				req, _ = http.NewRequest("GET", url+"?dns="+base64.RawURLEncoding.EncodeToString(wire), nil)
			} else {
				req, _ = http.NewRequest("POST", url, bytes.NewReader(wire))
				req.Header.Set("Content-Type", "application/dns-message")
			}
			req.Header.Set("Accept", "application/dns-message")
			resp, err := c.Do(req)
			if err != nil {
				t.Fatalf("%s %s: %v", name, method, err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			r := new(dns.Msg)
			if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/dns-message" || r.Unpack(body) != nil {
				t.Fatalf("%s %s: %d %s %q", name, method, resp.StatusCode, resp.Header.Get("Content-Type"), body)
			}
			if wantProto := map[string]int{"HTTP/2": 2, "HTTP/1.1": 1}[name]; resp.ProtoMajor != wantProto {
				t.Errorf("%s %s: served over HTTP/%d", name, method, resp.ProtoMajor)
			}
			if got := dnstest.RData(r); got != want {
				t.Errorf("%s %s: %s, want %s as over UDP", name, method, got, want)
			}
			if cc := resp.Header.Get("Cache-Control"); cc != "max-age=90" {
				t.Errorf("%s %s: Cache-Control %q, want max-age=90", name, method, cc)
			}
		}
	}

	// HTTP's own errors.
	do := func(method, u, ctype string, body []byte) int {
		req, _ := http.NewRequest(method, u, bytes.NewReader(body))
		if ctype != "" {
			req.Header.Set("Content-Type", ctype)
		}
		resp, err := h2.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, u, err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, c := range []struct {
		what         string
		method, u, t string
		body         []byte
		want         int
	}{
		{"POST with another content type", "POST", url, "text/plain", wire, http.StatusUnsupportedMediaType},
		{"POST with the media type in capitals and a parameter", "POST", url, "Application/DNS-Message; charset=binary", wire, http.StatusOK},
		{"PUT", "PUT", url, "application/dns-message", wire, http.StatusMethodNotAllowed},
		{"another path", "GET", strings.Replace(url, "/dns-query", "/other", 1), "", nil, http.StatusNotFound},
		{"GET without dns", "GET", url, "", nil, http.StatusBadRequest},
		{"GET with bad base64", "GET", url + "?dns=!!!", "", nil, http.StatusBadRequest},
		{"POST of garbage", "POST", url, "application/dns-message", []byte{1, 2, 3}, http.StatusBadRequest},
		{"POST over 64 KiB", "POST", url, "application/dns-message", make([]byte, 70000), http.StatusRequestEntityTooLarge},
	} {
		if got := do(c.method, c.u, c.t, c.body); got != c.want {
			t.Errorf("%s: HTTP %d, want %d", c.what, got, c.want)
		}
	}

	// A body that stops coming: 408 once the idle timeout has passed (it
	// was 413, "too large").
	pr, pw := io.Pipe()
	go func() { _, _ = pw.Write(wire[:10]) }() // and no more
	slowReq, _ := http.NewRequest("POST", url, pr)
	slowReq.ContentLength = 1000
	slowReq.Header.Set("Content-Type", "application/dns-message")
	if resp, err := h2.Do(slowReq); err != nil {
		t.Errorf("a POST whose body stops: %v, want HTTP 408", err)
	} else {
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestTimeout {
			t.Errorf("a POST whose body stops: HTTP %d, want 408", resp.StatusCode)
		}
	}
	pw.Close()

	// A client the ACL refuses: 200 with a REFUSED message.
	refusedClient := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsConf.Clone(), Protocols: &only2,
		DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}).DialContext}}
	req, _ := http.NewRequest("POST", url, bytes.NewReader(wire))
	req.Header.Set("Content-Type", "application/dns-message")
	resp, err := refusedClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	r := new(dns.Msg)
	if resp.StatusCode != 200 || r.Unpack(body) != nil || r.Rcode != dns.RcodeRefused {
		t.Errorf("refused client: HTTP %d, %v; want 200 with REFUSED", resp.StatusCode, r)
	}
	metrics := scrape(t, fmt.Sprintf("http://127.0.0.1:%d", hport))
	if !strings.Contains(metrics, `proto="https"`) {
		t.Errorf("no proto=\"https\" series:\n%s", grep(metrics, "dnsd_requests_total"))
	}

	// Real DoH clients: curl (HTTP/2), kdig +https.
	if _, err := exec.LookPath("curl"); err == nil {
		cmd := exec.Command("curl", "-s", "--cacert", filepath.Join(dir, "ca.crt"), "--http2", "-H", "Content-Type: application/dns-message", "--data-binary", "@-", url)
		cmd.Stdin = bytes.NewReader(wire)
		out, err := cmd.Output()
		if err != nil {
			t.Errorf("curl: %v", err)
		} else if r := new(dns.Msg); r.Unpack(out) != nil || dnstest.RData(r) != want {
			t.Errorf("curl got %v, want %s", r, want)
		}
	}
	kdig, err := exec.LookPath("kdig")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("kdig (knot-dnsutils) is not installed; scripts/ci-deps.sh installs it")
		}
		t.Log("kdig not installed: skipping the kdig +https check")
	} else {
		out, err := exec.Command(kdig, "@127.0.0.1", "-p", fmt.Sprint(dohPort), "+https", "+tls-ca="+filepath.Join(dir, "ca.crt"), "+tls-hostname=localhost", "+short", "web.example.internal", "A").CombinedOutput()
		if err != nil || strings.Join(strings.Fields(string(out)), ",") != "10.0.0.7,10.0.0.8" {
			t.Errorf("kdig +https: %v\n%s", err, out)
		}
	}
	p.stop(syscall.SIGTERM)
}

// dnsperf's DoH mode with ten queries in flight on one connection loses
// none: its client takes one answer from each TLS read, so dnsd sends
// each answer in TLS records of its own (HTTP/2 would allow more).
func TestDoHDnsperf(t *testing.T) {
	needTool(t, "dnsperf")
	dir := t.TempDir()
	_, leaf := testpki.Server(t, "127.0.0.1", "localhost")
	writeFile(t, filepath.Join(dir, "tls.crt"), string(leaf.CertPEM))
	writeFile(t, filepath.Join(dir, "tls.key"), string(leaf.KeyPEM))
	writeFile(t, filepath.Join(dir, "queries.txt"), "web.example.internal A\ndb.example.internal A\nweb.example.internal AAAA\nnone.example.internal A\n")
	udp, dohPort := freePort(t), freePort(t)
	writeFile(t, filepath.Join(dir, "dnsd.yaml"), fmt.Sprintf(`listen: ["127.0.0.1:%d", "https://127.0.0.1:%d"]
tls: {cert: tls.crt, key: tls.key}
zones:
  example.internal:
    - hosts: {entries: ["10.0.0.7 web", "10.0.0.8 db"]}
`, udp, dohPort))
	p := startDnsd(t, dir)
	p.waitLog("dnsd started", 1)
	for _, method := range []string{"GET", "POST"} {
		// 4 queries 100 times, 10 in flight, on one connection.
		cmd := exec.Command("dnsperf", "-m", "doh", "-O", "doh-method="+method, "-s", "127.0.0.1", "-p", fmt.Sprint(dohPort),
			"-d", filepath.Join(dir, "queries.txt"), "-c", "1", "-q", "10", "-n", "100", "-t", "5")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("dnsperf %s: %v\n%s", method, err, out)
		}
		sent, completed, lost := dnsperfCount(out, "Queries sent:"), dnsperfCount(out, "Queries completed:"), dnsperfCount(out, "Queries lost:")
		if sent != 400 || completed != 400 || lost != 0 {
			t.Errorf("dnsperf %s: %d sent, %d completed, %d lost; want 400, 400, 0\n%s", method, sent, completed, lost, out)
		}
	}
	p.stop(syscall.SIGTERM)
}

// dnsperfCount is the number after label in dnsperf's report, -1 if none.
func dnsperfCount(out []byte, label string) int {
	for line := range strings.Lines(string(out)) {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), label); ok {
			if f := strings.Fields(rest); len(f) > 0 {
				if n, err := strconv.Atoi(f[0]); err == nil {
					return n
				}
			}
		}
	}
	return -1
}

// A forward source with an https:// upstream, through two binaries: one
// dnsd serves DNS over HTTPS, the other forwards to it, verifying its
// certificate against tls_ca and the server name.
func TestDoHUpstreamThroughBinaries(t *testing.T) {
	dir := t.TempDir()
	ca, leaf := testpki.Server(t, "doh.example.test")
	writeFile(t, filepath.Join(dir, "tls.crt"), string(leaf.CertPEM))
	writeFile(t, filepath.Join(dir, "tls.key"), string(leaf.KeyPEM))
	writeFile(t, filepath.Join(dir, "ca.crt"), string(ca.CertPEM))
	dohPort := freePort(t)
	writeFile(t, filepath.Join(dir, "server.yaml"), fmt.Sprintf(`listen: ["https://127.0.0.1:%d"]
tls: {cert: tls.crt, key: tls.key}
zones:
  example.com:
    - hosts: {entries: ["203.0.113.7 www", "203.0.113.8 api"]}
`, dohPort))
	server := startDnsd(t, dir, "-config", "server.yaml")
	server.waitLog("dnsd started", 1)

	s := startYAML(t, fmt.Sprintf(`listen: ["LISTEN"]
http: "HTTP"
zones:
  .:
    - forward: {upstreams: ["https://127.0.0.1:%d/dns-query@doh.example.test"], tls_ca: %q}
`, dohPort, filepath.Join(dir, "ca.crt")), nil)
	waitAnswer(t, s.addr, "www.example.com", dns.TypeA, "NOERROR:203.0.113.7")
	metrics := scrape(t, s.base)
	label := fmt.Sprintf(`upstream="https://127.0.0.1:%d/dns-query@doh.example.test"`, dohPort)
	if !strings.Contains(metrics, "dnsd_forward_upstream_up{"+label+"} 1") {
		t.Errorf("upstream not reported up:\n%s", grep(metrics, "dnsd_forward_upstream_up"))
	}
	if !strings.Contains(grep(scrape(t, s.base), "dnsd_forward_requests_total"), label) {
		t.Errorf("no dnsd_forward_requests_total for the DoH upstream")
	}

	// The upstream's CA rotates: the server restarts with a certificate
	// of a new CA, tls_ca is rewritten in place, and a reload of the
	// forwarder (its dnsd.yaml unchanged) reads it again.
	server.stop(syscall.SIGTERM)
	ca2, leaf2 := testpki.Server(t, "doh.example.test")
	writeFile(t, filepath.Join(dir, "tls.crt"), string(leaf2.CertPEM))
	writeFile(t, filepath.Join(dir, "tls.key"), string(leaf2.KeyPEM))
	server = startDnsd(t, dir, "-config", "server.yaml")
	server.waitLog("dnsd started", 1)
	writeFile(t, filepath.Join(dir, "ca.crt"), string(ca2.CertPEM))
	s.reload(t, fmt.Sprintf(`listen: ["LISTEN"]
http: "HTTP"
zones:
  .:
    - forward: {upstreams: ["https://127.0.0.1:%d/dns-query@doh.example.test"], tls_ca: %q}
`, dohPort, filepath.Join(dir, "ca.crt")), true, 1)
	waitAnswer(t, s.addr, "api.example.com", dns.TypeA, "NOERROR:203.0.113.8")
	server.stop(syscall.SIGTERM)
	s.stop(syscall.SIGTERM)
}
