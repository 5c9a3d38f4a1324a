package forward

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dnsd/dnsd/internal/testpki"

	"github.com/miekg/dns"

	"github.com/dnsd/dnsd/pipeline"
)

// upstreamServer is a real miekg/dns server on loopback (UDP and TCP on
// one port, or DNS over TLS) whose behaviour a test changes at will.
type upstreamServer struct {
	t    testing.TB
	Addr string

	mu     sync.Mutex
	rcode  int           // response code of every answer
	delay  time.Duration // before answering
	ttl    uint32
	ip     string // A record data
	tc     bool   // UDP answers: TC=1, no records
	silent bool   // read queries, never answer (a black hole)
	noEDNS bool   // answer queries with an OPT FORMERR (no OPT), like a pre-EDNS server
	soaMin uint32 // NXDOMAIN answers' SOA minimum

	udpN, tcpN atomic.Int64 // queries answered or swallowed, probes excluded
	probes     atomic.Int64 // ". IN NS" health probes
	conns      atomic.Int64 // TCP/TLS connections accepted
	lastDO     atomic.Bool
	lastCD     atomic.Bool
	names      sync.Map // name -> *atomic.Int64

	servers []*dns.Server
}

func (u *upstreamServer) set(f func(u *upstreamServer)) {
	u.mu.Lock()
	defer u.mu.Unlock()
	f(u)
}

func (u *upstreamServer) queries() int64 { return u.udpN.Load() + u.tcpN.Load() }

func (u *upstreamServer) count(name string) int64 {
	if v, ok := u.names.Load(name); ok {
		return v.(*atomic.Int64).Load()
	}
	return 0
}

func (u *upstreamServer) handle(w dns.ResponseWriter, r *dns.Msg) {
	q := r.Question[0]
	name := strings.ToLower(q.Name)
	if strings.HasPrefix(name, loopPrefix) {
		w.WriteMsg(new(dns.Msg).SetRcode(r, dns.RcodeNameError))
		return
	}
	if name == "." && q.Qtype == dns.TypeNS {
		u.probes.Add(1)
	} else {
		if w.LocalAddr().Network() == "udp" {
			u.udpN.Add(1)
		} else {
			u.tcpN.Add(1)
		}
		v, _ := u.names.LoadOrStore(name, new(atomic.Int64))
		v.(*atomic.Int64).Add(1)
	}
	if o := r.IsEdns0(); o != nil {
		u.lastDO.Store(o.Do())
	} else {
		u.lastDO.Store(false)
	}
	u.lastCD.Store(r.CheckingDisabled)
	u.mu.Lock()
	rcode, delay, ttl, ip, tc, silent, soaMin, noEDNS := u.rcode, u.delay, u.ttl, u.ip, u.tc, u.silent, u.soaMin, u.noEDNS
	u.mu.Unlock()
	if silent {
		return
	}
	if noEDNS && r.IsEdns0() != nil {
		_ = w.WriteMsg(new(dns.Msg).SetRcode(r, dns.RcodeFormatError))
		return
	}
	time.Sleep(delay)
	m := new(dns.Msg)
	m.SetReply(r)
	m.RecursionAvailable = true
	m.Rcode = rcode
	switch {
	case tc && w.LocalAddr().Network() == "udp":
		m.Truncated = true
	case rcode != dns.RcodeSuccess:
	case strings.HasPrefix(name, "nx."):
		m.Rcode = dns.RcodeNameError
		m.Ns = append(m.Ns, &dns.SOA{Hdr: dns.RR_Header{Name: "test.", Rrtype: dns.TypeSOA, Ttl: 3600},
			Ns: "ns.test.", Mbox: "h.test.", Serial: 1, Refresh: 1, Retry: 1, Expire: 1, Minttl: soaMin})
	case q.Qtype == dns.TypeA:
		m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Ttl: ttl}, A: net.ParseIP(ip)})
	case q.Qtype == dns.TypeNS:
		m.Answer = append(m.Answer, &dns.NS{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeNS, Ttl: ttl}, Ns: "a.root-servers.net."})
	case q.Qtype == dns.TypeTXT: // a large answer: 40 records
		for i := 0; i < 40; i++ {
			m.Answer = append(m.Answer, &dns.TXT{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeTXT, Ttl: ttl}, Txt: []string{strings.Repeat("x", 60)}})
		}
	}
	if o := r.IsEdns0(); o != nil {
		m.SetEdns0(4096, o.Do())
	}
	_ = w.WriteMsg(m)
}

// countingListener counts accepted connections.
type countingListener struct {
	net.Listener
	n *atomic.Int64
}

func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.n.Add(1)
	}
	return c, err
}

func newUpstreamServer(t testing.TB) *upstreamServer {
	return &upstreamServer{t: t, ttl: 300, ip: "192.0.2.1", soaMin: 60}
}

// startUpstream serves UDP and TCP on one loopback port.
func startUpstream(t testing.TB) *upstreamServer {
	t.Helper()
	u := newUpstreamServer(t)
	var tl net.Listener
	var pc net.PacketConn
	for i := 0; ; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		p, err := net.ListenPacket("udp", l.Addr().String())
		if err == nil {
			tl, pc = l, p
			break
		}
		l.Close()
		if i > 50 {
			t.Fatal("no port free for UDP and TCP")
		}
	}
	u.Addr = tl.Addr().String()
	u.serve(&dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(u.handle)})
	u.serve(&dns.Server{Listener: countingListener{tl, &u.conns}, Handler: dns.HandlerFunc(u.handle)})
	return u
}

// startTLSUpstream serves DNS over TLS with a certificate for name (and
// 127.0.0.1) signed by a test CA, whose PEM file it returns.
func startTLSUpstream(t *testing.T, name string) (*upstreamServer, string) {
	t.Helper()
	caPEM, cert := testCA(t, name)
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, caPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	u := newUpstreamServer(t)
	l, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}})
	if err != nil {
		t.Fatal(err)
	}
	u.Addr = l.Addr().String()
	u.serve(&dns.Server{Listener: countingListener{l, &u.conns}, Net: "tcp-tls", Handler: dns.HandlerFunc(u.handle)})
	return u, caFile
}

func (u *upstreamServer) serve(s *dns.Server) {
	started := make(chan struct{})
	s.NotifyStartedFunc = func() { close(started) }
	go func() { _ = s.ActivateAndServe() }()
	<-started
	u.servers = append(u.servers, s)
	u.t.Cleanup(func() { _ = s.Shutdown() })
}

// stop closes the server's sockets: queries to it get ICMP port
// unreachable (UDP) or a refused connection (TCP).
func (u *upstreamServer) stop() {
	for _, s := range u.servers {
		_ = s.Shutdown()
	}
}

// blackHole is a UDP and TCP address that takes queries and connections
// and never answers.
func blackHole(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	pc, err := net.ListenPacket("udp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close(); pc.Close() })
	go func() {
		buf := make([]byte, 65535)
		for {
			if _, _, err := pc.ReadFrom(buf); err != nil {
				return
			}
		}
	}()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() })
		}
	}()
	return l.Addr().String()
}

// testCA returns a new CA's PEM and a server certificate it issued for
// name and 127.0.0.1.
func testCA(t *testing.T, name string) ([]byte, tls.Certificate) {
	t.Helper()
	ca, leaf := testpki.Server(t, name, "127.0.0.1")
	return ca.CertPEM, leaf.TLS
}

// fakeClock is a settable time source for the cache.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{t: time.Unix(1_700_000_000, 0)} }

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func poolOpts(ups ...string) PoolOptions {
	o := PoolOptions{Policy: PolicySequential, Timeout: 300 * time.Millisecond, HealthCheck: 50 * time.Millisecond, MaxFails: 2, MaxConcurrent: 100, UDPSize: 1232}
	for _, a := range ups {
		proto, addr, ok := strings.Cut(a, "://")
		if !ok {
			proto, addr = "udp", a
		}
		o.Upstreams = append(o.Upstreams, Upstream{Proto: proto, Addr: addr})
	}
	return o
}

func newPool(t *testing.T, o PoolOptions) *Pool {
	t.Helper()
	p, err := NewPool(o, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// testSource is a forward source over a new pool and a cache with a fake
// clock.
type testSource struct {
	*Source
	pool  *Pool
	cache *Cache
	clock *fakeClock
	met   *Metrics
}

func defaultCacheConfig() CacheConfig {
	return CacheConfig{Size: 1000, MaxTTL: time.Hour, NegativeTTL: 5 * time.Minute, ServeStale: time.Hour, Prefetch: true}
}

func newTestSource(t *testing.T, o PoolOptions, cc CacheConfig, except ...string) *testSource {
	t.Helper()
	met := NewMetrics(nil, nil)
	p, err := NewPool(o, met, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	clock := newFakeClock()
	c := NewCache(cc)
	c.now = func() int64 { return clock.now().UnixNano() }
	return &testSource{Source: NewSource(p, c, met, except, ".", 60*time.Second), pool: p, cache: c, clock: clock, met: met}
}

func (s *testSource) lookup(t *testing.T, name string, qtype uint16) pipeline.Result {
	t.Helper()
	return s.lookupFlags(t, name, qtype, false, false)
}

func (s *testSource) lookupFlags(t *testing.T, name string, qtype uint16, do, cd bool) pipeline.Result {
	t.Helper()
	return s.Lookup(context.Background(), &pipeline.Question{Name: name, Type: qtype, DO: do, CD: cd, Zone: "."})
}

// answerA renders an Answered result as "RCODE:ip/ttl,...".
func answerA(r pipeline.Result) string {
	if r.Status != pipeline.Answered {
		return fmt.Sprintf("status %d (%v)", r.Status, r.Err)
	}
	var parts []string
	for _, rr := range r.Msg.Answer {
		if a, ok := rr.(*dns.A); ok {
			parts = append(parts, fmt.Sprintf("%s/%d", a.A, a.Hdr.Ttl))
		}
	}
	return dns.RcodeToString[r.Msg.Rcode] + ":" + strings.Join(parts, ",")
}
