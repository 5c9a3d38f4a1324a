package server

import (
	"context"
	"net"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/dnsd/dnsd/config"
	"github.com/dnsd/dnsd/pipeline"
	"github.com/miekg/dns"
	"golang.org/x/sys/unix"
)

// A reply the kernel refuses (here: to port 0) costs only itself: the
// replies queued before and after it in the same sendmmsg are sent
// (with a source address, as on a wildcard listener).
func TestSendmmsgSkipsRefusedReply(t *testing.T) {
	s := New(Options{Resolver: &fixedResolver{}, Observer: nopObserver{}})
	srv, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	client, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	rc, err := srv.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	r := s.newUDPReader(&unit{}, srv, rc)
	b := newUDPBatch()
	cport := client.LocalAddr().(*net.UDPAddr).Port
	for i, port := range []int{cport, cport, 0, cport, 0, cport} {
		sa := (*unix.RawSockaddrInet4)(unsafe.Pointer(&b.from[i]))
		sa.Family = unix.AF_INET
		sa.Addr = [4]byte{127, 0, 0, 1}
		sa.Port = uint16(port>>8) | uint16(port&0xff)<<8 // network order
		b.hdrs[i].Hdr.Namelen = unix.SizeofSockaddrInet4
		from, ok := sockaddrAddrPort(&b.from[i], unix.SizeofSockaddrInet4)
		if !ok {
			t.Fatal("bad test address")
		}
		var sc scratch
		sc.pack = s.packs.Get().(*[]byte)
		out := append((*sc.pack)[:0], byte('a'+i))
		s.handlers.Add(1)
		if !r.queue(b, i, &sc, out, from, from.Addr(), 0, nil) {
			t.Fatal("reply not queued")
		}
		if sc.pack != nil {
			t.Fatal("pack buffer still on the scratch")
		}
	}
	r.w.mu.Lock()
	r.flush()
	r.w.mu.Unlock()
	if r.w.n != 0 {
		t.Fatalf("%d replies left queued", r.w.n)
	}
	buf := make([]byte, 16)
	var got []byte
	for range 4 {
		_ = client.SetReadDeadline(time.Now().Add(5 * time.Second))
		n, err := client.Read(buf)
		if err != nil {
			t.Fatalf("after %q: %v", got, err)
		}
		got = append(got, buf[:n]...)
	}
	if string(got) != "abdf" {
		t.Errorf("received %q, want abdf", got)
	}
}

// Answering over a real UDP socket allocates nothing per query once the
// name is known: the reader's batches, reply queue and control-message
// buffer are its own. The client is a plain blocking socket driven by raw
// system calls, so that every allocation counted is the server's.
func TestUDPReaderAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts differ under the race detector")
	}
	ap := pipelineUDPServer(t).AddrPort()
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if err := unix.Connect(fd, &unix.SockaddrInet4{Port: int(ap.Port()), Addr: ap.Addr().As4()}); err != nil {
		t.Fatal(err)
	}
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Sec: 5}); err != nil {
		t.Fatal(err)
	}
	q := query("www.example.test.", dns.TypeA)
	q.SetEdns0(1232, false)
	in := pack(t, q)
	buf := make([]byte, 512)
	ask := func() { // blocking calls: the runtime's signals interrupt them
		_, err := unix.Write(fd, in)
		for err == unix.EINTR {
			_, err = unix.Write(fd, in)
		}
		if err != nil {
			t.Fatal(err)
		}
		n, err := unix.Read(fd, buf)
		for err == unix.EINTR {
			n, err = unix.Read(fd, buf)
		}
		if err != nil {
			t.Fatal(err)
		}
		if n < 12 || buf[0] != in[0] || buf[1] != in[1] || buf[3]&0xf != dns.RcodeSuccess || buf[7] != 1 {
			t.Fatalf("wrong answer: % x", buf[:n])
		}
	}
	for range 200 {
		ask()
	}
	// Some slack for the runtime's and the server's own background
	// work (timers, metrics); one allocation per query is 3000. On a
	// busy machine a batch held up across two of the watchdog's looks is
	// taken over (a new reader, goroutines: allocations that are not the
	// queries'), so the best of three rounds counts.
	const n = 3000
	best := uint64(1 << 62)
	for range 3 {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for range n {
			ask()
		}
		runtime.ReadMemStats(&after)
		best = min(best, after.Mallocs-before.Mallocs)
	}
	if best > n/10 {
		t.Errorf("%d allocations for %d queries over UDP, want next to none", best, n)
	}
}

// A reader busy with back-to-back queries parks once the traffic stops:
// an idle server burns no CPU.
func TestUDPReaderParksWhenIdle(t *testing.T) {
	c, err := net.Dial("udp", pipelineUDPServer(t).String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	q := query("www.example.test.", dns.TypeA)
	in := pack(t, q)
	buf := make([]byte, 512)
	// Back-to-back queries: datagrams a few µs apart, so the reader
	// spins between them.
	for range 2000 {
		if _, err := c.Write(in); err != nil {
			t.Fatal(err)
		}
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Read(buf); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(20 * time.Millisecond)
	cpu := func() time.Duration {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			t.Fatal(err)
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	before := cpu()
	time.Sleep(300 * time.Millisecond)
	if used := cpu() - before; used > 100*time.Millisecond {
		t.Errorf("idle server used %v of CPU in 300 ms", used)
	}
}

// pipelineUDPServer serves pipelineServer's zone on a loopback UDP socket
// until the test ends.
func pipelineUDPServer(t *testing.T) *net.UDPAddr {
	t.Helper()
	s := pipelineServer(t)
	serveForTest(t, s, []config.Listen{{Proto: "udp", Addr: "127.0.0.1:0"}}, Settings{ACL: config.ACL{Default: true}})
	return s.Addrs()[0].(*net.UDPAddr)
}

// TestUDPWaitingTakesOverAtOnce: a datagram whose source says it will wait
// (pipeline.Waiting, as a forward does before it asks upstream) holds up
// none of the datagrams after it, with the watchdog looking only once an
// hour: the source's word alone hands the socket to a new reader and the
// rest of the batch to goroutines of their own.
func TestUDPWaitingTakesOverAtOnce(t *testing.T) {
	release := make(chan struct{})
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	res := &fakeResolver{fn: func(ctx context.Context, req *pipeline.Request) pipeline.Response {
		if strings.HasPrefix(req.Name, "slow") {
			pipeline.Waiting(ctx)
			<-release
		}
		return answerA(req, 1)
	}}
	s := New(Options{Resolver: res})
	s.watch.every = time.Hour
	serveForTest(t, s, []config.Listen{{Proto: "udp", Addr: "127.0.0.1:0"}}, Settings{ACL: config.ACL{Default: true}})
	t.Cleanup(free) // before the server's shutdown
	c, err := net.Dial("udp", s.Addrs()[0].String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	slowRounds(t, c, free, 20)
}
