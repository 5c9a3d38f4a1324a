package server

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/dnsd/dnsd/config"
	"github.com/dnsd/dnsd/internal/dnstest"
	"github.com/dnsd/dnsd/pipeline"
)

// freeUDPAddr returns a loopback UDP address that was free a moment ago.
func freeUDPAddr(t *testing.T) string {
	t.Helper()
	c, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.LocalAddr().String()
}

// listenRecorder answers A 192.0.2.<n> and records the listen entry of
// every query it is asked.
type listenRecorder struct {
	n       int
	mu      sync.Mutex
	listens map[string]int
}

func (r *listenRecorder) Resolve(ctx context.Context, req *pipeline.Request) pipeline.Response {
	r.mu.Lock()
	if r.listens == nil {
		r.listens = map[string]int{}
	}
	r.listens[req.Listen]++
	r.mu.Unlock()
	return answerA(req, r.n)
}

func (r *listenRecorder) asked(listen string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.listens[listen]
}

// A listener that a change adds answers nothing until the change is
// committed, and from then on only with the committed resolver and
// settings: queries sent to it while the commit happens are never
// answered by the resolver it replaced.
func TestCommitNewListenerAnswersOnlyWithNewGeneration(t *testing.T) {
	oldRes, newRes := &listenRecorder{n: 1}, &listenRecorder{n: 2}
	s := New(Options{Resolver: oldRes, Observer: nopObserver{}})
	first := config.Listen{Proto: "udp", Addr: "127.0.0.1:0"}
	serveForTest(t, s, []config.Listen{first}, Settings{ACL: config.ACL{Default: true}})
	oldAddr := s.Addrs()[0].String()
	added := config.Listen{Proto: "udp", Addr: freeUDPAddr(t)}

	c, err := s.Prepare(context.Background(), []config.Listen{first, added}, Settings{ACL: config.ACL{Default: true}})
	if err != nil {
		t.Fatalf("Prepare: %v", err)
	}
	// Prepared, not committed: the new socket is bound but nobody reads
	// it; the old listener answers as before.
	conn, err := net.Dial("udp", added.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var sent []uint16
	send := func() {
		m := query("a.test.", dns.TypeA)
		b, err := m.Pack()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Write(b); err != nil {
			t.Fatal(err)
		}
		sent = append(sent, m.Id)
	}
	send()
	_ = conn.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	if n, err := conn.Read(make([]byte, 512)); err == nil {
		t.Fatalf("the prepared listener answered %d bytes before the commit", n)
	}
	answered := make(chan string, 1)
	go func() {
		r, err := dnstest.Client{Net: "udp"}.Exchange(query("a.test.", dns.TypeA), oldAddr)
		if err != nil || len(r.Answer) != 1 {
			answered <- "no answer"
			return
		}
		answered <- r.Answer[0].(*dns.A).A.String()
	}()
	if a := <-answered; a != "192.0.2.1" {
		t.Fatalf("the kept listener answered %s during the change, want the old resolver's 192.0.2.1", a)
	}

	// Queries keep coming to the new socket while the commit happens.
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-done:
				return
			default:
			}
			send()
			time.Sleep(100 * time.Microsecond)
		}
	})
	time.Sleep(5 * time.Millisecond)
	s.Commit(c, newRes, nil)
	time.Sleep(5 * time.Millisecond)
	close(done)
	wg.Wait()

	want := len(sent)
	buf := make([]byte, 512)
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	got := 0
	for got < want {
		n, err := conn.Read(buf)
		if err != nil {
			break // datagrams beyond the socket's buffer may be dropped
		}
		var m dns.Msg
		if err := m.Unpack(buf[:n]); err != nil {
			t.Fatal(err)
		}
		if len(m.Answer) != 2 {
			t.Fatalf("answer %d from the new listener has %d records, want the new resolver's 2: %v", got, len(m.Answer), &m)
		}
		got++
		_ = conn.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
	}
	if got == 0 {
		t.Fatal("the new listener answered nothing after the commit")
	}
	listen := "udp " + added.Addr
	if n := oldRes.asked(listen); n != 0 {
		t.Fatalf("the old resolver was asked %d queries from the new listener", n)
	}
	if n := newRes.asked(listen); n < got {
		t.Fatalf("the new resolver was asked %d queries from the new listener, %d answered", n, got)
	}
	if a := dnstest.Exchange(t, "udp", oldAddr, query("a.test.", dns.TypeA)); len(a.Answer) != 2 {
		t.Fatalf("the kept listener answers %d records after the commit, want the new resolver's 2", len(a.Answer))
	}
	if s.Current().Resolver() != newRes {
		t.Fatal("Current is not the committed generation")
	}
}

// Abort leaves the server as it was: the socket the change bound is
// closed again, the settings and resolver are the old ones.
func TestAbortChangesNothing(t *testing.T) {
	res := &listenRecorder{n: 1}
	s := New(Options{Resolver: res, Observer: nopObserver{}})
	first := config.Listen{Proto: "udp", Addr: "127.0.0.1:0"}
	serveForTest(t, s, []config.Listen{first}, Settings{ACL: config.ACL{Default: true}})
	before := s.Current()
	added := config.Listen{Proto: "udp", Addr: freeUDPAddr(t)}
	c, err := s.Prepare(context.Background(), []config.Listen{first, added}, Settings{ACL: config.ACL{Default: false}})
	if err != nil {
		t.Fatalf("Prepare: %v", err)
	}
	s.Abort(context.Background(), c)
	if s.Current() != before {
		t.Fatal("Abort changed the generation")
	}
	if got := len(s.Addrs()); got != 1 {
		t.Fatalf("%d addresses after Abort, want 1", got)
	}
	l, err := net.ListenPacket("udp", added.Addr)
	if err != nil {
		t.Fatalf("the aborted change still holds %s: %v", added.Addr, err)
	}
	_ = l.Close()
	if a := dnstest.Exchange(t, "udp", s.Addrs()[0].String(), query("a.test.", dns.TypeA)); a.Rcode != dns.RcodeSuccess || len(a.Answer) != 1 {
		t.Fatalf("after Abort the listener answers %s with %d records, want the old settings' answer", dns.RcodeToString[a.Rcode], len(a.Answer))
	}
	// The server takes the next change.
	if err := s.Apply(context.Background(), []config.Listen{first}, Settings{ACL: config.ACL{Default: true}}); err != nil {
		t.Fatalf("Apply after Abort: %v", err)
	}
}
