package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/dnsd/dnsd/config"
	"github.com/dnsd/dnsd/internal/dnstest"
	"github.com/dnsd/dnsd/pipeline"
)

// The reader of a TCP or TLS connection answers every complete query it
// has read before it writes, and writes the answers it holds together
// just before it would wait for more input. These tests check what that
// must not change: every answer once, none held back for input that has
// not come, slow answers holding up nothing, a client that does not read
// not holding the server.

// overStreams starts a server with res on a TCP and a TLS listener (set,
// with every client allowed and the test certificate) and runs f once for
// each, with a function that dials it.
func overStreams(t *testing.T, res *fakeResolver, set Settings, f func(t *testing.T, ts *testServer, dial func(t *testing.T) net.Conn)) {
	t.Helper()
	srvTLS, cliTLS := selfSigned(t)
	set.TLS = srvTLS
	set.ACL = config.ACL{Default: true}
	ts := startServer(t, res, []config.Listen{{Proto: "tcp", Addr: "127.0.0.1:0"}, {Proto: "tls", Addr: "127.0.0.1:0"}}, set)
	addrs := ts.Addrs()
	for _, tc := range []struct {
		name string
		dial func() (net.Conn, error)
	}{
		{"tcp", func() (net.Conn, error) { return net.Dial("tcp", addrs[0].String()) }},
		{"tls", func() (net.Conn, error) { return tls.Dial("tcp", addrs[1].String(), cliTLS) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f(t, ts, func(t *testing.T) net.Conn {
				t.Helper()
				c, err := tc.dial()
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { c.Close() })
				return c
			})
		})
	}
}

// readAnswersOnce reads len(want) answers from c: each ID of want once,
// for the name want gives it, with one A record.
func readAnswersOnce(t *testing.T, c net.Conn, want map[uint16]string) {
	t.Helper()
	seen := make(map[uint16]bool, len(want))
	for range want {
		r := readTCPMsg(t, c)
		name, ok := want[r.Id]
		if !ok || seen[r.Id] || len(r.Question) != 1 || r.Question[0].Name != name || len(r.Answer) != 1 {
			t.Fatalf("answer %d: id %d %v, %d records (expected: %t, seen before: %t)", len(seen), r.Id, r.Question, len(r.Answer), ok, seen[r.Id])
		}
		seen[r.Id] = true
	}
}

// TestPipelinedBurstAnsweredOnce: a thousand queries in one write get a
// thousand answers, one per ID, each for its own question; the connection
// then answers one more query on its own.
func TestPipelinedBurstAnsweredOnce(t *testing.T) {
	overStreams(t, nil, Settings{}, func(t *testing.T, ts *testServer, dial func(t *testing.T) net.Conn) {
		c := dial(t)
		const n = 1000
		want := make(map[uint16]string, n)
		var qs []*dns.Msg
		for i := range n {
			name := fmt.Sprintf("q-%d.test.", i)
			want[uint16(i)] = name
			qs = append(qs, queryID(name, uint16(i)))
		}
		wire := pipelined(t, qs...)
		errc := make(chan error, 1)
		go func() { // the answers come back while the queries go out
			_, err := c.Write(wire)
			errc <- err
		}()
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		readAnswersOnce(t, c, want)
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
		if _, err := c.Write(pipelined(t, queryID("last.test.", 4242))); err != nil {
			t.Fatal(err)
		}
		readAnswersOnce(t, c, map[uint16]string{4242: "last.test."})
	})
}

// TestQueriesSplitAcrossReads: queries cut anywhere (inside the length
// prefix, inside the message, several in one piece with the last one
// cut) are put together again; and the answer to a complete query comes
// while the next one is still incomplete: it is not held back for it.
func TestQueriesSplitAcrossReads(t *testing.T) {
	overStreams(t, nil, Settings{}, func(t *testing.T, ts *testServer, dial func(t *testing.T) net.Conn) {
		c := dial(t)
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		want := map[uint16]string{}
		var qs []*dns.Msg
		for i := range 6 {
			name := fmt.Sprintf("split-%d.test.", i)
			want[uint16(10+i)] = name
			qs = append(qs, queryID(name, uint16(10+i)))
		}
		wire := pipelined(t, qs...)
		one := len(pipelined(t, qs[0]))
		// 1 byte, the rest of the prefix, part of the message, the rest
		// of it with 2.5 more queries, then the rest.
		cuts := []int{1, 2, 9, one, 3*one + one/2, len(wire)}
		prev := 0
		for _, cut := range cuts {
			if _, err := c.Write(wire[prev:cut]); err != nil {
				t.Fatal(err)
			}
			prev = cut
			time.Sleep(20 * time.Millisecond) // separate reads on the server
		}
		readAnswersOnce(t, c, want)

		// A complete query and the start of the next one: the first
		// answer comes before the rest is sent.
		a := pipelined(t, queryID("first.test.", 1))
		b := pipelined(t, queryID("second.test.", 2))
		if _, err := c.Write(append(a, b[:5]...)); err != nil {
			t.Fatal(err)
		}
		_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
		readAnswersOnce(t, c, map[uint16]string{1: "first.test."})
		if _, err := c.Write(b[5:]); err != nil {
			t.Fatal(err)
		}
		readAnswersOnce(t, c, map[uint16]string{2: "second.test."})
	})
}

// TestLargeQueryAmongSmallOnes: a query larger than the connection's read
// buffer (EDNS0 padding), pipelined between small ones, whole and cut in
// two: all are answered, and small ones after it too.
func TestLargeQueryAmongSmallOnes(t *testing.T) {
	overStreams(t, nil, Settings{}, func(t *testing.T, ts *testServer, dial func(t *testing.T) net.Conn) {
		c := dial(t)
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		big := queryID("big.test.", 2)
		big.SetEdns0(1232, false)
		opt := big.IsEdns0()
		opt.Option = append(opt.Option, &dns.EDNS0_PADDING{Padding: make([]byte, 3*tcpReadSize)})
		wire := pipelined(t, queryID("small-1.test.", 1), big, queryID("small-3.test.", 3))
		want := map[uint16]string{1: "small-1.test.", 2: "big.test.", 3: "small-3.test."}
		if _, err := c.Write(wire); err != nil {
			t.Fatal(err)
		}
		readAnswersOnce(t, c, want)
		half := len(wire) / 2
		for _, part := range [][]byte{wire[:half], wire[half:]} {
			if _, err := c.Write(part); err != nil {
				t.Fatal(err)
			}
			time.Sleep(20 * time.Millisecond)
		}
		readAnswersOnce(t, c, want)
		if _, err := c.Write(pipelined(t, queryID("after.test.", 4))); err != nil {
			t.Fatal(err)
		}
		readAnswersOnce(t, c, map[uint16]string{4: "after.test."})
	})
}

// TestSlowQueryInsideBurst: a slow query in the middle of one write of
// fast ones: the fast answers, those given before it too, come long
// before it, and it comes last.
func TestSlowQueryInsideBurst(t *testing.T) {
	res := &fakeResolver{fn: sleepOn(800*time.Millisecond, "slow.test.")}
	overStreams(t, res, Settings{}, func(t *testing.T, ts *testServer, dial func(t *testing.T) net.Conn) {
		c := dial(t)
		want := map[uint16]string{}
		var qs []*dns.Msg
		for i := range 10 {
			if i == 5 {
				qs = append(qs, queryID("slow.test.", 999))
			}
			name := fmt.Sprintf("fast-%d.test.", i)
			want[uint16(100+i)] = name
			qs = append(qs, queryID(name, uint16(100+i)))
		}
		start := time.Now()
		if _, err := c.Write(pipelined(t, qs...)); err != nil {
			t.Fatal(err)
		}
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		readAnswersOnce(t, c, want)
		if d := time.Since(start); d > 500*time.Millisecond {
			t.Errorf("fast answers took %s beside the slow query", d)
		}
		readAnswersOnce(t, c, map[uint16]string{999: "slow.test."})
	})
}

// TestClientNotReading: a client that sends queries with large answers
// and never reads them: the server's writes block, and the connection is
// closed once a write has waited tcp_idle_timeout; meanwhile other
// connections are answered, and nothing is left behind.
func TestClientNotReading(t *testing.T) {
	res := &fakeResolver{fn: func(_ context.Context, req *pipeline.Request) pipeline.Response {
		return answerA(req, 200) // about 3 KiB
	}}
	const idle = 300 * time.Millisecond
	overStreams(t, res, Settings{Limits: config.Limits{TCPIdleTimeout: idle}}, func(t *testing.T, ts *testServer, dial func(t *testing.T) net.Conn) {
		dnstest.Eventually(t, "no connection open", 5*time.Second, func() bool { return ts.tcpConns.Load() == 0 })
		before := runtime.NumGoroutine()
		stuck := dial(t)
		q := queryID("big.test.", 1)
		q.SetEdns0(4096, false)
		var burst []*dns.Msg
		for range 100 {
			burst = append(burst, q)
		}
		wire := pipelined(t, burst...)
		// Write until the server no longer reads (its writes block), for
		// at most a few seconds.
		_ = stuck.SetWriteDeadline(time.Now().Add(3 * time.Second))
		var err error
		for err == nil {
			_, err = stuck.Write(wire)
		}
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			t.Logf("writes ended with %v", err) // closed by the server already
		}

		// Another client is answered meanwhile.
		other := dial(t)
		_ = other.SetReadDeadline(time.Now().Add(2 * time.Second))
		if _, err := other.Write(pipelined(t, queryID("other.test.", 7))); err != nil {
			t.Fatal(err)
		}
		if r := readTCPMsg(t, other); r.Id != 7 || len(r.Answer) != 200 {
			t.Fatalf("other client: id %d, %d records", r.Id, len(r.Answer))
		}
		other.Close()

		dnstest.Eventually(t, "the stuck connection to be closed", 10*idle+3*time.Second, func() bool { return ts.tcpConns.Load() == 0 })
		stuck.Close()
		dnstest.Eventually(t, fmt.Sprintf("goroutines back to %d", before), 5*time.Second, func() bool {
			return runtime.NumGoroutine() <= before
		})
	})
}

// TestSlowAnswersAfterClientDone: a client asks a slow query, and once it
// is answered another slow one and a fast one, then closes its side (it
// will send nothing more): every answer comes, the slow ones too, though
// the readers that began them were relieved (the second by a reader that
// a relieved one started).
func TestSlowAnswersAfterClientDone(t *testing.T) {
	res := &fakeResolver{fn: sleepOn(300*time.Millisecond, "slow.test.")}
	overStreams(t, res, Settings{}, func(t *testing.T, ts *testServer, dial func(t *testing.T) net.Conn) {
		c := dial(t)
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Write(pipelined(t, queryID("slow.test.", 1))); err != nil {
			t.Fatal(err)
		}
		readAnswersOnce(t, c, map[uint16]string{1: "slow.test."})
		if _, err := c.Write(pipelined(t, queryID("slow.test.", 2), queryID("fast.test.", 3))); err != nil {
			t.Fatal(err)
		}
		switch c := c.(type) {
		case *net.TCPConn:
			_ = c.CloseWrite()
		case *tls.Conn:
			_ = c.CloseWrite()
		}
		readAnswersOnce(t, c, map[uint16]string{3: "fast.test."})
		readAnswersOnce(t, c, map[uint16]string{2: "slow.test."})
	})
}
