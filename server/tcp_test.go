package server

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/dnsd/dnsd/authority"
	"github.com/dnsd/dnsd/config"
	"github.com/dnsd/dnsd/internal/dnstest"
	"github.com/dnsd/dnsd/pipeline"
)

// pipelined packs queries, each with its length prefix, into one write.
func pipelined(t *testing.T, qs ...*dns.Msg) []byte {
	t.Helper()
	var b []byte
	for _, q := range qs {
		m := pack(t, q)
		b = binary.BigEndian.AppendUint16(b, uint16(len(m)))
		b = append(b, m...)
	}
	return b
}

func queryID(name string, id uint16) *dns.Msg {
	q := query(name, dns.TypeA)
	q.Id = id
	return q
}

// sleepOn makes a resolver that answers names in slow after d (or when
// ctx ends), the others at once. It says first that it will wait, as a
// forward does.
func sleepOn(d time.Duration, slow ...string) func(ctx context.Context, req *pipeline.Request) pipeline.Response {
	return sleeper(d, true, slow)
}

// sleepSilently is sleepOn for a source that waits without saying so.
func sleepSilently(d time.Duration, slow ...string) func(ctx context.Context, req *pipeline.Request) pipeline.Response {
	return sleeper(d, false, slow)
}

func sleeper(d time.Duration, says bool, slow []string) func(ctx context.Context, req *pipeline.Request) pipeline.Response {
	return func(ctx context.Context, req *pipeline.Request) pipeline.Response {
		for _, n := range slow {
			if req.Name == n {
				if says {
					pipeline.Waiting(ctx)
				}
				select {
				case <-time.After(d):
				case <-ctx.Done():
				}
			}
		}
		return answerA(req, 1)
	}
}

// TestPipelinedSlowQueryHoldsUpNothing: on one TCP or TLS connection a
// slow query and then ten fast ones; the fast answers come first (out of
// order), each with its ID, and the slow one last. The slow query's
// source does not say it waits: the watchdog finds it.
func TestPipelinedSlowQueryHoldsUpNothing(t *testing.T) {
	res := &fakeResolver{fn: sleepSilently(800*time.Millisecond, "slow.test.")}
	overStreams(t, res, Settings{}, func(t *testing.T, ts *testServer, dial func(t *testing.T) net.Conn) {
		c := dial(t)
		// The watchdog asleep: the slow query must wake it.
		dnstest.Eventually(t, "the watchdog asleep", 2*time.Second, ts.watch.parked.Load)
		start := time.Now()
		if _, err := c.Write(pipelined(t, queryID("slow.test.", 1))); err != nil {
			t.Fatal(err)
		}
		var fast []*dns.Msg
		for i := range 10 {
			fast = append(fast, queryID(fmt.Sprintf("fast-%d.test.", i), uint16(100+i)))
		}
		if _, err := c.Write(pipelined(t, fast...)); err != nil {
			t.Fatal(err)
		}
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		for i := range 10 {
			r := readTCPMsg(t, c)
			if r.Id < 100 || r.Id >= 110 || r.Question[0].Name != fmt.Sprintf("fast-%d.test.", r.Id-100) || len(r.Answer) != 1 {
				t.Fatalf("answer %d: id %d %v; want the fast ones first", i, r.Id, r.Question)
			}
		}
		if d := time.Since(start); d > 500*time.Millisecond {
			t.Errorf("fast answers took %s behind the slow query", d)
		}
		if r := readTCPMsg(t, c); r.Id != 1 || r.Question[0].Name != "slow.test." || len(r.Answer) != 1 {
			t.Fatalf("last answer: id %d %v", r.Id, r.Question)
		}
	})
}

// TestWaitingRelievesAtOnce: a query whose source says it will wait
// (pipeline.Waiting, as a forward does before it asks upstream) holds up
// none of the queries behind it on the connection, with the watchdog
// unable to help (its lock held): the source's word alone starts a new
// reader.
func TestWaitingRelievesAtOnce(t *testing.T) {
	release := make(chan struct{}, 2) // a token per connection's slow query
	res := &fakeResolver{fn: func(ctx context.Context, req *pipeline.Request) pipeline.Response {
		if req.Name == "slow.test." {
			pipeline.Waiting(ctx)
			select {
			case <-release:
			case <-ctx.Done():
			}
		}
		return answerA(req, 1)
	}}
	overStreams(t, res, Settings{}, func(t *testing.T, ts *testServer, dial func(t *testing.T) net.Conn) {
		c := dial(t)
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Write(pipelined(t, queryID("first.test.", 7))); err != nil {
			t.Fatal(err)
		}
		readAnswersOnce(t, c, map[uint16]string{7: "first.test."}) // the connection is watched
		ts.watch.mu.Lock()
		var once sync.Once
		unlock := func() { once.Do(ts.watch.mu.Unlock) }
		defer unlock()

		qs := []*dns.Msg{queryID("slow.test.", 1)}
		want := map[uint16]string{}
		for i := range 10 {
			name := fmt.Sprintf("fast-%d.test.", i)
			want[uint16(100+i)] = name
			qs = append(qs, queryID(name, uint16(100+i)))
		}
		if _, err := c.Write(pipelined(t, qs...)); err != nil {
			t.Fatal(err)
		}
		readAnswersOnce(t, c, want)
		unlock()
		release <- struct{}{}
		readAnswersOnce(t, c, map[uint16]string{1: "slow.test."})
	})
}

// TestPipelineBound: a burst of three times limits.max_tcp_pipeline
// queries that all wait: at most that many are answered at once (the
// reader waits), and every query is answered once let go.
func TestPipelineBound(t *testing.T) {
	const bound = 5
	release := make(chan struct{})
	var cur, most atomic.Int32
	res := &fakeResolver{fn: func(ctx context.Context, req *pipeline.Request) pipeline.Response {
		n := cur.Add(1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		select {
		case <-release:
		case <-ctx.Done():
		}
		cur.Add(-1)
		return answerA(req, 1)
	}}
	ts := startServer(t, res, []config.Listen{{Proto: "tcp", Addr: "127.0.0.1:0"}}, Settings{ACL: config.ACL{Default: true}, Limits: config.Limits{MaxTCPPipeline: bound}})
	c, err := net.Dial("tcp", ts.addr(t, "tcp"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const n = 3 * bound
	var qs []*dns.Msg
	for i := range n {
		qs = append(qs, queryID(fmt.Sprintf("q-%d.test.", i), uint16(i)))
	}
	if _, err := c.Write(pipelined(t, qs...)); err != nil {
		t.Fatal(err)
	}
	dnstest.Eventually(t, "the connection's bound of queries in flight", 5*time.Second, func() bool { return cur.Load() == bound })
	time.Sleep(50 * time.Millisecond) // room to go over, were it possible
	if m := most.Load(); m != bound {
		t.Fatalf("%d queries answered at once, want %d", m, bound)
	}
	close(release)
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	seen := map[uint16]bool{}
	for range n {
		r := readTCPMsg(t, c)
		if seen[r.Id] || r.Question[0].Name != fmt.Sprintf("q-%d.test.", r.Id) {
			t.Fatalf("answer id %d %v (seen before: %t)", r.Id, r.Question, seen[r.Id])
		}
		seen[r.Id] = true
	}
}

// TestPipelineClientGoneLeaksNothing: clients that pipeline slow and fast
// queries and close (or reset) at once leave no goroutine and no
// connection count behind.
func TestPipelineClientGoneLeaksNothing(t *testing.T) {
	res := &fakeResolver{fn: sleepOn(300*time.Millisecond, "slow.test.")}
	ts := startServer(t, res, []config.Listen{{Proto: "tcp", Addr: "127.0.0.1:0"}}, Settings{ACL: config.ACL{Default: true}})
	addr := ts.addr(t, "tcp")
	dnstest.Exchange(t, "tcp", addr, query("warm.test.", dns.TypeA))
	dnstest.Eventually(t, "the warm-up connection to close", 5*time.Second, func() bool { return ts.tcpConns.Load() == 0 })
	before := runtime.NumGoroutine()

	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Error(err)
				return
			}
			var qs []*dns.Msg
			for j := range defaultPipeline + 4 {
				name := "fast.test."
				if j%2 == 0 {
					name = "slow.test."
				}
				qs = append(qs, queryID(name, uint16(j)))
			}
			if _, err := c.Write(pipelined(t, qs...)); err != nil {
				t.Error(err)
			}
			time.Sleep(20 * time.Millisecond)
			if i%2 == 0 {
				_ = c.(*net.TCPConn).SetLinger(0) // reset, not FIN
			}
			_ = c.Close()
		}()
	}
	wg.Wait()
	dnstest.Eventually(t, "the connections to be gone", 5*time.Second, func() bool {
		return ts.tcpConns.Load() == 0 && ts.tcpPer.len() == 0
	})
	dnstest.Eventually(t, fmt.Sprintf("goroutines back to %d", before), 5*time.Second, func() bool {
		return runtime.NumGoroutine() <= before
	})
}

// TestPipelineIdleTimeout: a connection with a query in flight is not
// idle; once answered it is closed after tcp_idle_timeout.
func TestPipelineIdleTimeout(t *testing.T) {
	res := &fakeResolver{fn: sleepOn(600*time.Millisecond, "slow.test.")}
	ts := startServer(t, res, []config.Listen{{Proto: "tcp", Addr: "127.0.0.1:0"}},
		Settings{ACL: config.ACL{Default: true}, Limits: config.Limits{TCPIdleTimeout: 200 * time.Millisecond}})
	c, err := net.Dial("tcp", ts.addr(t, "tcp"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write(pipelined(t, queryID("slow.test.", 7))); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if r := readTCPMsg(t, c); r.Id != 7 || len(r.Answer) != 1 {
		t.Fatalf("answer %v", r)
	}
	answered := time.Now()
	if _, err := c.Read(make([]byte, 2)); !errors.Is(err, io.EOF) {
		t.Fatalf("read after the answer: %v, want EOF once idle", err)
	}
	if d := time.Since(answered); d < 150*time.Millisecond || d > 2*time.Second {
		t.Errorf("closed %s after the answer, want about the idle timeout (200ms)", d)
	}
}

// delayedPipeline is a real pipeline whose answers to names starting
// with "slow" come after a while.
type delayedPipeline struct {
	*pipeline.Pipeline
}

func (p delayedPipeline) Resolve(ctx context.Context, req *pipeline.Request) pipeline.Response {
	if len(req.Name) > 4 && req.Name[:4] == "slow" {
		time.Sleep(time.Duration(1+int(req.Msg.Id)%20) * time.Millisecond)
	}
	return p.Pipeline.Resolve(ctx, req)
}

// TestPipelinedTransferIsContiguous: an AXFR pipelined between queries
// that are answered meanwhile: its messages come one after the other,
// no other answer among them, and every query is answered.
func TestPipelinedTransferIsContiguous(t *testing.T) {
	src := &listSource{}
	for i := range 20000 {
		src.rrs = append(src.rrs, &dns.A{Hdr: dns.RR_Header{Name: fmt.Sprintf("host-%d.example.test.", i), Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60}, A: []byte{10, 0, byte(i >> 8), byte(i)}})
	}
	p, err := pipeline.New([]pipeline.ZoneSpec{{Names: []string{"example.test."}, Sources: []pipeline.SourceEntry{{Source: src}}}},
		pipeline.Options{})
	if err != nil {
		t.Fatal(err)
	}
	auth := zonesOf(t, p, authority.TransferSpec{
		Zones: []string{"example.test."}, Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")},
	})
	s := New(Options{Resolver: delayedPipeline{p}, Authority: auth})
	if err := s.Apply(context.Background(), []config.Listen{{Proto: "tcp", Addr: "127.0.0.1:0"}}, Settings{ACL: config.ACL{Default: true}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Shutdown(context.Background()) })
	c, err := net.Dial("tcp", s.Addrs()[0].String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	const axfrID = 9999
	var qs []*dns.Msg
	for i := range 40 {
		qs = append(qs, queryID(fmt.Sprintf("slow-%d.example.test.", i), uint16(i)))
		if i == 5 {
			x := new(dns.Msg)
			x.SetAxfr("example.test.")
			x.Id = axfrID
			qs = append(qs, x)
		}
	}
	if _, err := c.Write(pipelined(t, qs...)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // let answers pile up behind the transfer
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	var (
		answers  = map[uint16]bool{}
		records  int
		soas     int
		msgs     int
		runEnded bool
	)
	for soas < 2 || len(answers) < 40 {
		r := readTCPMsg(t, c)
		if r.Id != axfrID {
			if answers[r.Id] || r.Rcode != dns.RcodeNameError {
				t.Fatalf("answer %d: %v (twice: %t)", r.Id, r, answers[r.Id])
			}
			answers[r.Id] = true
			if msgs > 0 && soas < 2 {
				runEnded = true
			}
			continue
		}
		if runEnded {
			t.Fatalf("transfer message %d came after another answer inside the transfer", msgs+1)
		}
		msgs++
		for _, rr := range r.Answer {
			records++
			if rr.Header().Rrtype == dns.TypeSOA {
				soas++
			}
		}
	}
	if records != 20003 || msgs < 3 {
		t.Fatalf("%d records in %d messages, want 20003 in several", records, msgs)
	}
}
