//go:build linux

package main

import (
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/dnsd/dnsd/internal/testpki"
)

func TestParseQueries(t *testing.T) {
	qs, err := parseQueries(strings.NewReader("# comment\nhost1.example.internal A\n\nmissing.example.internal. aaaa\n; other\nbare.example\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		name string
		typ  uint16
	}{{"host1.example.internal.", dns.TypeA}, {"missing.example.internal.", dns.TypeAAAA}, {"bare.example.", dns.TypeA}}
	if len(qs) != len(want) {
		t.Fatalf("got %d queries, want %d", len(qs), len(want))
	}
	for i, w := range want {
		m := new(dns.Msg)
		if err := m.Unpack(qs[i]); err != nil {
			t.Fatal(err)
		}
		if q := m.Question[0]; q.Name != w.name || q.Qtype != w.typ || m.IsEdns0() == nil {
			t.Errorf("query %d = %v (EDNS %v), want %s %s with EDNS", i, q, m.IsEdns0() != nil, w.name, dns.TypeToString[w.typ])
		}
	}
	for _, bad := range []string{"", "# only a comment\n", "a.example NOSUCHTYPE\n", "a.example A extra\n"} {
		if _, err := parseQueries(strings.NewReader(bad)); err == nil {
			t.Errorf("parseQueries(%q) succeeded", bad)
		}
	}
}

func TestClassify(t *testing.T) {
	q := new(dns.Msg).SetQuestion("a.example.", dns.TypeA)
	pack := func(rcode, answers int) []byte {
		m := new(dns.Msg).SetRcode(q, rcode)
		for i := 0; i < answers; i++ {
			m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: "a.example.", Rrtype: dns.TypeA, Class: dns.ClassINET}, A: net.IPv4(10, 0, 0, 1)})
		}
		b, err := m.Pack()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	query, _ := q.Pack()
	for _, c := range []struct {
		b    []byte
		want int
	}{
		{pack(dns.RcodeSuccess, 1), kindAnswer},
		{pack(dns.RcodeSuccess, 0), kindNoData},
		{pack(dns.RcodeNameError, 0), kindNX},
		{pack(dns.RcodeServerFailure, 0), kindBad},
		{pack(dns.RcodeRefused, 0), kindBad},
		{query, kindBad}, // QR not set
		{[]byte{1, 2, 3}, kindBad},
	} {
		if got := classify(c.b); got != c.want {
			t.Errorf("classify(%x...) = %d, want %d", c.b[:min(4, len(c.b))], got, c.want)
		}
	}
}

func TestPercentiles(t *testing.T) {
	var lat []time.Duration
	for i := 100; i >= 1; i-- {
		lat = append(lat, time.Duration(i))
	}
	got := percentiles(lat, len(lat), 0.5, 0.99, 1)
	if got[0] != 50 || got[1] != 99 || got[2] != 100 {
		t.Errorf("percentiles of 1..100 = %v, want [50 99 100]", got)
	}
	if got := percentiles([]time.Duration{7}, 1, 0.5, 0.99); got[0] != 7 || got[1] != 7 {
		t.Errorf("percentiles of one = %v", got)
	}
	if got := percentiles(nil, 0, 0.5); got[0] != 0 {
		t.Errorf("percentiles of none = %v", got)
	}
	// 100 answers of 102 queries: the two lost ones rank last, so p99
	// (rank 101) is lost and p50 (rank 51) is the 51st answer.
	got = percentiles(lat, 102, 0.5, 0.98, 0.99)
	if got[0] != 51 || got[1] != 100 || got[2] != lost || us(got[2]) <= 1e12 {
		t.Errorf("percentiles of 100 answers of 102 = %v, want [51 100 lost]", got)
	}
}

// TestFixedRate runs the fixed-rate mode against a real server on
// loopback that answers every query but those for drop.example.
func TestFixedRate(t *testing.T) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		if r.Question[0].Name == "drop.example." {
			return
		}
		m := new(dns.Msg).SetRcode(r, dns.RcodeNameError)
		_ = w.WriteMsg(m)
	})}
	go func() { _ = srv.ActivateAndServe() }()
	defer srv.Shutdown()

	qs, err := parseQueries(strings.NewReader("a.example\nb.example\nc.example\ndrop.example\n"))
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("udp", pc.LocalAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	line := fixedRate(conn.(*net.UDPConn), qs, 2000, 400*time.Millisecond, "t")
	f := map[string]float64{}
	for _, kv := range strings.Fields(line)[1:] {
		k, v, _ := strings.Cut(kv, "=")
		var x float64
		if _, err := fmt.Sscan(v, &x); err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		f[k] = x
	}
	// 800 queries in 0.4 s, give or take the pacing (and any the
	// generator skipped after a stall of its own); a quarter dropped.
	if f["sent"]+f["skipped"] < 700 || f["sent"]+f["skipped"] > 900 {
		t.Errorf("sent %v queries, want about 800: %s", f["sent"], line)
	}
	if f["nxdomain"] != f["answers"] || f["bad"] != 0 {
		t.Errorf("answers are not all NXDOMAIN: %s", line)
	}
	if lost := f["lost"] / f["sent"]; lost < 0.2 || lost > 0.3 {
		t.Errorf("lost %.2f of the queries, want 0.25: %s", lost, line)
	}
	if f["p50_us"] <= 0 || f["p99_us"] < f["p50_us"] || f["p999_us"] < f["p99_us"] {
		t.Errorf("percentiles out of order: %s", line)
	}
	// Each answer arrived (the kernel's stamp) before it was read.
	if f["p99_read_us"] < f["p99_us"] {
		t.Errorf("answers read before they arrived: %s", line)
	}
}

// The kernel's receive stamp is found among a datagram's control
// messages, and it is the time the datagram arrived.
func TestRxStamp(t *testing.T) {
	rx, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer rx.Close()
	rc, err := rx.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var serr error
	_ = rc.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_TIMESTAMPNS, 1)
	})
	if serr != nil {
		t.Skip("no SO_TIMESTAMPNS:", serr)
	}
	tx, err := net.DialUDP("udp4", nil, rx.LocalAddr().(*net.UDPAddr))
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Close()
	before := time.Now().UnixNano()
	if _, err := tx.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	buf, oob := make([]byte, 16), make([]byte, 64)
	_ = rx.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, oobn, _, _, err := rx.ReadMsgUDP(buf, oob)
	if err != nil {
		t.Fatal(err)
	}
	after := time.Now().UnixNano()
	ns, ok := rxStamp(oob[:oobn])
	if !ok {
		t.Fatalf("no stamp in % x", oob[:oobn])
	}
	if ns < before || ns > after {
		t.Errorf("stamp %d not between the send (%d) and the read (%d)", ns, before, after)
	}
	if _, ok := rxStamp(nil); ok {
		t.Error("a stamp found in no control message")
	}
	if _, ok := rxStamp(oob[:oobn-1]); ok {
		t.Error("a stamp found in a truncated control message")
	}
}

func TestSkip(t *testing.T) {
	for _, c := range []struct{ sent, due, max, want int64 }{
		{0, 10, 64, 0},        // on time
		{100, 164, 64, 0},     // exactly the backlog allowed
		{100, 8100, 64, 7936}, // a stall: all but 64 skipped
		{100, 90, 64, 0},      // ahead
	} {
		if got := skip(c.sent, c.due, c.max); got != c.want {
			t.Errorf("skip(%d, %d, %d) = %d, want %d", c.sent, c.due, c.max, got, c.want)
		}
	}
}

// The warm-up goes on past its first second until every query was
// answered (NOERROR or NXDOMAIN) about -warm-passes times: here from a
// server slow enough that one second is not enough, and which fails the
// first ask of each name (a cold forward cache whose upstream lost it).
func TestWarmPasses(t *testing.T) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	good := map[string]int{}
	srv := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		mu.Lock()
		defer mu.Unlock()
		time.Sleep(time.Millisecond) // at most 1,000 answers a second
		name := r.Question[0].Name
		m := new(dns.Msg).SetRcode(r, dns.RcodeNameError)
		if _, asked := good[name]; !asked {
			m.Rcode = dns.RcodeServerFailure
			good[name] = 0
		} else {
			good[name]++
		}
		_ = w.WriteMsg(m)
	})}
	go func() { _ = srv.ActivateAndServe() }()
	defer srv.Shutdown()

	var names strings.Builder
	for i := range 100 {
		fmt.Fprintf(&names, "n%d.example\n", i)
	}
	qs, err := parseQueries(strings.NewReader(names.String()))
	if err != nil {
		t.Fatal(err)
	}
	const passes = 12
	start := time.Now()
	line := saturate(pc.LocalAddr().String(), "udp", qs, 4, 4, passes, 0, 0, "t")
	took := time.Since(start)
	mu.Lock()
	defer mu.Unlock()
	if len(good) != len(qs) {
		t.Fatalf("%d names asked, want %d: %s", len(good), len(qs), line)
	}
	total := 0
	for name, n := range good {
		total += n
		if n < passes-2 {
			t.Errorf("%s answered %d times in the warm-up, want about %d", name, n, passes)
		}
	}
	if total < passes*len(qs) {
		t.Errorf("%d answers in the warm-up, want at least %d", total, passes*len(qs))
	}
	if !strings.Contains(line, "warmup=") || took < time.Second {
		t.Errorf("warm-up took %v: %s", took, line)
	}
}

// Over TCP, the queries an answer read releases go out together, and no
// more than the window is ever in flight: a server that reads the stream
// sees several queries per read, never more than the window, and every
// answer it gives is counted.
func TestStreamPipelined(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var mu sync.Mutex
	most, answers := 0, 0
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				buf := make([]byte, 64<<10)
				have := 0
				for {
					n, err := c.Read(buf[have:])
					if err != nil {
						return
					}
					have += n
					var out []byte
					off, msgs := 0, 0
					for have-off >= 2 {
						l := int(binary.BigEndian.Uint16(buf[off:]))
						if have-off < 2+l {
							break
						}
						q := new(dns.Msg)
						if err := q.Unpack(buf[off+2 : off+2+l]); err != nil {
							return
						}
						b, _ := new(dns.Msg).SetRcode(q, dns.RcodeNameError).Pack()
						out = binary.BigEndian.AppendUint16(out, uint16(len(b)))
						out = append(out, b...)
						off += 2 + l
						msgs++
					}
					have = copy(buf, buf[off:have])
					mu.Lock()
					most, answers = max(most, msgs), answers+msgs
					mu.Unlock()
					time.Sleep(100 * time.Microsecond) // let the client's next queries queue up
					if _, err := c.Write(out); err != nil {
						return
					}
				}
			}()
		}
	}()
	qs, err := parseQueries(strings.NewReader("a.example\nb.example\n"))
	if err != nil {
		t.Fatal(err)
	}
	const window = 8
	line := saturate(l.Addr().String(), "tcp", qs, 2, window, 0, 300*time.Millisecond, 0, "t")
	kv := fields(t, line)
	mu.Lock()
	defer mu.Unlock()
	if kv["answers"] == 0 || kv["bad"] != 0 || kv["nxdomain"] != kv["answers"] {
		t.Errorf("want NXDOMAIN answers only: %s", line)
	}
	if kv["answers"] > float64(answers) {
		t.Errorf("%v answers counted, the server gave %d", kv["answers"], answers)
	}
	if most < 2 || most > window {
		t.Errorf("at most %d queries in one read, want 2..%d", most, window)
	}
}

// Over DNS over TLS the same generator answers are counted, and a server
// failing every query is counted as failing.
func TestStreamTLS(t *testing.T) {
	_, leaf := testpki.Server(t, "127.0.0.1")
	for _, rcode := range []int{dns.RcodeSuccess, dns.RcodeServerFailure} {
		l, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{leaf.TLS}})
		if err != nil {
			t.Fatal(err)
		}
		srv := &dns.Server{Listener: l, Net: "tcp-tls", Handler: dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
			m := new(dns.Msg).SetRcode(r, rcode)
			if rcode == dns.RcodeSuccess {
				m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: r.Question[0].Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60}, A: net.IPv4(10, 0, 0, 1)})
			}
			_ = w.WriteMsg(m)
		})}
		go func() { _ = srv.ActivateAndServe() }()
		qs, err := parseQueries(strings.NewReader("a.example\n"))
		if err != nil {
			t.Fatal(err)
		}
		kv := fields(t, saturate(l.Addr().String(), "tls", qs, 2, 4, 0, 200*time.Millisecond, 0, "t"))
		_ = srv.Shutdown()
		if rcode == dns.RcodeSuccess && (kv["answers"] == 0 || kv["bad"] != 0) {
			t.Errorf("NOERROR server: %v", kv)
		}
		if rcode == dns.RcodeServerFailure && (kv["answers"] != 0 || kv["bad"] == 0) {
			t.Errorf("SERVFAIL server: %v", kv)
		}
	}
}

// fields reads the key=value numbers of a result line.
func fields(t *testing.T, line string) map[string]float64 {
	t.Helper()
	kv := map[string]float64{}
	for _, f := range strings.Fields(line) {
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			continue
		}
		x, err := strconv.ParseFloat(strings.TrimSuffix(v, "s"), 64)
		if err != nil {
			t.Fatalf("%s in %q", f, line)
		}
		kv[k] = x
	}
	return kv
}
