package server

import (
	"context"
	"crypto/tls"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/dnsd/dnsd/internal/testpki"

	"github.com/miekg/dns"

	"github.com/dnsd/dnsd/authority"
	"github.com/dnsd/dnsd/config"
	"github.com/dnsd/dnsd/pipeline"
)

// Store makes st the settings of a new generation with the resolver in
// place (tests that give settings without listening).
func (c *current) Store(st *settings) { g := c.gen(); c.p.Store(newGeneration(g.res, g.auth, st)) }

// fakeResolver answers every name with one A record (192.0.2.1), or runs fn.
type fakeResolver struct {
	fn    func(ctx context.Context, req *pipeline.Request) pipeline.Response
	mu    sync.Mutex
	names []string
	do    []bool
}

func (f *fakeResolver) Resolve(ctx context.Context, req *pipeline.Request) pipeline.Response {
	f.mu.Lock()
	f.names = append(f.names, req.Name)
	f.do = append(f.do, req.DO)
	f.mu.Unlock()
	if f.fn != nil {
		return f.fn(ctx, req)
	}
	return answerA(req, 1)
}

func (f *fakeResolver) calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.names...)
}

// answerA is an authoritative answer of n A records for req.Name.
func answerA(req *pipeline.Request, n int) pipeline.Response {
	m := new(dns.Msg)
	m.Authoritative = true
	for i := range n {
		m.Answer = append(m.Answer, &dns.A{
			Hdr: dns.RR_Header{Name: req.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60},
			A:   net.IPv4(192, 0, 2, byte(1+i%250)).To4(),
		})
	}
	return pipeline.Response{Msg: m, Zone: "example.test.", Source: "fake"}
}

// recorder is an Observer that keeps every Observation and TCP rejection.
type recorder struct {
	mu        sync.Mutex
	obs       []Observation
	rejected  map[string]int
	transfers map[string]int // "zone result"
	updates   map[string]int // "zone result"
}

func (r *recorder) Update(zone, result string, _ bool, _ time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.updates == nil {
		r.updates = map[string]int{}
	}
	r.updates[zone+" "+result]++
}

func (r *recorder) Transfer(zone, result string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.transfers == nil {
		r.transfers = map[string]int{}
	}
	r.transfers[zone+" "+result]++
}

func (r *recorder) TCPRejected(reason string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.rejected == nil {
		r.rejected = map[string]int{}
	}
	r.rejected[reason]++
}

func (r *recorder) rejections(reason string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.rejected[reason]
}

func (r *recorder) Observe(o Observation) {
	r.mu.Lock()
	r.obs = append(r.obs, o)
	r.mu.Unlock()
}

func (r *recorder) all() []Observation {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Observation(nil), r.obs...)
}

func (r *recorder) last(t *testing.T) Observation {
	t.Helper()
	all := r.all()
	if len(all) == 0 {
		t.Fatal("no observation recorded")
	}
	return all[len(all)-1]
}

type testServer struct {
	*Server
	res *fakeResolver
	rec *recorder
}

// startServer starts a server on the given listen entries and stops it at
// the end of the test.
func startServer(t *testing.T, res *fakeResolver, listen []config.Listen, set Settings) *testServer {
	t.Helper()
	if res == nil {
		res = &fakeResolver{}
	}
	rec := &recorder{}
	s := New(Options{Resolver: res, Observer: rec})
	serveForTest(t, s, listen, set)
	return &testServer{Server: s, res: res, rec: rec}
}

// serveForTest applies listen and set to s and shuts it down at the end
// of the test or benchmark.
func serveForTest(tb testing.TB, s *Server, listen []config.Listen, set Settings) {
	tb.Helper()
	if err := s.Apply(context.Background(), listen, set); err != nil {
		tb.Fatalf("Apply: %v", err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			tb.Errorf("Shutdown: %v", err)
		}
	})
}

func loopbackUDPTCP() []config.Listen { return []config.Listen{{Addr: "127.0.0.1:0"}} }

// addr returns the first bound address of kind "udp" or "tcp" (tcp also
// matches tls listeners).
func (ts *testServer) addr(t *testing.T, kind string) string {
	t.Helper()
	for _, a := range ts.Addrs() {
		switch a.(type) {
		case *net.UDPAddr:
			if kind == "udp" {
				return a.String()
			}
		case *net.TCPAddr:
			if kind == "tcp" {
				return a.String()
			}
		}
	}
	t.Fatalf("no %s address in %v", kind, ts.Addrs())
	return ""
}

func query(name string, qtype uint16) *dns.Msg {
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	return m
}

// rawUDP sends b and returns the reply bytes.
func rawUDP(t *testing.T, addr string, b []byte) []byte {
	t.Helper()
	c, err := net.Dial("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write(b); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 65535)
	n, err := c.Read(buf)
	if err != nil {
		t.Fatalf("read reply: %v", err)
	}
	return buf[:n]
}

// selfSigned returns a server TLS config and a client config trusting it.
func selfSigned(t testing.TB) (server, client *tls.Config) {
	t.Helper()
	ca, leaf := testpki.Server(t, "dns.test", "127.0.0.1")
	server = &tls.Config{Certificates: []tls.Certificate{leaf.TLS}, MinVersion: tls.VersionTLS12}
	client = &tls.Config{RootCAs: ca.Pool(), ServerName: "dns.test", MinVersion: tls.VersionTLS12}
	return server, client
}

func mustAddr(s string) netip.Addr { return netip.MustParseAddr(s) }

func netipFrom4(b [4]byte) netip.Addr { return netip.AddrFrom4(b) }

// zonesOf compiles specs for p's zones (the daemon's per-generation
// authority.Zones).
func zonesOf(t *testing.T, p *pipeline.Pipeline, specs ...authority.TransferSpec) *authority.Zones {
	t.Helper()
	a, err := authority.New(p, authority.Options{Transfers: specs})
	if err != nil {
		t.Fatal(err)
	}
	return a
}
