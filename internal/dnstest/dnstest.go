package dnstest

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// Upstream is a miekg/dns server on UDP and TCP of one loopback port.
type Upstream struct {
	Addr    string // 127.0.0.1:port; set by StartUpstream, never ""
	n       atomic.Int64
	servers []*dns.Server
}

// DefaultAnswer is the handler of StartUpstream(t, nil): A queries get
// 192.0.2.1 (TTL 1 for names starting with "short.", else 300), TXT
// queries twenty 50-byte strings (larger than 512 bytes), anything else
// NOERROR without records.
func DefaultAnswer(w dns.ResponseWriter, r *dns.Msg) {
	q := r.Question[0]
	m := new(dns.Msg)
	m.SetReply(r)
	m.RecursionAvailable = true
	switch q.Qtype {
	case dns.TypeA:
		ttl := uint32(300)
		if strings.HasPrefix(q.Name, "short.") {
			ttl = 1
		}
		m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: ttl}, A: net.ParseIP("192.0.2.1")})
	case dns.TypeTXT:
		for range 20 {
			m.Answer = append(m.Answer, &dns.TXT{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeTXT, Class: dns.ClassINET, Ttl: 300}, Txt: []string{strings.Repeat("x", 50)}})
		}
	}
	_ = w.WriteMsg(m)
}

// StartUpstream starts an upstream answering with h (nil: DefaultAnswer)
// on a free loopback port; it stops when the test ends. Queries counts
// every query except dnsd's own health probes (". NS") and forwarding
// loop probes (names starting with "dnsd-loop-").
func StartUpstream(t testing.TB, h dns.HandlerFunc) *Upstream {
	t.Helper()
	if h == nil {
		h = DefaultAnswer
	}
	u := &Upstream{}
	counted := func(w dns.ResponseWriter, r *dns.Msg) {
		if q := r.Question; len(q) == 1 && !strings.HasPrefix(q[0].Name, "dnsd-loop-") && q[0].Name != "." {
			u.n.Add(1)
		}
		h(w, r)
	}
	// One port for both: bind TCP on :0, then UDP on the same port
	// (retried: the UDP port may be taken).
	for attempt := 0; ; attempt++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		pc, err := net.ListenPacket("udp", l.Addr().String())
		if err != nil {
			l.Close()
			if attempt < 20 {
				continue
			}
			t.Fatal(err)
		}
		u.Addr = l.Addr().String()
		u.servers = []*dns.Server{
			{Listener: l, Handler: dns.HandlerFunc(counted)},
			{PacketConn: pc, Handler: dns.HandlerFunc(counted)},
		}
		break
	}
	for _, s := range u.servers {
		started := make(chan struct{})
		s.NotifyStartedFunc = func() { close(started) }
		go func() { _ = s.ActivateAndServe() }()
		select {
		case <-started:
		case <-time.After(5 * time.Second):
			t.Fatalf("upstream %s did not start", u.Addr)
		}
	}
	t.Cleanup(u.Stop)
	return u
}

// Queries reports how many queries the upstream was asked (see
// StartUpstream for what is not counted).
func (u *Upstream) Queries() int64 { return u.n.Load() }

// Stop shuts the upstream down (its port stops answering).
func (u *Upstream) Stop() {
	for _, s := range u.servers {
		_ = s.Shutdown()
	}
}

// Query returns a query for name and qtype with RD set.
func Query(name string, qtype uint16) *dns.Msg {
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), qtype)
	return m
}

// Timeout is how long a Client waits for an answer unless told otherwise.
const Timeout = 5 * time.Second

// Client asks over one transport.
type Client struct {
	// Net is "udp" (also when empty), "tcp", "tcp-tls" (DNS over TLS) or
	// "https" (DNS over HTTPS: a POST to the URL given as the address).
	Net string
	// TLS is the TLS configuration of "tcp-tls" and "https"; nil accepts
	// any certificate.
	TLS *tls.Config
	// Timeout bounds the whole exchange; zero is Timeout.
	Timeout time.Duration
}

// Exchange sends m to addr and returns the answer.
func (c Client) Exchange(m *dns.Msg, addr string) (*dns.Msg, error) {
	timeout := c.Timeout
	if timeout == 0 {
		timeout = Timeout
	}
	conf := c.TLS
	if conf == nil && (c.Net == "tcp-tls" || c.Net == "https") {
		conf = &tls.Config{InsecureSkipVerify: true}
	}
	if c.Net == "https" {
		return exchangeDoH(m, addr, conf, timeout)
	}
	dc := &dns.Client{Net: c.Net, Timeout: timeout, UDPSize: 65535, TLSConfig: conf}
	r, _, err := dc.Exchange(m, addr)
	if err != nil {
		return nil, fmt.Errorf("%s %s %v: %w", c.netName(), addr, m.Question, err)
	}
	return r, nil
}

// MustExchange is Exchange that ends the test on an error.
func (c Client) MustExchange(t testing.TB, m *dns.Msg, addr string) *dns.Msg {
	t.Helper()
	r, err := c.Exchange(m, addr)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func (c Client) netName() string {
	if c.Net == "" {
		return "udp"
	}
	return c.Net
}

// exchangeDoH POSTs m to url as application/dns-message (RFC 8484), over
// HTTP/2 when the server offers it.
func exchangeDoH(m *dns.Msg, url string, conf *tls.Config, timeout time.Duration) (*dns.Msg, error) {
	wire, err := m.Pack()
	if err != nil {
		return nil, fmt.Errorf("packing %v: %w", m.Question, err)
	}
	tr := &http.Transport{TLSClientConfig: conf, ForceAttemptHTTP2: true}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Timeout: timeout, Transport: tr}
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(wire))
	if err != nil {
		return nil, fmt.Errorf("https %s: %w", url, err)
	}
	req.Header.Set("Content-Type", "application/dns-message")
	req.Header.Set("Accept", "application/dns-message")
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("https %s %v: %w", url, m.Question, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("https %s %v: reading the answer: %w", url, m.Question, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("https %s %v: HTTP %d %q", url, m.Question, resp.StatusCode, body)
	}
	r := new(dns.Msg)
	if err := r.Unpack(body); err != nil {
		return nil, fmt.Errorf("https %s %v: unpacking the answer: %w", url, m.Question, err)
	}
	return r, nil
}

// Exchange sends m to addr over netw (see Client.Net) and returns the
// answer; a failure ends the test.
func Exchange(t testing.TB, netw, addr string, m *dns.Msg) *dns.Msg {
	t.Helper()
	return Client{Net: netw}.MustExchange(t, m, addr)
}

// MustRR parses one record in zone-file form; a bad one ends the test.
func MustRR(t testing.TB, s string) dns.RR {
	t.Helper()
	rr, err := dns.NewRR(s)
	if err != nil || rr == nil {
		t.Fatalf("bad test record %q: %v", s, err)
	}
	return rr
}

// Ask sends a UDP query for name and qtype to addr.
func Ask(t testing.TB, addr, name string, qtype uint16) *dns.Msg {
	t.Helper()
	return Exchange(t, "udp", addr, Query(name, qtype))
}

// RData renders an answer as "RCODE:rdata,rdata" (answer section, in
// order), the form tests compare: "NOERROR:10.0.0.1", "NXDOMAIN:".
func RData(r *dns.Msg) string {
	parts := make([]string, 0, len(r.Answer))
	for _, rr := range r.Answer {
		f := strings.Fields(rr.String())
		parts = append(parts, strings.Join(f[4:], " "))
	}
	return dns.RcodeToString[r.Rcode] + ":" + strings.Join(parts, ",")
}

// SOA returns the SOA of r's authority section, or nil.
func SOA(r *dns.Msg) *dns.SOA {
	for _, rr := range r.Ns {
		if s, ok := rr.(*dns.SOA); ok {
			return s
		}
	}
	return nil
}

// Eventually polls cond until it holds, and ends the test naming what
// did not happen when limit passes first. It polls every 5 ms at first,
// backing off to every 50 ms, so that a check that costs the process under
// test (a /metrics scrape) does not load it.
func Eventually(t testing.TB, what string, limit time.Duration, cond func() bool) {
	t.Helper()
	if !poll(limit, cond) {
		t.Fatalf("timed out after %s waiting for %s", limit, what)
	}
}

// EventuallyNil polls check (as Eventually does) until it returns nil, and
// ends the test with its last error when limit passes first: the error
// says what was seen instead of what was wanted.
func EventuallyNil(t testing.TB, limit time.Duration, check func() error) {
	t.Helper()
	var err error
	if !poll(limit, func() bool { err = check(); return err == nil }) {
		t.Fatalf("after %s: %v", limit, err)
	}
}

// poll calls cond until it returns true (true) or limit has passed after
// a last call (false).
func poll(limit time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(limit)
	for wait := 5 * time.Millisecond; ; wait = min(2*wait, 50*time.Millisecond) {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(wait)
	}
}

// Secondary is a UDP server that stands for a zone's secondary: it keeps
// the serial of every NOTIFY it gets (0 for a message that carries no
// SOA) and answers it, but for the first Drop ones, which it ignores. A
// message that is not a well-formed NOTIFY (opcode NOTIFY, one SOA
// question, AA) gets FORMERR.
type Secondary struct {
	Addr  string // 127.0.0.1:port; set by StartSecondary, never ""
	mu    sync.Mutex
	got   []uint32
	drop  int
	rcode int
}

// StartSecondary starts a Secondary on a free loopback port that ignores
// the first drop NOTIFYs; it stops when the test ends.
func StartSecondary(t testing.TB, drop int) *Secondary {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sec := &Secondary{Addr: pc.LocalAddr().String(), drop: drop}
	srv := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(sec.serve)}
	started := make(chan struct{})
	srv.NotifyStartedFunc = func() { close(started) }
	go func() { _ = srv.ActivateAndServe() }()
	<-started
	t.Cleanup(func() { _ = srv.Shutdown() })
	return sec
}

func (s *Secondary) serve(w dns.ResponseWriter, r *dns.Msg) {
	var serial uint32
	if len(r.Answer) == 1 {
		if soa, ok := r.Answer[0].(*dns.SOA); ok {
			serial = soa.Serial
		}
	}
	ok := r.Opcode == dns.OpcodeNotify && len(r.Question) == 1 && r.Question[0].Qtype == dns.TypeSOA && r.Authoritative
	s.mu.Lock()
	s.got = append(s.got, serial)
	dropIt := len(s.got) <= s.drop
	rcode := s.rcode
	s.mu.Unlock()
	if dropIt {
		return
	}
	m := new(dns.Msg)
	m.SetReply(r)
	if !ok {
		m.Rcode = dns.RcodeFormatError
	}
	if rcode != 0 {
		m.Rcode = rcode
	}
	_ = w.WriteMsg(m)
}

// Refuse makes the secondary answer every NOTIFY from now on with rcode,
// unsigned, as one that refuses it does.
func (s *Secondary) Refuse(rcode int) {
	s.mu.Lock()
	s.rcode = rcode
	s.mu.Unlock()
}

// Serials returns the serials of the NOTIFYs seen so far, in order.
func (s *Secondary) Serials() []uint32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]uint32(nil), s.got...)
}
