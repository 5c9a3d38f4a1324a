//go:build linux

package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/miekg/dns"
	"golang.org/x/net/ipv4"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:5353", "server address")
	proto := flag.String("proto", "udp", "udp, tcp or tls (DNS over TLS; the certificate is not checked) in saturation mode")
	name := flag.String("name", "db.example.internal.", "query name (without -queries)")
	qtype := flag.String("type", "A", "query type (without -queries)")
	queries := flag.String("queries", "", `file of "name type" lines to send in turn (dnsperf's format); overrides -name and -type`)
	conns := flag.Int("conns", 8, "sockets (saturation mode)")
	window := flag.Int("window", 16, "queries in flight per socket (saturation mode)")
	rate := flag.Int("rate", 0, "send this many queries per second and report latency percentiles instead of saturating")
	dur := flag.Duration("duration", 5*time.Second, "measuring time (after 1s warm-up)")
	passes := flag.Int("warm-passes", 0, "saturation mode: the warm-up lasts at least 1s and until every query was answered (NOERROR or NXDOMAIN) about this many times")
	pid := flag.Int("pid", 0, "server pid, to report its CPU time per answer")
	label := flag.String("label", "", "label for the result line")
	flag.Parse()

	var qs [][]byte
	var err error
	if *queries != "" {
		f, ferr := os.Open(*queries)
		if ferr != nil {
			fatal(ferr)
		}
		qs, err = parseQueries(f)
		f.Close()
	} else {
		qs, err = parseQueries(strings.NewReader(*name + " " + *qtype))
	}
	if err != nil {
		fatal(err)
	}
	if *proto != "udp" && *proto != "tcp" && *proto != "tls" {
		fatal(fmt.Errorf("-proto %q: want udp, tcp or tls", *proto))
	}
	if *rate > 0 {
		if *proto != "udp" {
			fatal(errors.New("-rate: UDP only"))
		}
		conn, err := net.Dial("udp", *addr)
		if err != nil {
			fatal(err)
		}
		// A stall of this process (the machine is shared) must not drop
		// answers in its own socket and count them as the server's loss.
		bigReadBuffer(conn.(*net.UDPConn), 8<<20)
		fmt.Println(fixedRate(conn.(*net.UDPConn), qs, *rate, *dur, *label))
		return
	}
	fmt.Println(saturate(*addr, *proto, qs, *conns, *window, *passes, *dur, *pid, *label))
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "loadgen:", err)
	os.Exit(2)
}

// parseQueries packs one query (EDNS0, 1232 bytes) per "name type" line;
// blank lines and lines starting with '#' or ';' are skipped.
func parseQueries(r io.Reader) ([][]byte, error) {
	var qs [][]byte
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		f := strings.Fields(line)
		typ := "A"
		if len(f) > 1 {
			typ = strings.ToUpper(f[1])
		}
		t, ok := dns.StringToType[typ]
		if !ok || len(f) > 2 {
			return nil, fmt.Errorf("line %d: want \"name [type]\", got %q", n, line)
		}
		m := new(dns.Msg)
		m.SetQuestion(dns.Fqdn(f[0]), t)
		m.SetEdns0(1232, false)
		b, err := m.Pack()
		if err != nil {
			return nil, fmt.Errorf("line %d: %v", n, err)
		}
		qs = append(qs, b)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(qs) == 0 {
		return nil, errors.New("no queries")
	}
	return qs, nil
}

// Kinds of response, by rcode and answer count.
const (
	kindAnswer = iota // NOERROR with at least one answer record
	kindNoData        // NOERROR, no answer record
	kindNX            // NXDOMAIN
	kindBad           // any other rcode, or not a DNS response
)

func classify(b []byte) int {
	if len(b) < 12 || b[2]&0x80 == 0 {
		return kindBad
	}
	switch b[3] & 0x0f {
	case dns.RcodeSuccess:
		if binary.BigEndian.Uint16(b[6:8]) > 0 {
			return kindAnswer
		}
		return kindNoData
	case dns.RcodeNameError:
		return kindNX
	}
	return kindBad
}

type counts [4]atomic.Int64

// answered is every response that is a proper answer: records, NODATA or
// NXDOMAIN.
func (c *counts) answered() int64 {
	return c[kindAnswer].Load() + c[kindNoData].Load() + c[kindNX].Load()
}

func (c *counts) String() string {
	return fmt.Sprintf("answers=%d nodata=%d nxdomain=%d bad=%d", c.answered(), c[kindNoData].Load(), c[kindNX].Load(), c[kindBad].Load())
}

func saturate(addr, proto string, qs [][]byte, conns, window, passes int, dur time.Duration, pid int, label string) string {
	var got counts
	var counting atomic.Bool
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	answered := make([]atomic.Int64, conns)
	for c := 0; c < conns; c++ {
		conn, err := dial(proto, addr)
		if err != nil {
			fatal(err)
		}
		wg.Add(1)
		go func(conn net.Conn, first int, answered *atomic.Int64) {
			defer wg.Done()
			defer conn.Close()
			if proto == "udp" {
				run(ctx, conn, qs, first, window, &got, &counting, answered)
				return
			}
			// A server may close a connection after so many queries
			// (a miekg/dns server does after 128 unless told otherwise): the
			// generator connects again, as dnsperf does.
			next := first
			for ctx.Err() == nil {
				next = runStream(ctx, conn, qs, next, window, &got, &counting, answered)
				conn.Close()
				if ctx.Err() != nil {
					return
				}
				c, err := dial(proto, addr)
				if err != nil {
					fatal(err)
				}
				conn = c
			}
		}(conn, c*len(qs)/conns, &answered[c])
	}
	warm := time.Now()
	time.Sleep(time.Second) // warm-up
	// Connection c asks the queries in turn from c*len(qs)/conns on: when
	// each has had passes times its share answered, each query was
	// answered about passes times (exactly, but for a lost or failed
	// answer made up by another query's).
	share := int64(passes * ((len(qs) + conns - 1) / conns))
	for c := range answered {
		for answered[c].Load() < share {
			if time.Since(warm) > time.Minute {
				fatal(fmt.Errorf("warm-up: %d passes over the queries not answered in a minute", passes))
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	warmed := time.Since(warm)
	cpu0 := cpuTicks(pid)
	counting.Store(true)
	start := time.Now()
	time.Sleep(dur)
	counting.Store(false)
	elapsed := time.Since(start)
	cpu1 := cpuTicks(pid)
	cancel()
	wg.Wait()

	n := got.answered()
	line := fmt.Sprintf("%-16s qps=%.0f %s warmup=%.2fs", label, float64(n)/elapsed.Seconds(), &got, warmed.Seconds())
	if pid > 0 && n > 0 {
		// /proc ticks are 1/100 s (USER_HZ).
		cpu := float64(cpu1-cpu0) / 100
		line += fmt.Sprintf(" server_cpu=%.2fs cpu_per_answer_us=%.2f", cpu, cpu/float64(n)*1e6)
	}
	return line
}

// run keeps window queries in flight on conn, sending and receiving in
// batches (sendmmsg/recvmmsg) so that the generator spends far less CPU
// per query than the server it measures. Each answer releases one query;
// a 200 ms silence refills the whole window (lost packets). Queries are
// taken in turn from qs, starting at first; answered counts the answers
// that are not kindBad (measuring or not).
func run(ctx context.Context, conn net.Conn, qs [][]byte, first, window int, got *counts, counting *atomic.Bool, answered *atomic.Int64) {
	pc := ipv4.NewPacketConn(conn.(*net.UDPConn))
	out := make([]ipv4.Message, window)
	in := make([]ipv4.Message, window)
	for i := range out {
		out[i].Buffers = [][]byte{nil}
		in[i].Buffers = [][]byte{make([]byte, 4096)}
	}
	var id uint16
	next := first
	send := func(n int) {
		for i := 0; i < n; i++ {
			id++
			q := qs[next%len(qs)]
			next++
			b := append(out[i].Buffers[0][:0], q...)
			binary.BigEndian.PutUint16(b, id)
			out[i].Buffers[0] = b
		}
		for sent := 0; sent < n; {
			k, err := pc.WriteBatch(out[sent:n], 0)
			if err != nil {
				return
			}
			sent += k
		}
	}
	send(window)
	for ctx.Err() == nil {
		_ = conn.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		n, err := pc.ReadBatch(in, 0)
		if err != nil {
			send(window) // silence: assume the window was lost
			continue
		}
		good, count := 0, counting.Load()
		for _, m := range in[:n] {
			k := classify(m.Buffers[0][:m.N])
			if count {
				got[k].Add(1)
			}
			if k != kindBad {
				good++
			}
		}
		answered.Add(int64(good))
		send(n)
	}
}

// dial connects to addr over proto: udp, tcp, or tls (DNS over TLS). The
// server's certificate is not checked: the generator only ever talks to a
// server of the benchmark on loopback, with a certificate made for the run.
func dial(proto, addr string) (net.Conn, error) {
	switch proto {
	case "tcp":
		return net.Dial("tcp", addr)
	case "tls":
		c, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true})
		if err != nil {
			return nil, err
		}
		return c, nil
	}
	return net.Dial("udp", addr)
}

// runStream keeps window queries in flight on a TCP or TLS connection
// until ctx is done or the connection fails or closes: every complete
// answer a read brings releases one query, and the released queries go
// out together in one write (over TLS, one record). A server that stops
// answering leaves the window short: the generator measures answers, not
// retries. Queries are taken in turn from qs, starting at first; it
// returns where the next connection is to go on. answered counts the
// answers that are not kindBad.
func runStream(ctx context.Context, conn net.Conn, qs [][]byte, first, window int, got *counts, counting *atomic.Bool, answered *atomic.Int64) (next int) {
	stop := context.AfterFunc(ctx, func() { _ = conn.SetReadDeadline(time.Now()) })
	defer stop()
	var id uint16
	next = first
	var out []byte
	send := func(n int) error {
		out = out[:0]
		for range n {
			id++
			q := qs[next%len(qs)]
			next++
			out = binary.BigEndian.AppendUint16(out, uint16(len(q)))
			at := len(out)
			out = append(out, q...)
			binary.BigEndian.PutUint16(out[at:], id)
		}
		_, err := conn.Write(out)
		return err
	}
	if send(window) != nil {
		return next
	}
	buf := make([]byte, 64<<10)
	have := 0
	for ctx.Err() == nil {
		n, err := conn.Read(buf[have:])
		if err != nil {
			return next
		}
		have += n
		off, done, good := 0, 0, int64(0)
		count := counting.Load()
		for have-off >= 2 {
			l := int(binary.BigEndian.Uint16(buf[off:]))
			if have-off < 2+l {
				if 2+l > len(buf) { // a larger answer than the buffer
					buf = append(buf, make([]byte, 2+l-len(buf))...)
				}
				break
			}
			k := classify(buf[off+2 : off+2+l])
			if count {
				got[k].Add(1)
			}
			if k != kindBad {
				good++
			}
			off += 2 + l
			done++
		}
		have = copy(buf, buf[off:have])
		answered.Add(good)
		if done > 0 && send(done) != nil {
			return next
		}
	}
	return next
}

// skip is how many of the queries owed (due - sent) a paced generator
// skips so that at most maxBacklog of them go out at once.
func skip(sent, due, maxBacklog int64) int64 {
	return max(due-sent-maxBacklog, 0)
}

// bigReadBuffer sets conn's receive buffer to n bytes: with SO_RCVBUFFORCE
// where allowed (root), else as far as net.core.rmem_max lets it.
func bigReadBuffer(conn *net.UDPConn, n int) {
	if rc, err := conn.SyscallConn(); err == nil {
		var serr error
		_ = rc.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUFFORCE, n)
		})
		if serr == nil {
			return
		}
	}
	_ = conn.SetReadBuffer(n)
}

// us is d in microseconds; +Inf for lost.
func us(d time.Duration) float64 {
	if d == lost {
		return math.Inf(1)
	}
	return float64(d) / float64(time.Microsecond)
}

// lost is the latency of a query never answered.
const lost = time.Duration(math.MaxInt64)

// percentiles returns the nearest-rank percentiles qs (each in (0, 1]) of
// n queries of which lat (which it sorts) are the answered ones' latencies:
// the n - len(lat) unanswered ones rank after every answer, and a
// percentile falling among them is lost. 0 for each when n is 0.
func percentiles(lat []time.Duration, n int, qs ...float64) []time.Duration {
	out := make([]time.Duration, len(qs))
	n = max(n, len(lat))
	if n == 0 {
		return out
	}
	slices.Sort(lat)
	for i, q := range qs {
		k := int(q*float64(n)+0.999999) - 1 // ceil(q*n) - 1
		k = max(0, min(k, n-1))
		if k >= len(lat) {
			out[i] = lost
		} else {
			out[i] = lat[k]
		}
	}
	return out
}

// cpuTicks returns utime+stime of pid in clock ticks (0 without a pid).
func cpuTicks(pid int) int64 {
	if pid <= 0 {
		return 0
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the command name (which may contain spaces) start at ')'.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	s, _ := strconv.ParseInt(f[12], 10, 64)
	return u + s
}
