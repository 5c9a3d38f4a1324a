package forward

import (
	"context"
	"encoding/binary"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/dnsd/dnsd/config"
	"github.com/dnsd/dnsd/internal/dnstest"
)

func keyA(name string) Key { return Key{Name: name, Type: dns.TypeA} }

func exchangeA(t *testing.T, p *Pool, name string) (*dns.Msg, error) {
	t.Helper()
	return p.Exchange(context.Background(), keyA(name))
}

func TestPolicySequential(t *testing.T) {
	a, b := startUpstream(t), startUpstream(t)
	p := newPool(t, poolOpts(a.Addr, b.Addr))
	for i := 0; i < 20; i++ {
		if _, err := exchangeA(t, p, "x.test."); err != nil {
			t.Fatal(err)
		}
	}
	if a.queries() != 20 || b.queries() != 0 {
		t.Fatalf("sequential: first got %d, second %d; want 20, 0", a.queries(), b.queries())
	}
}

func TestPolicyRoundRobin(t *testing.T) {
	ups := []*upstreamServer{startUpstream(t), startUpstream(t), startUpstream(t)}
	o := poolOpts(ups[0].Addr, ups[1].Addr, ups[2].Addr)
	o.Policy = PolicyRoundRobin
	p := newPool(t, o)
	for i := 0; i < 30; i++ {
		if _, err := exchangeA(t, p, "x.test."); err != nil {
			t.Fatal(err)
		}
	}
	for i, u := range ups {
		if u.queries() != 10 {
			t.Errorf("round_robin: upstream %d got %d of 30 queries, want 10", i, u.queries())
		}
	}
}

func TestPolicyRandom(t *testing.T) {
	ups := []*upstreamServer{startUpstream(t), startUpstream(t), startUpstream(t)}
	o := poolOpts(ups[0].Addr, ups[1].Addr, ups[2].Addr)
	o.Policy = PolicyRandom
	p := newPool(t, o)
	for i := 0; i < 300; i++ {
		if _, err := exchangeA(t, p, "x.test."); err != nil {
			t.Fatal(err)
		}
	}
	for i, u := range ups {
		if n := u.queries(); n < 50 || n > 150 {
			t.Errorf("random: upstream %d got %d of 300 queries, want about 100", i, n)
		}
	}
}

// A silent upstream costs one timeout; the next one answers.
func TestFailoverOnTimeout(t *testing.T) {
	hole := blackHole(t)
	good := startUpstream(t)
	o := poolOpts(hole, good.Addr)
	o.MaxFails = 10
	p := newPool(t, o)
	start := time.Now()
	m, err := exchangeA(t, p, "x.test.")
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < o.Timeout || took > o.Timeout+time.Second {
		t.Errorf("failover took %v; want about the %v timeout", took, o.Timeout)
	}
	if len(m.Answer) != 1 || good.queries() != 1 {
		t.Fatalf("answer %v, good upstream asked %d times", m, good.queries())
	}
}

// An upstream that answers FORMERR without an OPT to an EDNS0 query is
// asked again without EDNS0 (RFC 6891 §7), and its answer is used.
func TestRetryWithoutEDNSOnFormerr(t *testing.T) {
	old := startUpstream(t)
	old.set(func(u *upstreamServer) { u.noEDNS = true })
	p := newPool(t, poolOpts(old.Addr))
	m, err := exchangeA(t, p, "x.test.")
	if err != nil {
		t.Fatal(err)
	}
	if m.Rcode != dns.RcodeSuccess || len(m.Answer) != 1 {
		t.Fatalf("answer from a pre-EDNS upstream: %v", m)
	}
	if n := old.queries(); n != 2 {
		t.Fatalf("upstream asked %d times, want 2 (with EDNS0, then without)", n)
	}
	if up := p.Up(); !up[0] {
		t.Errorf("a pre-EDNS upstream was marked down")
	}
}

// SERVFAIL and REFUSED move on to the next upstream without marking the
// upstream down (it answered).
func TestFailoverOnServfailAndRefused(t *testing.T) {
	sf, ref, good := startUpstream(t), startUpstream(t), startUpstream(t)
	sf.set(func(u *upstreamServer) { u.rcode = dns.RcodeServerFailure })
	ref.set(func(u *upstreamServer) { u.rcode = dns.RcodeRefused })
	o := poolOpts(sf.Addr, ref.Addr, good.Addr)
	o.MaxFails = 1
	p := newPool(t, o)
	for i := 0; i < 3; i++ {
		m, err := exchangeA(t, p, "x.test.")
		if err != nil || m.Rcode != dns.RcodeSuccess || len(m.Answer) != 1 {
			t.Fatalf("got %v %v", m, err)
		}
	}
	if sf.queries() != 3 || ref.queries() != 3 || good.queries() != 3 {
		t.Fatalf("asked %d, %d, %d times; want 3 each", sf.queries(), ref.queries(), good.queries())
	}
	for i, up := range p.Up() {
		if !up {
			t.Errorf("upstream %d marked down for answering SERVFAIL/REFUSED", i)
		}
	}
	// Every upstream failing is an error (the source then serves stale or
	// SERVFAIL).
	good.set(func(u *upstreamServer) { u.rcode = dns.RcodeServerFailure })
	if _, err := exchangeA(t, p, "x.test."); err == nil || !strings.Contains(err.Error(), "SERVFAIL") {
		t.Fatalf("all SERVFAIL: err = %v", err)
	}
}

// max_fails consecutive failures mark an upstream down: queries skip it at
// once. Health probes (". IN NS") bring it back when it answers again.
func TestDownAndUp(t *testing.T) {
	flaky, good := startUpstream(t), startUpstream(t)
	flaky.set(func(u *upstreamServer) { u.silent = true })
	o := poolOpts(flaky.Addr, good.Addr)
	o.Timeout = 100 * time.Millisecond
	o.HealthCheck = 30 * time.Millisecond
	o.MaxFails = 3
	p := newPool(t, o)
	dnstest.Eventually(t, "the flaky upstream marked down", 5*time.Second, func() bool {
		_, _ = exchangeA(t, p, "x.test.")
		return !p.Up()[0]
	})
	if !p.Up()[1] {
		t.Fatal("the good upstream is down")
	}
	// Down: skipped without waiting for a timeout.
	before := flaky.queries()
	start := time.Now()
	if _, err := exchangeA(t, p, "y.test."); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 80*time.Millisecond {
		t.Errorf("a query took %v with the first upstream down; it must be skipped", took)
	}
	if flaky.queries() != before {
		t.Error("a query was sent to an upstream marked down")
	}
	if flaky.probes.Load() == 0 {
		dnstest.Eventually(t, "health probes", 5*time.Second, func() bool { return flaky.probes.Load() > 0 })
	}
	flaky.set(func(u *upstreamServer) { u.silent = false })
	dnstest.Eventually(t, "the upstream marked up again", 5*time.Second, func() bool { return p.Up()[0] })
	probes := flaky.probes.Load()
	if _, err := exchangeA(t, p, "z.test."); err != nil {
		t.Fatal(err)
	}
	if flaky.count("z.test.") != 1 {
		t.Error("the upstream back up does not get queries")
	}
	time.Sleep(4 * o.HealthCheck)
	if n := flaky.probes.Load(); n > probes+1 {
		t.Errorf("%d probes after the upstream came back; probing must stop", n-probes)
	}
}

// Every upstream down: one is still tried (the health probes may lag).
func TestAllDownStillTriesOne(t *testing.T) {
	u := startUpstream(t)
	u.set(func(u *upstreamServer) { u.silent = true })
	o := poolOpts(u.Addr)
	o.Timeout = 50 * time.Millisecond
	o.HealthCheck = time.Hour
	o.MaxFails = 1
	p := newPool(t, o)
	if _, err := exchangeA(t, p, "x.test."); err == nil {
		t.Fatal("silent upstream answered")
	}
	if p.Up()[0] {
		t.Fatal("not marked down")
	}
	u.set(func(u *upstreamServer) { u.silent = false })
	if _, err := exchangeA(t, p, "x.test."); err != nil {
		t.Fatalf("all down: the one upstream is not tried: %v", err)
	}
}

// UDP answer with TC=1: retried over TCP to the same upstream.
func TestTruncatedRetriedOverTCP(t *testing.T) {
	u := startUpstream(t)
	u.set(func(u *upstreamServer) { u.tc = true })
	p := newPool(t, poolOpts(u.Addr))
	m, err := p.Exchange(context.Background(), Key{Name: "big.test.", Type: dns.TypeTXT})
	if err != nil {
		t.Fatal(err)
	}
	if m.Truncated || len(m.Answer) != 40 {
		t.Fatalf("got TC=%v with %d records; want the full 40 over TCP", m.Truncated, len(m.Answer))
	}
	if u.udpN.Load() != 1 || u.tcpN.Load() != 1 {
		t.Fatalf("UDP %d, TCP %d queries; want 1, 1", u.udpN.Load(), u.tcpN.Load())
	}
	if m.IsEdns0() != nil {
		t.Error("the upstream's OPT record was not removed")
	}
}

// tcp:// upstreams reuse one connection for sequential queries; an idle
// connection past its expiry is replaced; a connection the server closed
// is replaced without failing the query.
func TestTCPConnectionReuse(t *testing.T) {
	defer func(d time.Duration) { idleExpiry = d }(idleExpiry)
	idleExpiry = 200 * time.Millisecond
	u := startUpstream(t)
	p := newPool(t, poolOpts("tcp://"+u.Addr))
	for i := 0; i < 10; i++ {
		if _, err := exchangeA(t, p, "x.test."); err != nil {
			t.Fatal(err)
		}
	}
	if u.conns.Load() != 1 || u.tcpN.Load() != 10 || u.udpN.Load() != 0 {
		t.Fatalf("10 queries: %d connections, %d TCP, %d UDP queries; want 1, 10, 0", u.conns.Load(), u.tcpN.Load(), u.udpN.Load())
	}
	time.Sleep(idleExpiry + 50*time.Millisecond)
	if _, err := exchangeA(t, p, "x.test."); err != nil {
		t.Fatal(err)
	}
	if u.conns.Load() != 2 {
		t.Fatalf("after the idle expiry: %d connections, want a second one", u.conns.Load())
	}
	// The server restarts on the same port: the idle connection is dead.
	u.stop()
	u2 := newUpstreamServer(t)
	l, err := net.Listen("tcp", u.Addr)
	if err != nil {
		t.Skipf("cannot rebind %s: %v", u.Addr, err)
	}
	u2.Addr = u.Addr
	u2.serve(&dns.Server{Listener: l, Handler: dns.HandlerFunc(u2.handle)})
	if _, err := exchangeA(t, p, "x.test."); err != nil {
		t.Fatalf("a query on a connection the server closed must be retried on a new one: %v", err)
	}
}

// Concurrent queries each take their own connection; the pool keeps them.
func TestTCPConcurrent(t *testing.T) {
	u := startUpstream(t)
	u.set(func(u *upstreamServer) { u.delay = 20 * time.Millisecond })
	p := newPool(t, poolOpts("tcp://"+u.Addr))
	done := make(chan error)
	for i := 0; i < 8; i++ {
		go func() { _, err := exchangeA(t, p, "x.test."); done <- err }()
	}
	for i := 0; i < 8; i++ {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if n := p.ups[0].idleCount(); n < 2 || n > 8 {
		t.Fatalf("%d idle connections after 8 concurrent queries", n)
	}
}

// DNS over TLS with a test CA, the server name verified; a wrong name or
// an unknown CA fails.
func TestTLSUpstream(t *testing.T) {
	u, ca := startTLSUpstream(t, "dns.test")
	o := poolOpts()
	o.Upstreams = []Upstream{{Proto: "tls", Addr: u.Addr, ServerName: "dns.test"}}
	o.TLSCA = ca
	p := newPool(t, o)
	for i := 0; i < 3; i++ {
		m, err := exchangeA(t, p, "x.test.")
		if err != nil || len(m.Answer) != 1 {
			t.Fatalf("DoT: %v %v", m, err)
		}
	}
	if u.conns.Load() != 1 {
		t.Errorf("3 DoT queries opened %d connections; want 1 reused", u.conns.Load())
	}
	// Verified against the IP when no name is given.
	o.Upstreams[0].ServerName = ""
	if _, err := exchangeA(t, newPool(t, o), "x.test."); err != nil {
		t.Fatalf("DoT verified by IP: %v", err)
	}
	o.Upstreams[0].ServerName = "other.test"
	if _, err := exchangeA(t, newPool(t, o), "x.test."); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("wrong server name: err = %v", err)
	}
	o.Upstreams[0].ServerName = "dns.test"
	o.TLSCA = ""
	if _, err := exchangeA(t, newPool(t, o), "x.test."); err == nil {
		t.Fatal("a certificate from an unknown CA was accepted")
	}
}

// UDP answers are matched on ID and question: a forged or late answer
// with another ID or question is ignored. Each attempt uses a new source
// port and ID.
func TestUDPAnswerMatching(t *testing.T) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	type seen struct {
		port int
		id   uint16
	}
	seenc := make(chan seen, 16)
	go func() {
		buf := make([]byte, 4096)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			q := new(dns.Msg)
			if q.Unpack(buf[:n]) != nil {
				continue
			}
			seenc <- seen{from.(*net.UDPAddr).Port, q.Id}
			send := func(id uint16, name, ip string) {
				m := new(dns.Msg)
				m.SetReply(q)
				m.Id = id
				m.Question[0].Name = name
				m.Answer = []dns.RR{&dns.A{Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeA, Ttl: 60}, A: net.ParseIP(ip)}}
				b, _ := m.Pack()
				_, _ = pc.WriteTo(b, from)
			}
			send(q.Id+1, q.Question[0].Name, "192.0.2.66") // wrong ID
			send(q.Id, "evil.test.", "192.0.2.67")         // wrong question
			send(q.Id, q.Question[0].Name, "192.0.2.1")    // the answer
		}
	}()
	p := newPool(t, poolOpts(pc.LocalAddr().String()))
	var ports, ids = map[int]bool{}, map[uint16]bool{}
	for i := 0; i < 5; i++ {
		m, err := exchangeA(t, p, "x.test.")
		if err != nil {
			t.Fatal(err)
		}
		if got := m.Answer[0].(*dns.A).A.String(); got != "192.0.2.1" {
			t.Fatalf("accepted a non-matching answer: %s", got)
		}
		s := <-seenc
		ports[s.port], ids[s.id] = true, true
	}
	if len(ports) < 4 || len(ids) < 4 {
		t.Fatalf("5 queries used %d source ports and %d IDs; want fresh ones", len(ports), len(ids))
	}
}

func TestDOAndCDPassedUpstream(t *testing.T) {
	u := startUpstream(t)
	p := newPool(t, poolOpts(u.Addr))
	if _, err := p.Exchange(context.Background(), Key{Name: "x.test.", Type: dns.TypeA, DO: true, CD: true}); err != nil {
		t.Fatal(err)
	}
	if !u.lastDO.Load() || !u.lastCD.Load() {
		t.Fatalf("upstream saw DO=%v CD=%v; want both", u.lastDO.Load(), u.lastCD.Load())
	}
	if _, err := exchangeA(t, p, "x.test."); err != nil {
		t.Fatal(err)
	}
	if u.lastDO.Load() || u.lastCD.Load() {
		t.Fatal("DO/CD sent without the client asking")
	}
}

// The EDNS0 size advertised upstream is limits.udp_buffer.
func TestUDPSizeUpstream(t *testing.T) {
	wire, err := packQuery(keyA("x.test."), 1400)
	if err != nil {
		t.Fatal(err)
	}
	m := new(dns.Msg)
	if err := m.Unpack(wire); err != nil {
		t.Fatal(err)
	}
	if o := m.IsEdns0(); o == nil || o.UDPSize() != 1400 || !m.RecursionDesired {
		t.Fatalf("query %v", m)
	}
	if binary.BigEndian.Uint16(wire) != 0 {
		t.Fatal("ID set before the attempt")
	}
}

func TestExpand(t *testing.T) {
	dir := t.TempDir()
	rc := filepath.Join(dir, "resolv.conf")
	write := func(s string) {
		if err := os.WriteFile(rc, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	listen := func(addrs ...string) []config.Listen {
		var out []config.Listen
		for _, a := range addrs {
			out = append(out, config.Listen{Addr: a})
		}
		return out
	}
	ups := []UpstreamConfig{{ResolvConf: true, Raw: "resolv.conf"}, {Proto: "tls", Addr: "192.0.2.9:853", ServerName: "dns.test", Raw: "tls://192.0.2.9@dns.test"}}
	write("# comment\nsearch example\nnameserver 127.0.0.53\nnameserver 192.0.2.1 ; x\nnameserver fe80::1%eth0\nnameserver bogus\noptions edns0\n")

	got, dropped, err := Expand(ups, ExpandOptions{ResolvConf: rc, Listen: listen("127.0.0.1:53")})
	if err != nil {
		t.Fatal(err)
	}
	want := "udp://127.0.0.53:53 udp://192.0.2.1:53 udp://[fe80::1%eth0]:53 tls://192.0.2.9:853@dns.test"
	if s := upstreamsString(got); s != want || len(dropped) != 0 {
		t.Fatalf("got %s (dropped %v)\nwant %s", s, dropped, want)
	}

	// A wildcard listen on port 53 is every local address on that port.
	got, dropped, err = Expand(ups, ExpandOptions{ResolvConf: rc, Listen: listen("0.0.0.0:53")})
	if err != nil {
		t.Fatal(err)
	}
	if s := upstreamsString(got); s != "udp://192.0.2.1:53 udp://[fe80::1%eth0]:53 tls://192.0.2.9:853@dns.test" || len(dropped) != 1 {
		t.Fatalf("wildcard: got %s, dropped %v", s, dropped)
	}
	// ... including the machine's own interface addresses.
	got, _, err = Expand(ups, ExpandOptions{ResolvConf: rc, Listen: listen(":53"), LocalAddrs: func() []netip.Addr { return []netip.Addr{netip.MustParseAddr("192.0.2.1")} }})
	if err != nil {
		t.Fatal(err)
	}
	if s := upstreamsString(got); s != "udp://[fe80::1%eth0]:53 tls://192.0.2.9:853@dns.test" {
		t.Fatalf("wildcard with local 192.0.2.1: got %s", s)
	}

	// Nothing left: an error.
	write("nameserver 127.0.0.1\n")
	if _, _, err := Expand(ups[:1], ExpandOptions{ResolvConf: rc, Listen: listen("127.0.0.1:53")}); err == nil || !strings.Contains(err.Error(), "loop") {
		t.Fatalf("only ourselves in resolv.conf: err = %v", err)
	}
	write("search x\n")
	if _, _, err := Expand(ups[:1], ExpandOptions{ResolvConf: rc}); err == nil || !strings.Contains(err.Error(), "no nameserver") {
		t.Fatalf("no nameserver: err = %v", err)
	}
	if _, _, err := Expand(ups[:1], ExpandOptions{ResolvConf: filepath.Join(dir, "missing")}); err == nil {
		t.Fatal("missing resolv.conf: no error")
	}
	// An explicit upstream that is our own address is a loop.
	self := []UpstreamConfig{{Proto: "udp", Addr: "127.0.0.1:5353", Raw: "127.0.0.1:5353"}}
	if _, _, err := Expand(self, ExpandOptions{Listen: listen("127.0.0.1:5353")}); err == nil || !strings.Contains(err.Error(), "loop") {
		t.Fatalf("explicit self upstream: err = %v", err)
	}
	if _, _, err := Expand(self, ExpandOptions{Listen: listen("[::]:5353")}); err == nil {
		t.Fatal("explicit 127.0.0.1:5353 with a [::]:5353 listener: no error")
	}
	if _, _, err := Expand(self, ExpandOptions{Listen: listen("127.0.0.1:53")}); err != nil {
		t.Fatalf("another port is not a loop: %v", err)
	}
}

func upstreamsString(ups []Upstream) string {
	var s []string
	for _, u := range ups {
		s = append(s, u.String())
	}
	return strings.Join(s, " ")
}
