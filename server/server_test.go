package server

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/netip"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/dnsd/dnsd/config"
	"github.com/dnsd/dnsd/internal/dnstest"
	"github.com/dnsd/dnsd/pipeline"
)

func TestAnswersOverUDPTCPAndTLS(t *testing.T) {
	srvTLS, cliTLS := selfSigned(t)
	ts := startServer(t, nil, []config.Listen{{Addr: "127.0.0.1:0"}, {Proto: "tls", Addr: "127.0.0.1:0"}}, Settings{ACL: config.ACL{Default: true}, TLS: srvTLS})
	addrs := ts.Addrs()
	if len(addrs) != 3 {
		t.Fatalf("Addrs = %v, want tcp, udp, tls", addrs)
	}
	cases := []struct{ network, addr string }{
		{"udp", addrs[1].String()},
		{"tcp", addrs[0].String()},
		{"tcp-tls", addrs[2].String()},
	}
	for _, c := range cases {
		t.Run(c.network, func(t *testing.T) {
			q := query("WWW.Example.TEST.", dns.TypeA)
			r := dnstest.Client{Net: c.network, TLS: cliTLS}.MustExchange(t, q, c.addr)
			if r.Id != q.Id || !r.Response || r.Rcode != dns.RcodeSuccess {
				t.Fatalf("reply header = %+v, want id %d, QR, NOERROR", r.MsgHdr, q.Id)
			}
			if len(r.Question) != 1 || r.Question[0].Name != "WWW.Example.TEST." {
				t.Fatalf("question = %v, want the query's as sent", r.Question)
			}
			if len(r.Answer) != 1 || r.Answer[0].(*dns.A).A.String() != "192.0.2.1" || !r.Authoritative {
				t.Fatalf("answer = %v, AA=%v", r.Answer, r.Authoritative)
			}
			if got := ts.res.calls(); got[len(got)-1] != "www.example.test." {
				t.Fatalf("resolver saw name %q, want lower case", got[len(got)-1])
			}
			o := ts.rec.last(t)
			want := map[string]string{"udp": "udp", "tcp": "tcp", "tcp-tls": "tls"}[c.network]
			if o.Proto != want || o.Name != "www.example.test." || o.Qtype != dns.TypeA || o.Zone != "example.test." || o.Source != "fake" || o.Rcode != 0 || o.Dropped || !o.Client.IsLoopback() {
				t.Fatalf("observation = %+v", o)
			}
		})
	}
}

func TestApplyNeedsTLSConfigForTLSListener(t *testing.T) {
	s := New(Options{Resolver: &fakeResolver{}})
	defer s.Shutdown(context.Background())
	err := s.Apply(context.Background(), []config.Listen{{Proto: "tls", Addr: "127.0.0.1:0"}}, Settings{})
	if err == nil {
		t.Fatal("Apply with a tls listener and no TLS config succeeded")
	}
	if len(s.Addrs()) != 0 {
		t.Fatalf("Addrs = %v after failed Apply", s.Addrs())
	}
}

// header builds a raw message: id, flags, counts, then body.
func rawMsg(id, flags, qd, an, ns, ar uint16, body ...[]byte) []byte {
	b := make([]byte, 12)
	for i, v := range []uint16{id, flags, qd, an, ns, ar} {
		binary.BigEndian.PutUint16(b[2*i:], v)
	}
	for _, p := range body {
		b = append(b, p...)
	}
	return b
}

func rawQuestion(name string, qtype, class uint16) []byte {
	b := make([]byte, 256)
	n, err := dns.PackDomainName(name, b, 0, nil, false)
	if err != nil {
		panic(err)
	}
	b = b[:n]
	return binary.BigEndian.AppendUint16(binary.BigEndian.AppendUint16(b, qtype), class)
}

func TestProtocolErrors(t *testing.T) {
	ts := startServer(t, nil, loopbackUDPTCP(), Settings{ACL: config.ACL{Default: true}})
	udp := ts.addr(t, "udp")

	withOpt := func(m *dns.Msg, version uint8) *dns.Msg {
		m.SetEdns0(4096, false)
		m.IsEdns0().SetVersion(version)
		return m
	}
	notify := query("example.test.", dns.TypeSOA)
	notify.Opcode = dns.OpcodeNotify
	update := query("example.test.", dns.TypeSOA)
	update.Opcode = dns.OpcodeUpdate
	chaos := query("version.bind.", dns.TypeTXT)
	chaos.Question[0].Qclass = dns.ClassCHAOS

	cases := []struct {
		name  string
		raw   []byte
		rcode int
	}{
		{"no question", rawMsg(0x1234, 0x0100, 0, 0, 0, 0), dns.RcodeFormatError},
		{"two questions", rawMsg(0x1234, 0x0100, 2, 0, 0, 0, rawQuestion("a.test.", dns.TypeA, dns.ClassINET), rawQuestion("b.test.", dns.TypeA, dns.ClassINET)), dns.RcodeFormatError},
		{"opcode notify, no secondary zone", pack(t, notify), dns.RcodeNotImplemented},
		{"opcode update", pack(t, update), dns.RcodeNotImplemented},
		{"class chaos", pack(t, chaos), dns.RcodeRefused},
		{"axfr", pack(t, query("example.test.", dns.TypeAXFR)), dns.RcodeRefused},
		{"ixfr", pack(t, query("example.test.", dns.TypeIXFR)), dns.RcodeRefused},
		{"edns version 1", pack(t, withOpt(query("example.test.", dns.TypeA), 1)), dns.RcodeBadVers},
		{"qtype 0", pack(t, query("example.test.", 0)), dns.RcodeFormatError},
		{"qtype OPT", pack(t, query("example.test.", dns.TypeOPT)), dns.RcodeFormatError},
		{"qtype TKEY", pack(t, query("example.test.", dns.TypeTKEY)), dns.RcodeFormatError},
		{"qtype TSIG", pack(t, query("example.test.", dns.TypeTSIG)), dns.RcodeFormatError},
		{"qtype MAILA", pack(t, query("example.test.", dns.TypeMAILA)), dns.RcodeNotImplemented},
		{"qtype MAILB", pack(t, query("example.test.", dns.TypeMAILB)), dns.RcodeNotImplemented},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := len(ts.res.calls())
			id := binary.BigEndian.Uint16(c.raw)
			r := new(dns.Msg)
			if err := r.Unpack(rawUDP(t, udp, c.raw)); err != nil {
				t.Fatalf("reply does not unpack: %v", err)
			}
			if r.Id != id || !r.Response || r.Rcode != c.rcode {
				t.Fatalf("reply id=%d QR=%v rcode=%s, want id=%d QR rcode=%s", r.Id, r.Response, dns.RcodeToString[r.Rcode], id, dns.RcodeToString[c.rcode])
			}
			if c.rcode == dns.RcodeBadVers {
				opt := r.IsEdns0()
				if opt == nil || opt.Version() != 0 || opt.UDPSize() != 1232 {
					t.Fatalf("BADVERS reply OPT = %v, want ours (version 0, size 1232)", opt)
				}
			}
			if got := len(ts.res.calls()); got != before {
				t.Fatalf("resolver called for a %s query", c.name)
			}
			if o := ts.rec.last(t); o.Rcode != c.rcode || o.Dropped {
				t.Fatalf("observation = %+v", o)
			}
		})
	}
}

func pack(t testing.TB, m *dns.Msg) []byte {
	t.Helper()
	b, err := m.Pack()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestGarbageDoesNotKillTheServer(t *testing.T) {
	ts := startServer(t, nil, loopbackUDPTCP(), Settings{ACL: config.ACL{Default: true}})
	udp := ts.addr(t, "udp")
	c, err := net.Dial("udp", udp)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	resp := query("x.test.", dns.TypeA)
	resp.Response = true
	junk := [][]byte{{}, {0}, {1, 2, 3}, pack(t, query("x.test.", dns.TypeA))[:15], pack(t, resp)}
	for range 50 {
		b := make([]byte, 1+len(junk)%700)
		_, _ = rand.Read(b)
		junk = append(junk, b)
	}
	for _, b := range junk {
		if _, err := c.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	r := dnstest.Exchange(t, "udp", udp, query("after.test.", dns.TypeA))
	if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
		t.Fatalf("valid query after garbage: %v", r)
	}
	// Every packet was observed; the QR=1 message was dropped, not answered.
	// Workers observe concurrently: give the garbage's observations time.
	dropped := 0
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		dropped = 0
		for _, o := range ts.rec.all() {
			if o.Dropped {
				dropped++
			}
		}
		if dropped >= 5 {
			break
		}
	}
	if dropped < 5 {
		t.Fatalf("%d packets observed as dropped, want at least the 5 certainly malformed ones", dropped)
	}

	// TCP: garbage closes that connection only.
	tc, err := net.Dial("tcp", ts.addr(t, "tcp"))
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	_, _ = tc.Write([]byte{0, 5, 1, 2, 3, 4, 5})
	_ = tc.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := tc.Read(make([]byte, 10)); !errors.Is(err, io.EOF) {
		t.Fatalf("read after garbage over TCP: %v, want EOF", err)
	}
	if r := dnstest.Exchange(t, "tcp", ts.addr(t, "tcp"), query("after.test.", dns.TypeA)); r.Rcode != dns.RcodeSuccess {
		t.Fatalf("tcp after garbage: %v", r)
	}
}

// A query with an EDNS option miekg/dns cannot decode - an empty
// ZONEVERSION (RFC 9660: how a client asks for it), a client subnet one
// byte long - is answered as if it had no option (dnsd uses none), over
// UDP and TCP; it used to be dropped as malformed. The OPT's DO bit and
// size still count.
func TestUndecodableEDNSOptionAnswered(t *testing.T) {
	ts := startServer(t, nil, loopbackUDPTCP(), Settings{ACL: config.ACL{Default: true}})
	for _, o := range []*dns.EDNS0_LOCAL{{Code: dns.EDNS0ZONEVERSION}, {Code: dns.EDNS0SUBNET, Data: []byte{1}}} {
		for _, netw := range []string{"udp", "tcp"} {
			q := query("z.test.", dns.TypeA)
			q.SetEdns0(1232, true)
			opt := q.IsEdns0()
			opt.Option = append(opt.Option, o)
			r := dnstest.Exchange(t, netw, ts.addr(t, netw), q)
			if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 || r.IsEdns0() == nil || !r.IsEdns0().Do() {
				t.Errorf("option %d over %s: %v, want the answer with OPT and DO", o.Code, netw, r)
			}
		}
	}
	for _, o := range ts.rec.all() {
		if o.Dropped {
			t.Errorf("a query dropped: %+v", o)
		}
	}
}

// An answer over 64 KiB (5,000 A records) is SERVFAIL over TCP, where a
// cut one would be a partial RRset with a TC bit the client cannot act
// on; over UDP it is truncated (TC=1) as ever.
func TestStreamAnswerTooLarge(t *testing.T) {
	var n atomic.Int64
	n.Store(5000)
	res := &fakeResolver{fn: func(_ context.Context, req *pipeline.Request) pipeline.Response { return answerA(req, int(n.Load())) }}
	ts := startServer(t, res, loopbackUDPTCP(), Settings{ACL: config.ACL{Default: true}})
	if r := dnstest.Exchange(t, "tcp", ts.addr(t, "tcp"), query("big.test.", dns.TypeA)); r.Rcode != dns.RcodeServerFailure || len(r.Answer) != 0 || r.Truncated {
		t.Errorf("over TCP: %s, %d records, TC %v; want SERVFAIL", dns.RcodeToString[r.Rcode], len(r.Answer), r.Truncated)
	}
	q := query("big.test.", dns.TypeA)
	q.SetEdns0(4096, false)
	if r := dnstest.Exchange(t, "udp", ts.addr(t, "udp"), q); r.Rcode != dns.RcodeSuccess || !r.Truncated {
		t.Errorf("over UDP: %s, TC %v; want NOERROR with TC", dns.RcodeToString[r.Rcode], r.Truncated)
	}
	// An answer over 64 KiB as written but under it with its names
	// compressed (3,000 A records: 72 KB, 48 KB compressed) is sent
	// whole, compressed, over TCP: the retry of a client that got TC=1
	// over UDP.
	n.Store(3000)
	if r := dnstest.Exchange(t, "tcp", ts.addr(t, "tcp"), query("big.test.", dns.TypeA)); r.Rcode != dns.RcodeSuccess || len(r.Answer) != 3000 || r.Truncated {
		t.Errorf("3,000 records over TCP: %s, %d records, TC %v; want all of them", dns.RcodeToString[r.Rcode], len(r.Answer), r.Truncated)
	}
	// A large answer that fits is sent whole over TCP.
	n.Store(1000)
	if r := dnstest.Exchange(t, "tcp", ts.addr(t, "tcp"), query("big.test.", dns.TypeA)); r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1000 || r.Truncated {
		t.Errorf("1,000 records over TCP: %s, %d records, TC %v", dns.RcodeToString[r.Rcode], len(r.Answer), r.Truncated)
	}
}

func TestEDNS(t *testing.T) {
	res := &fakeResolver{fn: func(_ context.Context, req *pipeline.Request) pipeline.Response {
		r := answerA(req, 1)
		// A response carrying someone else's OPT (e.g. an upstream's) must
		// not reach the client.
		r.Msg.SetEdns0(512, false)
		return r
	}}
	ts := startServer(t, res, loopbackUDPTCP(), Settings{ACL: config.ACL{Default: true}, Limits: config.Limits{UDPBuffer: 1400}})
	udp := ts.addr(t, "udp")

	q := query("e.test.", dns.TypeA)
	q.SetEdns0(4096, true)
	r := dnstest.Exchange(t, "udp", udp, q)
	opts := 0
	for _, rr := range r.Extra {
		if rr.Header().Rrtype == dns.TypeOPT {
			opts++
		}
	}
	opt := r.IsEdns0()
	if opts != 1 || opt.UDPSize() != 1400 || !opt.Do() || opt.Version() != 0 {
		t.Fatalf("reply has %d OPT, ours = %v; want one with size 1400 and DO", opts, opt)
	}
	res.mu.Lock()
	do := res.do[len(res.do)-1]
	res.mu.Unlock()
	if !do {
		t.Fatal("DO bit not passed to the resolver")
	}

	r = dnstest.Exchange(t, "udp", udp, query("e.test.", dns.TypeA))
	if r.IsEdns0() != nil {
		t.Fatalf("reply to a query without EDNS carries OPT: %v", r.IsEdns0())
	}
	q = query("e.test.", dns.TypeA)
	q.SetEdns0(1232, false)
	if opt := dnstest.Exchange(t, "udp", udp, q).IsEdns0(); opt == nil || opt.Do() {
		t.Fatalf("DO echoed although not set: %v", opt)
	}
}

func TestTruncation(t *testing.T) {
	res := &fakeResolver{fn: func(_ context.Context, req *pipeline.Request) pipeline.Response {
		return answerA(req, 100)
	}}
	ts := startServer(t, res, loopbackUDPTCP(), Settings{ACL: config.ACL{Default: true}})
	udp, tcp := ts.addr(t, "udp"), ts.addr(t, "tcp")
	name := "many.example.test."

	raw := rawUDP(t, udp, pack(t, query(name, dns.TypeA)))
	r := new(dns.Msg)
	if err := r.Unpack(raw); err != nil {
		t.Fatalf("truncated reply does not unpack: %v", err)
	}
	if len(raw) > 512 || !r.Truncated || len(r.Answer) >= 100 || r.Question[0].Name != name {
		t.Fatalf("UDP without EDNS: %d bytes, TC=%v, %d answers; want ≤512 bytes, TC, fewer than 100", len(raw), r.Truncated, len(r.Answer))
	}
	if o := ts.rec.last(t); !o.Truncated {
		t.Fatalf("observation = %+v, want Truncated", o)
	}

	q := query(name, dns.TypeA)
	q.SetEdns0(4096, false) // capped by our 1232
	raw = rawUDP(t, udp, pack(t, q))
	if err := r.Unpack(raw); err != nil {
		t.Fatal(err)
	}
	if len(raw) > 1232 || !r.Truncated || r.IsEdns0() == nil {
		t.Fatalf("UDP with EDNS 4096: %d bytes, TC=%v, OPT=%v; want ≤1232, TC, OPT kept", len(raw), r.Truncated, r.IsEdns0())
	}

	q = query(name, dns.TypeA)
	q.SetEdns0(65000, false)
	for _, network := range []string{"tcp"} {
		r := dnstest.Exchange(t, network, tcp, q)
		if r.Truncated || len(r.Answer) != 100 {
			t.Fatalf("TCP: TC=%v, %d answers; want all 100", r.Truncated, len(r.Answer))
		}
	}
}

func TestPipelinedTCP(t *testing.T) {
	ts := startServer(t, nil, loopbackUDPTCP(), Settings{ACL: config.ACL{Default: true}})
	c, err := net.Dial("tcp", ts.addr(t, "tcp"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var burst []byte
	for i := range 5 {
		q := query("p"+strconv.Itoa(i)+".test.", dns.TypeA)
		q.Id = uint16(100 + i)
		b := pack(t, q)
		burst = binary.BigEndian.AppendUint16(burst, uint16(len(b)))
		burst = append(burst, b...)
	}
	if _, err := c.Write(burst); err != nil { // all five at once
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	// Answers may come in any order; the ID says which query each answers.
	seen := map[uint16]bool{}
	for i := range 5 {
		r := readTCPMsg(t, c)
		n := int(r.Id) - 100
		if n < 0 || n >= 5 || seen[r.Id] || r.Question[0].Name != "p"+strconv.Itoa(n)+".test." || len(r.Answer) != 1 {
			t.Fatalf("answer %d: id %d question %v (seen %v)", i, r.Id, r.Question, seen)
		}
		seen[r.Id] = true
	}
}

// readTCPMsg reads one length-prefixed message from c.
func readTCPMsg(t *testing.T, c net.Conn) *dns.Msg {
	t.Helper()
	var l [2]byte
	if _, err := io.ReadFull(c, l[:]); err != nil {
		t.Fatalf("read answer: %v", err)
	}
	b := make([]byte, binary.BigEndian.Uint16(l[:]))
	if _, err := io.ReadFull(c, b); err != nil {
		t.Fatalf("read answer: %v", err)
	}
	r := new(dns.Msg)
	if err := r.Unpack(b); err != nil {
		t.Fatal(err)
	}
	return r
}

func TestMaxTCPConnections(t *testing.T) {
	ts := startServer(t, nil, loopbackUDPTCP(), Settings{ACL: config.ACL{Default: true}, Limits: config.Limits{MaxTCPConnections: 2}})
	tcp := ts.addr(t, "tcp")
	var conns []*dns.Conn
	for range 2 {
		c, err := dns.Dial("tcp", tcp)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		conns = append(conns, c)
		exchangeOn(t, c, "held.test.") // accepted and served
	}
	third, err := net.Dial("tcp", tcp)
	if err != nil {
		t.Fatal(err)
	}
	defer third.Close()
	_ = third.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := third.Read(make([]byte, 1)); !errors.Is(err, io.EOF) && !isReset(err) {
		t.Fatalf("third connection: read %v, want it closed by the server", err)
	}
	waitRejections(t, ts.rec, RejectTotal, 1)
	// The held connections still work; freeing one admits a new one.
	exchangeOn(t, conns[0], "still.test.")
	conns[1].Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		r, err := dnstest.Client{Net: "tcp"}.Exchange(query("again.test.", dns.TypeA), tcp)
		if err == nil && r.Rcode == dns.RcodeSuccess {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no new connection admitted after one closed: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func isReset(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && !op.Timeout()
}

func exchangeOn(t *testing.T, c *dns.Conn, name string) {
	t.Helper()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	q := query(name, dns.TypeA)
	if err := c.WriteMsg(q); err != nil {
		t.Fatal(err)
	}
	r, err := c.ReadMsg()
	if err != nil {
		t.Fatal(err)
	}
	if r.Id != q.Id || len(r.Answer) != 1 {
		t.Fatalf("reply %v", r)
	}
}

func TestTCPIdleTimeoutClosesConnections(t *testing.T) {
	ts := startServer(t, nil, loopbackUDPTCP(), Settings{ACL: config.ACL{Default: true}, Limits: config.Limits{TCPIdleTimeout: 200 * time.Millisecond}})
	tcp := ts.addr(t, "tcp")

	c, err := dns.Dial("tcp", tcp)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	exchangeOn(t, c, "idle.test.")
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(make([]byte, 2)); !errors.Is(err, io.EOF) {
		t.Fatalf("idle connection: read %v, want EOF from the server closing it", err)
	}

	// A client that sends half a message and stalls is closed too.
	slow, err := net.Dial("tcp", tcp)
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	_, _ = slow.Write([]byte{0, 40, 0, 1})
	_ = slow.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := slow.Read(make([]byte, 2)); !errors.Is(err, io.EOF) {
		t.Fatalf("stalled connection: read %v, want EOF", err)
	}
}

func TestRateLimit(t *testing.T) {
	ts := startServer(t, nil, loopbackUDPTCP(), Settings{ACL: config.ACL{Default: true}, Limits: config.Limits{RatePerClient: 5}})
	udp, tcp := ts.addr(t, "udp"), ts.addr(t, "tcp")
	full, tc := 0, 0
	for i := range 30 {
		r := dnstest.Exchange(t, "udp", udp, query("r"+strconv.Itoa(i)+".test.", dns.TypeA))
		switch {
		case r.Truncated && len(r.Answer) == 0 && r.Rcode == dns.RcodeSuccess:
			tc++
		case !r.Truncated && len(r.Answer) == 1:
			full++
		default:
			t.Fatalf("unexpected reply %v", r)
		}
	}
	// Budget 5/s with a burst of 5: the 30 queries take far less than 5 s.
	if full < 5 || full >= 30 || tc < 30-full || tc == 0 {
		t.Fatalf("%d full answers and %d TC=1; want the first 5 full and the rest mostly TC", full, tc)
	}
	for i := range 20 {
		if r := dnstest.Exchange(t, "tcp", tcp, query("t"+strconv.Itoa(i)+".test.", dns.TypeA)); r.Truncated || len(r.Answer) != 1 {
			t.Fatalf("TCP query %d limited: %v", i, r)
		}
	}
	if o := ts.rec.last(t); o.Proto != "tcp" || o.Truncated {
		t.Fatalf("observation %+v", o)
	}
}

func TestRateLimitDrop(t *testing.T) {
	ts := startServer(t, nil, loopbackUDPTCP(), Settings{ACL: config.ACL{Default: true}, Limits: config.Limits{RatePerClient: 2, RateDrop: true}})
	sc := &scratch{}
	client := mustAddr("10.1.2.3")
	answered := 0
	for range 10 {
		if out := ts.serveRaw(context.Background(), sc, protoUDP, client, false, pack(t, query("d.test.", dns.TypeA))); out != nil {
			answered++
		}
		ts.release(sc)
	}
	if answered < 2 || answered > 4 {
		t.Fatalf("%d of 10 answered with rate 2 and rate_drop; want about 2", answered)
	}
	if o := ts.rec.last(t); !o.Dropped || o.Rcode != -1 {
		t.Fatalf("last observation %+v, want Dropped", o)
	}
	// Another /24 has its own budget; the same /24 shares it.
	if out := ts.serveRaw(context.Background(), sc, protoUDP, mustAddr("10.1.3.1"), false, pack(t, query("d.test.", dns.TypeA))); out == nil {
		t.Fatal("client in another /24 was limited")
	}
	ts.release(sc)
	if out := ts.serveRaw(context.Background(), sc, protoUDP, mustAddr("10.1.2.200"), false, pack(t, query("d.test.", dns.TypeA))); out != nil {
		t.Fatal("client in the same /24 was not limited")
	}
	ts.release(sc)
}

func TestLimiterForgetsIdleClients(t *testing.T) {
	l := newLimiter()
	now := l.epoch
	for i := range 5000 {
		l.allow(mustAddr("10."+strconv.Itoa(i/256%256)+"."+strconv.Itoa(i%256)+".1"), 10, now)
	}
	if n := l.size(); n != 5000 {
		t.Fatalf("tracking %d groups, want 5000", n)
	}
	later := now.Add(3 * time.Second)
	for i := range 200 { // new clients trigger the lazy sweep in their shards
		l.allow(mustAddr("172.16."+strconv.Itoa(i)+".1"), 10, later)
	}
	if n := l.size(); n != 200 {
		t.Fatalf("tracking %d groups after the idle ones expired, want 200", n)
	}
	// A full shard stops tracking (fails open) instead of growing.
	for i := range 2 * limiterMaxKeys {
		a := [4]byte{100, byte(i >> 16), byte(i >> 8), byte(i)}
		l.allow(netipFrom4(a), 10, later)
	}
	if n := l.size(); n > limiterMaxKeys {
		t.Fatalf("limiter holds %d groups, bound is %d", n, limiterMaxKeys)
	}
}

func TestShutdownWaitsForInFlightQuery(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	res := &fakeResolver{fn: func(_ context.Context, req *pipeline.Request) pipeline.Response {
		close(entered)
		<-release
		return answerA(req, 1)
	}}
	rec := &recorder{}
	s := New(Options{Resolver: res, Observer: rec})
	if err := s.Apply(context.Background(), loopbackUDPTCP(), Settings{ACL: config.ACL{Default: true}}); err != nil {
		t.Fatal(err)
	}
	udp := s.Addrs()[1].String()
	tcp := s.Addrs()[0].String()
	// An idle TCP connection must not hold up Shutdown.
	idle, err := net.Dial("tcp", tcp)
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()

	replied := make(chan *dns.Msg, 1)
	go func() {
		r, _ := dnstest.Client{Net: "udp"}.Exchange(query("slow.test.", dns.TypeA), udp)
		replied <- r
	}()
	<-entered
	stopped := make(chan error, 1)
	go func() { stopped <- s.Shutdown(context.Background()) }()

	select {
	case err := <-stopped:
		t.Fatalf("Shutdown returned (%v) while a query was in flight", err)
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	if r := <-replied; r == nil || len(r.Answer) != 1 {
		t.Fatalf("in-flight query got %v, want its answer", r)
	}
	if err := <-stopped; err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if _, err := net.Dial("tcp", tcp); err == nil {
		t.Fatal("TCP still accepting after Shutdown")
	}
	if err := s.Apply(context.Background(), loopbackUDPTCP(), Settings{}); err == nil {
		t.Fatal("Apply after Shutdown succeeded")
	}
}

// TestShutdownCancelsSlowAnswers: an answer still being resolved halfway
// to Shutdown's deadline (a forward to upstreams that never answer) is
// cancelled then - its client, over UDP, gets SERVFAIL - and Shutdown
// completes in time without an error.
func TestShutdownCancelsSlowAnswers(t *testing.T) {
	entered := make(chan struct{})
	res := &fakeResolver{fn: func(ctx context.Context, req *pipeline.Request) pipeline.Response {
		close(entered)
		<-ctx.Done() // a resolver that honours cancellation
		return pipeline.Response{}
	}}
	s := New(Options{Resolver: res})
	if err := s.Apply(context.Background(), loopbackUDPTCP(), Settings{ACL: config.ACL{Default: true}}); err != nil {
		t.Fatal(err)
	}
	replied := make(chan *dns.Msg, 1)
	go func() {
		r, _ := dnstest.Client{Net: "udp"}.Exchange(query("stuck.test.", dns.TypeA), s.Addrs()[1].String())
		replied <- r
	}()
	<-entered
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	start := time.Now()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown = %v, want nil (the slow answer cancelled)", err)
	}
	if took := time.Since(start); took < 800*time.Millisecond || took > 1900*time.Millisecond {
		t.Errorf("Shutdown took %v, want about 1 s (half the time to its deadline)", took)
	}
	if r := <-replied; r == nil || r.Rcode != dns.RcodeServerFailure {
		t.Errorf("the cancelled query got %v, want SERVFAIL", r)
	}
}

// TestShutdownGivesUpAtDeadline: a resolver that ignores cancellation
// does not hold Shutdown past its deadline.
func TestShutdownGivesUpAtDeadline(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	defer close(release)
	res := &fakeResolver{fn: func(ctx context.Context, req *pipeline.Request) pipeline.Response {
		close(entered)
		<-release // ignores ctx
		return pipeline.Response{}
	}}
	s := New(Options{Resolver: res})
	if err := s.Apply(context.Background(), loopbackUDPTCP(), Settings{ACL: config.ACL{Default: true}}); err != nil {
		t.Fatal(err)
	}
	go func() {
		_, _ = dnstest.Client{Net: "tcp"}.Exchange(query("stuck.test.", dns.TypeA), s.Addrs()[0].String())
	}()
	<-entered
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := s.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Shutdown = %v, want deadline exceeded", err)
	}
}

func TestApplyKeepsBindsAndCloses(t *testing.T) {
	ts := startServer(t, nil, []config.Listen{{Addr: "127.0.0.1:0"}}, Settings{ACL: config.ACL{Default: true}})
	a := []config.Listen{{Addr: "127.0.0.1:0"}}
	oldUDP, oldTCP := ts.addr(t, "udp"), ts.addr(t, "tcp")

	// Keep a, add b (udp only).
	b := config.Listen{Proto: "udp", Addr: "127.0.0.2:0"}
	both := append(slices.Clone(a), b)
	if err := ts.Apply(context.Background(), both, Settings{ACL: config.ACL{Default: true}}); err != nil {
		t.Fatal(err)
	}
	addrs := ts.Addrs()
	if len(addrs) != 3 || addrs[0].String() != oldTCP || addrs[1].String() != oldUDP {
		t.Fatalf("Addrs after adding = %v, want %s %s first", addrs, oldTCP, oldUDP)
	}
	newUDP := addrs[2].String()
	for _, addr := range []string{oldUDP, newUDP} {
		if r := dnstest.Exchange(t, "udp", addr, query("k.test.", dns.TypeA)); len(r.Answer) != 1 {
			t.Fatalf("%s: %v", addr, r)
		}
	}
	dnstest.Exchange(t, "tcp", oldTCP, query("k.test.", dns.TypeA))

	// Remove a: its sockets close, b keeps serving.
	if err := ts.Apply(context.Background(), []config.Listen{b}, Settings{ACL: config.ACL{Default: true}}); err != nil {
		t.Fatal(err)
	}
	if addrs := ts.Addrs(); len(addrs) != 1 || addrs[0].String() != newUDP {
		t.Fatalf("Addrs after removing = %v, want [%s]", addrs, newUDP)
	}
	if _, err := net.Dial("tcp", oldTCP); err == nil {
		t.Fatalf("removed TCP %s still accepts", oldTCP)
	}
	if _, err := (dnstest.Client{Net: "udp"}).Exchange(query("k.test.", dns.TypeA), oldUDP); err == nil {
		t.Fatalf("removed UDP %s still answers", oldUDP)
	}
	dnstest.Exchange(t, "udp", newUDP, query("k.test.", dns.TypeA))
}

func TestApplyFailsAsAWholeOnBindConflict(t *testing.T) {
	ts := startServer(t, nil, loopbackUDPTCP(), Settings{ACL: config.ACL{Default: true}})
	udp := ts.addr(t, "udp")
	before := ts.Addrs()

	occupied, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer occupied.Close()
	// A port that is free now; Apply binds it before it hits the conflict.
	probe, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	freeTCP := probe.Addr().String()
	probe.Close()

	denyAll := Settings{ACL: config.ACL{Allow: nil, Default: false}}
	fresh := config.Listen{Proto: "tcp", Addr: freeTCP}
	conflict := config.Listen{Proto: "udp", Addr: occupied.LocalAddr().String(), Pos: config.Pos{File: "dnsd.yaml", Line: 3, Col: 12}}
	err = ts.Apply(context.Background(), append(loopbackUDPTCP(), fresh, conflict), denyAll)
	if err == nil {
		t.Fatal("Apply onto an occupied port succeeded")
	}
	if want := "dnsd.yaml:3:12: listen udp://" + conflict.Addr + ": "; !strings.HasPrefix(err.Error(), want) {
		t.Errorf("error %q does not begin with the entry's position (%q)", err, want)
	}
	if got := ts.Addrs(); !slices.EqualFunc(got, before, func(a, b net.Addr) bool { return a.String() == b.String() }) {
		t.Fatalf("Addrs after failed Apply = %v, want %v", got, before)
	}
	// Settings unchanged (deny-all not applied), existing socket still serves.
	if r := dnstest.Exchange(t, "udp", udp, query("k.test.", dns.TypeA)); r.Rcode != dns.RcodeSuccess {
		t.Fatalf("after failed Apply: %v", r)
	}
	// What the failed call bound was released: binding it now works.
	if err := ts.Apply(context.Background(), append(loopbackUDPTCP(), fresh), Settings{ACL: config.ACL{Default: true}}); err != nil {
		t.Fatalf("binding %s after the failed Apply: %v", freeTCP, err)
	}
	dnstest.Exchange(t, "tcp", freeTCP, query("k.test.", dns.TypeA))
}

// A listen change onto a port the server holds itself (127.0.0.1:P to
// 0.0.0.0:P and back) applies: the old sockets make way for the new. An
// Apply that fails after that listens on the old address again.
func TestApplyMovesOntoItsOwnPort(t *testing.T) {
	allow := Settings{ACL: config.ACL{Default: true}}
	ts := startServer(t, nil, []config.Listen{{Addr: "127.0.0.1:0"}}, allow)
	port := ts.Addrs()[0].(*net.TCPAddr).Port
	loop := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	ask := func(what string) {
		t.Helper()
		for _, proto := range []string{"udp", "tcp"} {
			if r := dnstest.Exchange(t, proto, loop, query("k.test.", dns.TypeA)); len(r.Answer) != 1 {
				t.Fatalf("%s, %s: %v", what, proto, r)
			}
		}
	}
	ask("before")
	wild := []config.Listen{{Addr: net.JoinHostPort("0.0.0.0", strconv.Itoa(port))}}
	if err := ts.Apply(context.Background(), wild, allow); err != nil {
		t.Fatalf("127.0.0.1:%d to 0.0.0.0:%d: %v", port, port, err)
	}
	if addrs := ts.Addrs(); len(addrs) != 2 || !strings.HasPrefix(addrs[0].String(), "0.0.0.0:") {
		t.Errorf("Addrs after the move: %v", addrs)
	}
	ask("on 0.0.0.0")
	if err := ts.Apply(context.Background(), []config.Listen{{Addr: loop}}, allow); err != nil {
		t.Fatalf("back to %s: %v", loop, err)
	}
	ask("back on 127.0.0.1")

	// Onto the same port, but another entry cannot be bound: the whole
	// Apply fails and the old address serves again.
	occupied, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer occupied.Close()
	bad := append(slices.Clone(wild), config.Listen{Proto: "tcp", Addr: occupied.Addr().String()})
	if err := ts.Apply(context.Background(), bad, Settings{}); err == nil {
		t.Fatal("Apply onto an occupied port succeeded")
	}
	ask("after the failed move")
}

// A second server (another dnsd started by mistake) cannot bind a UDP
// address the first holds, although both set SO_REUSEPORT: it would take
// part of the queries unseen. One server's own overlapping UDP entries
// (0.0.0.0:P beside 127.0.0.1:P) still bind, at start and by a reload.
func TestUDPAddressNotShared(t *testing.T) {
	allow := Settings{ACL: config.ACL{Default: true}}
	first := startServer(t, nil, []config.Listen{{Proto: "udp", Addr: "127.0.0.1:0"}}, allow)
	held := first.addr(t, "udp")
	second := New(Options{Resolver: &fakeResolver{}, Observer: &recorder{}})
	err := second.Apply(context.Background(), []config.Listen{{Proto: "udp", Addr: held}}, allow)
	if err == nil {
		_ = second.Shutdown(context.Background())
		t.Fatalf("a second server bound %s beside the first", held)
	}
	if !errors.Is(err, syscall.EADDRINUSE) {
		t.Errorf("second server: %v, want address already in use", err)
	}
	_ = second.Shutdown(context.Background())

	_, port, _ := net.SplitHostPort(held)
	wild := config.Listen{Proto: "udp", Addr: net.JoinHostPort("0.0.0.0", port)}
	if err := first.Apply(context.Background(), []config.Listen{{Proto: "udp", Addr: held}, wild}, allow); err != nil {
		t.Fatalf("adding %s beside its own %s: %v", wild.Addr, held, err)
	}
	if r := dnstest.Exchange(t, "udp", held, query("k.test.", dns.TypeA)); len(r.Answer) != 1 {
		t.Fatalf("after the reload: %v", r)
	}
	free, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ = net.SplitHostPort(free.LocalAddr().String())
	free.Close()
	third := startServer(t, nil, []config.Listen{{Proto: "udp", Addr: "127.0.0.1:" + port}, {Proto: "udp", Addr: "0.0.0.0:" + port}}, allow)
	if n := len(third.Addrs()); n != 2 {
		t.Fatalf("overlapping entries at start: %d addresses bound", n)
	}
}

// On a wildcard address the reply must come from the address the client
// sent to (127.0.0.2 here), else a connected client socket ignores it.
func TestWildcardUDPRepliesFromQueriedAddress(t *testing.T) {
	for _, host := range []string{"0.0.0.0", ""} {
		t.Run("host="+host, func(t *testing.T) {
			ts := startServer(t, nil, []config.Listen{{Proto: "udp", Addr: net.JoinHostPort(host, "0")}}, Settings{ACL: config.ACL{Default: true}})
			port := ts.Addrs()[0].(*net.UDPAddr).Port
			for _, ip := range []string{"127.0.0.1", "127.0.0.2"} {
				addr := net.JoinHostPort(ip, strconv.Itoa(port))
				if r := dnstest.Exchange(t, "udp", addr, query("w.test.", dns.TypeA)); len(r.Answer) != 1 {
					t.Fatalf("%s: %v", addr, r)
				}
			}
		})
	}
}

// slowUDPServer starts a UDP server whose resolver holds queries for
// names starting with "slow" until free is called (at the latest when the
// test ends, before the server shuts down), and dials it.
func slowUDPServer(t *testing.T) (c net.Conn, free func()) {
	t.Helper()
	return slowUDPServerOn(t, "127.0.0.1:0", "127.0.0.1")
}

// slowUDPServerOn is slowUDPServer listening on listen, its client
// sending to the server's port at address to.
func slowUDPServerOn(t *testing.T, listen, to string) (c net.Conn, free func()) {
	t.Helper()
	release := make(chan struct{})
	var once sync.Once
	free = func() { once.Do(func() { close(release) }) }
	res := &fakeResolver{fn: func(_ context.Context, req *pipeline.Request) pipeline.Response {
		if strings.HasPrefix(req.Name, "slow") {
			<-release
		}
		return answerA(req, 1)
	}}
	ts := startServer(t, res, []config.Listen{{Proto: "udp", Addr: listen}}, Settings{ACL: config.ACL{Default: true}})
	t.Cleanup(free) // cleanups run last-in first-out: before the server's shutdown
	c, err := net.Dial("udp", net.JoinHostPort(to, strconv.Itoa(ts.Addrs()[0].(*net.UDPAddr).Port)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, free
}

// sendQuery writes one A query for name with the given ID to c.
func sendQuery(t *testing.T, c net.Conn, id uint16, name string) {
	t.Helper()
	m := query(name, dns.TypeA)
	m.Id = id
	if _, err := c.Write(pack(t, m)); err != nil {
		t.Fatal(err)
	}
}

// TestSlowQueriesDoNotBlockUDP: queries stuck in the resolver (a forward
// waiting on its upstream) hold up neither the socket nor the queries
// received with them; every query is answered exactly once.
func TestSlowQueriesDoNotBlockUDP(t *testing.T) {
	c, free := slowUDPServer(t)
	slowRounds(t, c, free, 40)
}

// slowRounds sends three rounds of a slow query (slow<round>.test.)
// followed by fast ones to c, and expects each round's fast answers while
// the slow queries wait; then it lets them go (free) and expects their
// answers: every query answered exactly once.
func slowRounds(t *testing.T, c net.Conn, free func(), fast int) {
	t.Helper()
	got := map[uint16]int{}
	id := uint16(0)
	for round := range 3 {
		sendQuery(t, c, 1000+uint16(round), fmt.Sprintf("slow%d.test.", round))
		for range fast {
			id++
			sendQuery(t, c, id, fmt.Sprintf("fast%d.test.", id))
		}
		readUDPCounting(t, c, got, fast) // the fast ones, while the slow ones wait
	}
	free()
	readUDPCounting(t, c, got, 3)
	for k, n := range got {
		if n != 1 {
			t.Errorf("query %d answered %d times", k, n)
		}
	}
	if want := 3 * (fast + 1); len(got) != want {
		t.Errorf("%d distinct answers, want %d", len(got), want)
	}
}

// readUDPMsg reads one message from c by deadline into buf and unpacks
// it (a message that does not unpack fails the test); err is the read's.
func readUDPMsg(t *testing.T, c net.Conn, buf []byte, deadline time.Time) (*dns.Msg, error) {
	t.Helper()
	_ = c.SetReadDeadline(deadline)
	n, err := c.Read(buf)
	if err != nil {
		return nil, err
	}
	r := new(dns.Msg)
	if err := r.Unpack(buf[:n]); err != nil {
		t.Fatal(err)
	}
	return r, nil
}

// readUDPCounting reads want answers from c, each within 5 s, and counts
// each answer's ID in got.
func readUDPCounting(t *testing.T, c net.Conn, got map[uint16]int, want int) {
	t.Helper()
	buf := make([]byte, 4096)
	for range want {
		r, err := readUDPMsg(t, c, buf, time.Now().Add(5*time.Second))
		if err != nil {
			t.Fatalf("after %d answers: %v", len(got), err)
		}
		got[r.Id]++
	}
}

// Several slow queries in one burst (so in one read batch) each hold only
// their own goroutine: the fast queries between and after them are all
// answered while every slow one still waits.
func TestManySlowQueriesInOneBatch(t *testing.T) {
	c, free := slowUDPServer(t)
	fast := map[uint16]bool{}
	for i := range 12 {
		name, id := fmt.Sprintf("fast%d.test.", i), uint16(100+i)
		if i%2 == 0 {
			name, id = fmt.Sprintf("slow%d.test.", i), uint16(200+i)
		} else {
			fast[id] = true
		}
		sendQuery(t, c, id, name)
	}
	buf := make([]byte, 4096)
	for len(fast) > 0 {
		r, err := readUDPMsg(t, c, buf, time.Now().Add(3*time.Second))
		if err != nil {
			t.Fatalf("%d fast queries unanswered while slow ones wait: %v", len(fast), err)
		}
		if !fast[r.Id] {
			t.Fatalf("answer %d arrived before the slow queries were released", r.Id)
		}
		delete(fast, r.Id)
	}
	free()
	for range 6 {
		_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
		if _, err := c.Read(buf); err != nil {
			t.Fatalf("slow queries after release: %v", err)
		}
	}
}

// sendBurst writes one A query per name, the ID being the key, to c at
// once.
func sendBurst(t *testing.T, c net.Conn, names map[uint16]string, order []uint16) {
	t.Helper()
	for _, id := range order {
		sendQuery(t, c, id, names[id])
	}
}

// readAnswers reads answers from c until every query of want (ID →
// name) is answered, each once and with its own question; it fails when
// deadline passes first.
func readAnswers(t *testing.T, c net.Conn, want map[uint16]string, deadline time.Time) {
	t.Helper()
	buf := make([]byte, 4096)
	for len(want) > 0 {
		r, err := readUDPMsg(t, c, buf, deadline)
		if err != nil {
			t.Fatalf("%d queries unanswered: %v", len(want), err)
		}
		name, ok := want[r.Id]
		if !ok {
			t.Fatalf("answer with unexpected or repeated ID %d", r.Id)
		}
		if len(r.Question) != 1 || r.Question[0].Name != name || len(r.Answer) != 1 || r.Answer[0].Header().Name != name {
			t.Fatalf("answer %d is not for %s: %v", r.Id, name, r)
		}
		delete(want, r.Id)
	}
}

// burstNames names n queries q<i>.test. with IDs apart by 7, in order.
func burstNames(n int) (map[uint16]string, []uint16) {
	names := map[uint16]string{}
	var order []uint16
	for i := range n {
		id := uint16(1000 + 7*i)
		names[id] = fmt.Sprintf("q%d.test.", i)
		order = append(order, id)
	}
	return names, order
}

// A burst of 64 queries from one client spans several read batches whose
// replies are sent together: every query gets exactly one answer, with its
// own ID and question.
func TestUDPBurstAnswersMatch(t *testing.T) {
	c, _ := slowUDPServer(t)
	for range 3 {
		names, order := burstNames(64)
		sendBurst(t, c, names, order)
		readAnswers(t, c, names, time.Now().Add(5*time.Second))
	}
}

// A slow query in the middle of a burst of 64: the replies queued before
// it in its batch go out when the batch is taken over, the later ones as
// they are made, so all arrive while the slow one still waits (the bound
// is generous: this source does not say it waits, so the watchdog takes
// the batch over, after 10-20 ms).
func TestUDPBurstWithSlowQuery(t *testing.T) {
	c, free := slowUDPServer(t)
	names, order := burstNames(64)
	slowID := order[20]
	names[slowID] = "slow20.test."
	fast := maps.Clone(names)
	delete(fast, slowID)
	start := time.Now()
	sendBurst(t, c, names, order)
	readAnswers(t, c, fast, start.Add(time.Second))
	t.Logf("63 fast answers after %v", time.Since(start))
	free()
	readAnswers(t, c, map[uint16]string{slowID: "slow20.test."}, time.Now().Add(5*time.Second))
}

// A slow query in a burst to 127.0.0.2 on a wildcard listener: the
// replies sent one by one after the takeover (by the reader and by the
// goroutines answering the rest) keep their source address too.
func TestWildcardUDPSlowQueryRepliesFromQueriedAddress(t *testing.T) {
	c, free := slowUDPServerOn(t, "0.0.0.0:0", "127.0.0.2")
	names, order := burstNames(64)
	slowID := order[5]
	names[slowID] = "slow5.test."
	fast := maps.Clone(names)
	delete(fast, slowID)
	sendBurst(t, c, names, order)
	readAnswers(t, c, fast, time.Now().Add(5*time.Second))
	free()
	readAnswers(t, c, map[uint16]string{slowID: "slow5.test."}, time.Now().Add(5*time.Second))
}

// Replies sent together keep their source address: a burst to 127.0.0.2
// on a wildcard listener is answered from 127.0.0.2 (the connected client
// socket drops anything else).
func TestWildcardUDPBurstRepliesFromQueriedAddress(t *testing.T) {
	for _, host := range []string{"0.0.0.0", ""} {
		t.Run("host="+host, func(t *testing.T) {
			res := &fakeResolver{fn: func(_ context.Context, req *pipeline.Request) pipeline.Response { return answerA(req, 1) }}
			ts := startServer(t, res, []config.Listen{{Proto: "udp", Addr: net.JoinHostPort(host, "0")}}, Settings{ACL: config.ACL{Default: true}})
			port := ts.Addrs()[0].(*net.UDPAddr).Port
			for _, ip := range []string{"127.0.0.2", "127.0.0.1"} {
				c, err := net.Dial("udp", net.JoinHostPort(ip, strconv.Itoa(port)))
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				names, order := burstNames(64)
				sendBurst(t, c, names, order)
				readAnswers(t, c, names, time.Now().Add(5*time.Second))
			}
		})
	}
}

func waitRejections(t *testing.T, rec *recorder, reason string, want int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for rec.rejections(reason) != want {
		if time.Now().After(deadline) {
			t.Fatalf("%s rejections = %d, want %d", reason, rec.rejections(reason), want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// One client network may hold at most max_tcp_per_client connections;
// other clients are unaffected.
func TestMaxTCPPerClient(t *testing.T) {
	ts := startServer(t, nil, loopbackUDPTCP(), Settings{ACL: config.ACL{Default: true}, Limits: config.Limits{MaxTCPConnections: 10, MaxTCPPerClient: 2}})
	tcp := ts.addr(t, "tcp")
	dial := func(from string) net.Conn {
		t.Helper()
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 5 * time.Second}
		c, err := d.Dial("tcp", tcp)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	for range 2 {
		exchangeOn(t, &dns.Conn{Conn: dial("127.0.0.1")}, "held.test.")
	}
	// A third from the same /24 (another address in it) is closed at once.
	third := dial("127.0.0.2")
	_ = third.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := third.Read(make([]byte, 1)); !errors.Is(err, io.EOF) && !isReset(err) {
		t.Fatalf("third connection of one client: read %v, want it closed by the server", err)
	}
	waitRejections(t, ts.rec, RejectClient, 1)
	// Another client network still gets in.
	exchangeOn(t, &dns.Conn{Conn: dial("127.0.1.1")}, "other.test.")
	if n := ts.rec.rejections(RejectTotal); n != 0 {
		t.Fatalf("%d total rejections, want 0", n)
	}
}

// A panic while answering gives the client SERVFAIL, is observed, and the
// server goes on answering.
func TestPanicAnswersServfail(t *testing.T) {
	res := &fakeResolver{fn: func(_ context.Context, req *pipeline.Request) pipeline.Response {
		if req.Name == "boom.test." {
			var m map[string]int
			//lint:ignore SA5000 the panic is what this test needs
			m["x"]++ // a real runtime panic: assignment to a nil map
		}
		return answerA(req, 1)
	}}
	ts := startServer(t, res, loopbackUDPTCP(), Settings{ACL: config.ACL{Default: true}})
	for _, network := range []string{"udp", "tcp"} {
		q := query("boom.test.", dns.TypeA)
		q.SetEdns0(1232, false)
		r := dnstest.Exchange(t, network, ts.addr(t, network), q)
		if r.Rcode != dns.RcodeServerFailure || r.Id != q.Id || len(r.Answer) != 0 || r.IsEdns0() == nil {
			t.Fatalf("%s: reply to a panicking query: %v", network, r)
		}
		if o := ts.rec.last(t); !o.Panicked || o.Rcode != dns.RcodeServerFailure || o.Dropped {
			t.Fatalf("%s: observation %+v", network, o)
		}
		if r := dnstest.Exchange(t, network, ts.addr(t, network), query("fine.test.", dns.TypeA)); len(r.Answer) != 1 {
			t.Fatalf("%s: no answer after a panic: %v", network, r)
		}
	}
}

func TestPanicLogIsRateLimitedPerSite(t *testing.T) {
	var l panicLog
	now := time.Now()
	if !l.due(1, now) || l.due(1, now.Add(time.Second)) || !l.due(2, now) {
		t.Fatal("first panic of a site must log, a repeat within a minute must not, another site must")
	}
	if !l.due(1, now.Add(panicLogEvery)) {
		t.Fatal("a site must log again after a minute")
	}
}

// Drops carry their reason; REFUSED answers count against the rate limit
// like any other answer, so a refused client is not a free reflector.
func TestDropReasonsAndRefusedRateLimited(t *testing.T) {
	deny := []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	ts := startServer(t, nil, loopbackUDPTCP(), Settings{ACL: config.ACL{Default: true, Deny: deny}, Limits: config.Limits{RatePerClient: 5}})
	udp := ts.addr(t, "udp")
	c, err := net.Dial("udp", udp)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	refused, tc := 0, 0
	buf := make([]byte, 512)
	for i := 0; i < 20; i++ {
		if _, err := c.Write(pack(t, query("x.test.", dns.TypeA))); err != nil {
			t.Fatal(err)
		}
		r, err := readUDPMsg(t, c, buf, time.Now().Add(2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case r.Rcode == dns.RcodeRefused:
			refused++
		case r.Truncated:
			tc++
		}
	}
	if refused > 6 || refused+tc != 20 {
		t.Fatalf("20 queries from a refused client at rate 5/s: %d REFUSED, %d TC; want at most 6 REFUSED, the rest TC", refused, tc)
	}

	// Garbage is dropped as malformed, never answered.
	if _, err := c.Write([]byte{1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		if o := ts.rec.last(t); o.Dropped && o.DropReason == DropMalformed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("last observation %+v, want a malformed drop", ts.rec.last(t))
		}
		time.Sleep(5 * time.Millisecond)
	}

	// A datagram longer than the read buffer is dropped unread, and
	// counted as malformed too.
	malformed := func() int {
		ts.rec.mu.Lock()
		defer ts.rec.mu.Unlock()
		n := 0
		for _, o := range ts.rec.obs {
			if o.Dropped && o.DropReason == DropMalformed {
				n++
			}
		}
		return n
	}
	before := malformed()
	big := pack(t, query("x.test.", dns.TypeA))
	big = append(big, make([]byte, udpReadSize+100)...)
	if _, err := c.Write(big); err != nil {
		t.Fatal(err)
	}
	dnstest.Eventually(t, "the oversized datagram counted as malformed", 5*time.Second, func() bool { return malformed() == before+1 })
}

// rotate: successive responses put each address of a name first in turn;
// other records and other names keep their places; off, the order stays.
func TestRotate(t *testing.T) {
	res := &fakeResolver{fn: func(_ context.Context, req *pipeline.Request) pipeline.Response {
		r := answerA(req, 3)
		cname := &dns.CNAME{Hdr: dns.RR_Header{Name: "alias.test.", Rrtype: dns.TypeCNAME, Class: dns.ClassINET, Ttl: 60}, Target: req.Name}
		r.Msg.Answer = append([]dns.RR{cname}, r.Msg.Answer...)
		return r
	}}
	for _, rotate := range []bool{true, false} {
		ts := startServer(t, res, loopbackUDPTCP(), Settings{ACL: config.ACL{Default: true}, Rotate: rotate})
		firsts := map[string]int{}
		for i := 0; i < 6; i++ {
			r := dnstest.Exchange(t, "udp", ts.addr(t, "udp"), query("web.test.", dns.TypeA))
			if len(r.Answer) != 4 || r.Answer[0].Header().Rrtype != dns.TypeCNAME {
				t.Fatalf("rotate %v: answer %v", rotate, r.Answer)
			}
			seen := map[string]bool{}
			for _, rr := range r.Answer[1:] {
				seen[rr.(*dns.A).A.String()] = true
			}
			if len(seen) != 3 {
				t.Fatalf("rotate %v: addresses lost or doubled: %v", rotate, r.Answer)
			}
			firsts[r.Answer[1].(*dns.A).A.String()]++
		}
		switch {
		case rotate && (len(firsts) != 3 || firsts["192.0.2.1"] != 2):
			t.Errorf("rotate: first addresses over 6 responses %v, want each of 3 twice", firsts)
		case !rotate && (len(firsts) != 1 || firsts["192.0.2.1"] != 6):
			t.Errorf("no rotate: first addresses %v, want always 192.0.2.1", firsts)
		}
	}
}

// TestRotatePerName: round robin per name. Two names of two addresses
// each, asked in turn: each name's first address alternates (one counter
// for the whole server would give each name every other step, so always
// the same order). Likewise the A and AAAA of one name asked in turn.
func TestRotatePerName(t *testing.T) {
	res := &fakeResolver{fn: func(_ context.Context, req *pipeline.Request) pipeline.Response {
		r := answerA(req, 2)
		if req.Type == dns.TypeAAAA {
			for i, rr := range r.Msg.Answer {
				r.Msg.Answer[i] = &dns.AAAA{Hdr: dns.RR_Header{Name: req.Name, Rrtype: dns.TypeAAAA, Class: dns.ClassINET, Ttl: 60}, AAAA: net.ParseIP("2001:db8::" + rr.(*dns.A).A.String()[8:])}
			}
		}
		return r
	}}
	ts := startServer(t, res, loopbackUDPTCP(), Settings{ACL: config.ACL{Default: true}, Rotate: true})
	// Two names in different counter slots (names share a slot by hash).
	slot := ts.rotors.slot
	names := []string{"a.test."}
	for i := 0; len(names) < 2; i++ {
		if n := fmt.Sprintf("b%d.test.", i); slot(n, dns.TypeA) != slot(names[0], dns.TypeA) {
			names = append(names, n)
		}
	}
	dual := "dual.test."
	for i := 0; slot(dual, dns.TypeA) == slot(dual, dns.TypeAAAA); i++ {
		dual = fmt.Sprintf("dual%d.test.", i)
	}
	for _, pair := range [][2]struct {
		name string
		qt   uint16
	}{{{names[0], dns.TypeA}, {names[1], dns.TypeA}}, {{dual, dns.TypeA}, {dual, dns.TypeAAAA}}} {
		firsts := map[string]int{}
		for range 4 {
			for _, q := range pair {
				r := dnstest.Exchange(t, "udp", ts.addr(t, "udp"), query(q.name, q.qt))
				if len(r.Answer) != 2 {
					t.Fatalf("%s: %v", q.name, r.Answer)
				}
				f := strings.Fields(r.Answer[0].String())
				firsts[q.name+" "+f[3]+" "+f[4]]++
			}
		}
		if len(firsts) != 4 {
			t.Errorf("asked in turn 4 times each, first addresses %v: want both addresses of each first twice", firsts)
		}
	}
}

func TestRotateAnswerDoesNotAllocate(t *testing.T) {
	req := &pipeline.Request{Name: "web.test."}
	answer := answerA(req, 4).Msg.Answer
	var buf []dns.RR
	rotateAnswer(&buf, answer, 1)
	step := uint32(0)
	if n := testing.AllocsPerRun(100, func() { step++; rotateAnswer(&buf, answer, step) }); n != 0 {
		t.Fatalf("rotateAnswer: %v allocations per call", n)
	}
	if answer[0].(*dns.A).A.String() != "192.0.2.1" {
		t.Fatal("rotateAnswer wrote the source's slice")
	}
}

// limits.udp_rcvbuf sets every UDP socket's receive buffer, at start and
// again at a reload that changes it (the sockets are kept).
func TestUDPReceiveBuffer(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the granted size is read back on Linux only")
	}
	set := Settings{ACL: config.ACL{Default: true}, Limits: config.Limits{UDPRcvBuf: 1 << 20}}
	ts := startServer(t, nil, loopbackUDPTCP(), set)
	check := func(want int) {
		t.Helper()
		bufs := ts.rcvBufs()
		if len(bufs) == 0 {
			t.Fatal("no UDP socket")
		}
		for _, b := range bufs {
			// The kernel may cap it (net.core.rmem_max) for an unprivileged
			// process; as root (CI) it grants the size asked for.
			if b < want && os.Geteuid() == 0 {
				t.Errorf("receive buffer %d, want at least %d", b, want)
			}
			if b < 212992/2 {
				t.Errorf("receive buffer %d: not set at all", b)
			}
		}
	}
	check(1 << 20)
	set.Limits.UDPRcvBuf = 2 << 20
	if err := ts.Apply(context.Background(), loopbackUDPTCP(), set); err != nil {
		t.Fatal(err)
	}
	check(2 << 20)
}
