package server

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"io"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
	"golang.org/x/net/ipv4"

	"github.com/dnsd/dnsd/config"
	"github.com/dnsd/dnsd/pipeline"
)

// fixedResolver answers every query with the same prepared record, the
// cheapest possible pipeline, so the benchmark measures the server.
// fixedResolver answers every query with rr; with waits it first says it
// will wait (pipeline.Waiting), as a forward's cache miss does.
type fixedResolver struct {
	rr    []dns.RR
	waits bool
}

func (f *fixedResolver) Resolve(ctx context.Context, req *pipeline.Request) pipeline.Response {
	if f.waits {
		pipeline.Waiting(ctx)
	}
	m := &dns.Msg{Answer: f.rr}
	m.Authoritative = true
	return pipeline.Response{Msg: m, Zone: "example.test.", Source: "fixed"}
}

type nopObserver struct{}

func (nopObserver) Observe(Observation)                        {}
func (nopObserver) TCPRejected(string)                         {}
func (nopObserver) Transfer(string, string)                    {}
func (nopObserver) Update(string, string, bool, time.Duration) {}

// BenchmarkServeUDP measures bytes in → bytes out for one UDP query with
// EDNS0 (parse, checks, ACL, resolve, OPT, truncation check, pack).
func BenchmarkServeUDP(b *testing.B) {
	res := &fixedResolver{rr: []dns.RR{&dns.A{
		Hdr: dns.RR_Header{Name: "www.example.test.", Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60},
		A:   net.IPv4(192, 0, 2, 1).To4(),
	}}}
	s := New(Options{Resolver: res, Observer: nopObserver{}})
	s.set.Store(compile(Settings{ACL: config.ACL{Default: true}}))
	benchServe(b, s)
}

// benchServe answers www.example.test. A with EDNS0 through s's packet
// handler, bytes in to bytes out, b.N times.
func benchServe(b *testing.B, s *Server) {
	q := query("www.example.test.", dns.TypeA)
	q.SetEdns0(1232, false)
	in := pack(b, q)
	client := netip.MustParseAddr("127.0.0.1")
	sc := &scratch{}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if out := s.serveRaw(ctx, sc, protoUDP, client, true, in); len(out) == 0 {
			b.Fatal("no answer")
		}
		s.release(sc)
	}
}

// benchStreamServer starts a server with the fixed resolver on a loopback
// TCP or (tlsOn) DNS-over-TLS listener and returns a connection to it,
// its TLS handshake done.
func benchStreamServer(b *testing.B, tlsOn bool) net.Conn {
	return benchStreamServerWaits(b, tlsOn, false)
}

func benchStreamServerWaits(b *testing.B, tlsOn, waits bool) net.Conn {
	b.Helper()
	res := &fixedResolver{rr: []dns.RR{&dns.A{
		Hdr: dns.RR_Header{Name: "www.example.test.", Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60},
		A:   net.IPv4(192, 0, 2, 1).To4(),
	}}, waits: waits}
	s := New(Options{Resolver: res, Observer: nopObserver{}})
	listen := config.Listen{Proto: "tcp", Addr: "127.0.0.1:0"}
	set := Settings{ACL: config.ACL{Default: true}}
	var cliTLS *tls.Config
	if tlsOn {
		listen.Proto = "tls"
		set.TLS, cliTLS = selfSigned(b)
	}
	serveForTest(b, s, []config.Listen{listen}, set)
	var (
		c   net.Conn
		err error
	)
	if tlsOn {
		c, err = tls.Dial("tcp", s.Addrs()[0].String(), cliTLS)
	} else {
		c, err = net.Dial("tcp", s.Addrs()[0].String())
	}
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	return c
}

// BenchmarkServeTCP is one TCP connection with one query at a time (the
// common client): write a query, read its answer, over loopback.
func BenchmarkServeTCP(b *testing.B) { benchOneAtATime(b, benchStreamServer(b, false)) }

// BenchmarkServeTLS is the same over DNS over TLS.
func BenchmarkServeTLS(b *testing.B) { benchOneAtATime(b, benchStreamServer(b, true)) }

// BenchmarkServeTCPWaiting is BenchmarkServeTCP with a resolver that says
// it will wait before every answer (a forward's cache miss answered at
// once by its upstream): what relieving the reader costs a query.
func BenchmarkServeTCPWaiting(b *testing.B) {
	benchOneAtATime(b, benchStreamServerWaits(b, false, true))
}

func benchOneAtATime(b *testing.B, c net.Conn) {
	q := query("www.example.test.", dns.TypeA)
	q.SetEdns0(1232, false)
	m := pack(b, q)
	wire := append(binary.BigEndian.AppendUint16(nil, uint16(len(m))), m...)
	buf := make([]byte, 512)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Write(wire); err != nil {
			b.Fatal(err)
		}
		readTCPAnswer(b, c, buf)
	}
}

// BenchmarkServeTCPPipelined is one TCP connection with 16 queries
// written at once, then their 16 answers read (one op: one query).
func BenchmarkServeTCPPipelined(b *testing.B) { benchPipelined(b, benchStreamServer(b, false)) }

// BenchmarkServeTLSPipelined is the same over DNS over TLS (the 16
// queries in one TLS record).
func BenchmarkServeTLSPipelined(b *testing.B) { benchPipelined(b, benchStreamServer(b, true)) }

func benchPipelined(b *testing.B, c net.Conn) {
	const burst = 16
	var wire []byte
	for i := range burst {
		q := query("www.example.test.", dns.TypeA)
		q.Id = uint16(i)
		q.SetEdns0(1232, false)
		m := pack(b, q)
		wire = binary.BigEndian.AppendUint16(wire, uint16(len(m)))
		wire = append(wire, m...)
	}
	buf := make([]byte, 512)
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		if n%burst == 0 {
			if _, err := c.Write(wire); err != nil {
				b.Fatal(err)
			}
		}
		readTCPAnswer(b, c, buf)
		n++
	}
	for ; n%burst != 0; n++ { // drain the last burst
		readTCPAnswer(b, c, buf)
	}
}

func readTCPAnswer(b *testing.B, c net.Conn, buf []byte) {
	if _, err := io.ReadFull(c, buf[:2]); err != nil {
		b.Fatal(err)
	}
	n := int(binary.BigEndian.Uint16(buf))
	if _, err := io.ReadFull(c, buf[:n]); err != nil {
		b.Fatal(err)
	}
}

// benchUDPServer starts a server with the fixed resolver on a loopback UDP
// socket and returns its address.
func benchUDPServer(b *testing.B) string { return benchUDPServerWaits(b, false) }

// benchUDPServerWaits is benchUDPServer; with waits, its resolver says it
// will wait before every answer (see BenchmarkServeUDPBurstWaiting).
func benchUDPServerWaits(b *testing.B, waits bool) string {
	b.Helper()
	res := &fixedResolver{rr: []dns.RR{&dns.A{
		Hdr: dns.RR_Header{Name: "www.example.test.", Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60},
		A:   net.IPv4(192, 0, 2, 1).To4(),
	}}, waits: waits}
	s := New(Options{Resolver: res, Observer: nopObserver{}})
	serveForTest(b, s, []config.Listen{{Proto: "udp", Addr: "127.0.0.1:0"}}, Settings{ACL: config.ACL{Default: true}})
	return s.Addrs()[0].String()
}

// BenchmarkServeUDPLoopback is one UDP socket with one query at a time:
// write a query, read its answer, over loopback (client included).
func BenchmarkServeUDPLoopback(b *testing.B) {
	c, err := net.Dial("udp", benchUDPServer(b))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	q := query("www.example.test.", dns.TypeA)
	q.SetEdns0(1232, false)
	m := pack(b, q)
	buf := make([]byte, 512)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Write(m); err != nil {
			b.Fatal(err)
		}
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Read(buf); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkServeUDPBurst is 4 client sockets, each writing bursts of 32
// queries and then reading their 32 answers (one op: one query); the
// clients use sendmmsg/recvmmsg so that the server's share shows. The
// server reads the queries in batches and answers a batch together.
// Answers lost on the way are reported as lost/op (none expected).
func BenchmarkServeUDPBurst(b *testing.B) { benchUDPBurst(b, false) }

// BenchmarkServeUDPBurstWaiting is BenchmarkServeUDPBurst with a resolver
// that says it will wait before every answer, as a forward's cache miss
// does (answered at once, as by an upstream on the same host): every batch
// is taken over (a new reader, a goroutine per datagram not begun) and its
// replies go out one by one. What a cold cache costs beside the upstream.
func BenchmarkServeUDPBurstWaiting(b *testing.B) { benchUDPBurst(b, true) }

func benchUDPBurst(b *testing.B, waits bool) {
	const (
		clients = 4
		burst   = 32
	)
	addr := benchUDPServerWaits(b, waits)
	var conns [clients]*ipv4.PacketConn
	for i := range conns {
		c, err := net.Dial("udp", addr)
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		conns[i] = ipv4.NewPacketConn(c.(*net.UDPConn))
	}
	var wire [burst][]byte
	for i := range wire {
		q := query("www.example.test.", dns.TypeA)
		q.Id = uint16(i)
		q.SetEdns0(1232, false)
		wire[i] = pack(b, q)
	}
	var lost, next atomic.Int64
	bursts := int64(b.N+burst-1) / burst
	b.ReportAllocs()
	b.ResetTimer()
	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Go(func() {
			out := make([]ipv4.Message, burst)
			in := make([]ipv4.Message, burst)
			for i := range out {
				out[i].Buffers = [][]byte{wire[i]}
				in[i].Buffers = [][]byte{make([]byte, 512)}
			}
			for next.Add(1) <= bursts {
				for sent := 0; sent < burst; {
					n, err := c.WriteBatch(out[sent:], 0)
					if err != nil {
						b.Error(err)
						return
					}
					sent += n
				}
				for got := 0; got < burst; {
					_ = c.SetReadDeadline(time.Now().Add(time.Second))
					n, err := c.ReadBatch(in[:burst-got], 0)
					if err != nil {
						lost.Add(int64(burst - got))
						break
					}
					got += n
				}
			}
		})
	}
	wg.Wait()
	b.ReportMetric(float64(lost.Load())/float64(b.N), "lost/op")
}

// mapSource is a local source of prepared records by name that, like the
// real in-memory sources, allocates nothing to answer.
type mapSource map[string][]dns.RR

func (m mapSource) Lookup(_ context.Context, q *pipeline.Question) pipeline.Result {
	if rrs, ok := m[q.Name]; ok {
		return pipeline.Result{Status: pipeline.Found, RRs: rrs}
	}
	return pipeline.Result{Status: pipeline.NotMine}
}
func (mapSource) Kind() string   { return "hosts" }
func (mapSource) TTL() uint32    { return 60 }
func (mapSource) Serial() uint32 { return 1 }

// pipelineServer is a server answering from a real pipeline with one zone
// of one name, www.example.test.
func pipelineServer(tb testing.TB) *Server {
	tb.Helper()
	src := mapSource{"www.example.test.": {&dns.A{
		Hdr: dns.RR_Header{Name: "www.example.test.", Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60},
		A:   net.IPv4(192, 0, 2, 1).To4(),
	}}}
	p, err := pipeline.New([]pipeline.ZoneSpec{{Names: []string{"example.test."}, Sources: []pipeline.SourceEntry{{Source: src}}}}, pipeline.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	s := New(Options{Resolver: p, Observer: nopObserver{}})
	s.set.Store(compile(Settings{ACL: config.ACL{Default: true}}))
	return s
}

// TestServeAllocations: bytes in → real pipeline → bytes out allocates
// nothing for a hit, a NODATA and an NXDOMAIN (the resolver builds the
// response in the scratch's lent buffer, a negative answer's SOA is made
// once, the packed bytes go into a pooled buffer).
func TestServeAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts differ under the race detector")
	}
	s := pipelineServer(t)
	client := netip.MustParseAddr("127.0.0.1")
	sc := &scratch{}
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		qtype uint16
		rcode int
		an    int
	}{
		{"www.example.test.", dns.TypeA, dns.RcodeSuccess, 1},
		{"www.example.test.", dns.TypeAAAA, dns.RcodeSuccess, 0},
		{"nope.example.test.", dns.TypeA, dns.RcodeNameError, 0},
	} {
		q := query(tc.name, tc.qtype)
		q.SetEdns0(1232, false)
		in := pack(t, q)
		answer := func() {
			out := s.serveRaw(ctx, sc, protoUDP, client, true, in)
			var m dns.Msg
			if err := m.Unpack(out); err != nil || m.Rcode != tc.rcode || len(m.Answer) != tc.an || m.Id != q.Id {
				t.Fatalf("%s %d: wrong answer (%v): %v", tc.name, tc.qtype, err, &m)
			}
			s.release(sc)
		}
		answer()
		n := testing.AllocsPerRun(200, func() {
			if out := s.serveRaw(ctx, sc, protoUDP, client, true, in); len(out) == 0 {
				t.Fatal("no answer")
			}
			s.release(sc)
		})
		if n != 0 {
			t.Errorf("%s %s: %v allocs per query, want 0", tc.name, dns.TypeToString[tc.qtype], n)
		}
	}
	// Names asked in turn (a working set, not one name) are interned.
	var ins [][]byte
	for _, name := range []string{"www.example.test.", "nope.example.test.", "other.example.test."} {
		ins = append(ins, pack(t, query(name, dns.TypeA)))
	}
	i := 0
	ask := func() {
		if out := s.serveRaw(ctx, sc, protoUDP, client, true, ins[i%len(ins)]); len(out) == 0 {
			t.Fatal("no answer")
		}
		s.release(sc)
		i++
	}
	for range len(ins) {
		ask()
	}
	if n := testing.AllocsPerRun(300, ask); n != 0 {
		t.Errorf("names asked in turn: %v allocs per query, want 0", n)
	}
}

// BenchmarkServeUDPPipeline is BenchmarkServeUDP answered by a real
// pipeline (zone match, source lookup, response in the lent buffer).
func BenchmarkServeUDPPipeline(b *testing.B) {
	s := pipelineServer(b)
	s.answers = nil // every query resolved and packed; BenchmarkServeUDPKept reuses
	benchServe(b, s)
}

// BenchmarkServeUDPKept is the same question answered from a kept answer.
func BenchmarkServeUDPKept(b *testing.B) {
	benchServe(b, pipelineServer(b))
}
