// Command loadgen sends UDP DNS queries to one server for a fixed time,
// from several sockets each keeping a window of queries in flight, and
// reports answers per second and, given the server's pid, the server's CPU
// time per answer (from /proc/PID/stat). It is the load side of
// bench/run.sh; it only ever targets the address it is given (loopback).
package main

import (
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
	"golang.org/x/net/ipv4"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:5353", "server address (UDP)")
	name := flag.String("name", "db.example.internal.", "query name")
	qtype := flag.String("type", "A", "query type")
	conns := flag.Int("conns", 8, "sockets")
	window := flag.Int("window", 16, "queries in flight per socket")
	dur := flag.Duration("duration", 5*time.Second, "measuring time (after 1s warm-up)")
	pid := flag.Int("pid", 0, "server pid, to report its CPU time per answer")
	label := flag.String("label", "", "label for the result line")
	flag.Parse()

	t, ok := dns.StringToType[strings.ToUpper(*qtype)]
	if !ok {
		fmt.Fprintf(os.Stderr, "loadgen: unknown type %q\n", *qtype)
		os.Exit(2)
	}
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(*name), t)
	m.SetEdns0(1232, false)
	query, err := m.Pack()
	if err != nil {
		fmt.Fprintln(os.Stderr, "loadgen:", err)
		os.Exit(2)
	}

	var answers, bad atomic.Int64
	var counting atomic.Bool
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for c := 0; c < *conns; c++ {
		conn, err := net.Dial("udp", *addr)
		if err != nil {
			fmt.Fprintln(os.Stderr, "loadgen:", err)
			os.Exit(1)
		}
		wg.Add(1)
		go func(conn net.Conn) {
			defer wg.Done()
			defer conn.Close()
			run(ctx, conn, query, *window, &answers, &bad, &counting)
		}(conn)
	}
	time.Sleep(time.Second) // warm-up
	cpu0 := cpuTicks(*pid)
	counting.Store(true)
	start := time.Now()
	time.Sleep(*dur)
	counting.Store(false)
	elapsed := time.Since(start)
	cpu1 := cpuTicks(*pid)
	cancel()
	wg.Wait()

	n := answers.Load()
	qps := float64(n) / elapsed.Seconds()
	line := fmt.Sprintf("%-16s qps=%.0f answers=%d bad=%d", *label, qps, n, bad.Load())
	if *pid > 0 && n > 0 {
		// /proc ticks are 1/100 s (USER_HZ).
		cpu := float64(cpu1-cpu0) / 100
		line += fmt.Sprintf(" server_cpu=%.2fs cpu_per_answer_us=%.2f", cpu, cpu/float64(n)*1e6)
	}
	fmt.Println(line)
}

// run keeps window queries in flight on conn, sending and receiving in
// batches (sendmmsg/recvmmsg) so that the generator spends far less CPU
// per query than the server it measures. Each answer releases one query;
// a 200 ms silence refills the whole window (lost packets).
func run(ctx context.Context, conn net.Conn, query []byte, window int, answers, bad *atomic.Int64, counting *atomic.Bool) {
	pc := ipv4.NewPacketConn(conn.(*net.UDPConn))
	out := make([]ipv4.Message, window)
	in := make([]ipv4.Message, window)
	var id uint16
	for i := range out {
		out[i].Buffers = [][]byte{append([]byte(nil), query...)}
		in[i].Buffers = [][]byte{make([]byte, 4096)}
	}
	send := func(n int) {
		for i := 0; i < n; i++ {
			id++
			binary.BigEndian.PutUint16(out[i].Buffers[0], id)
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
		if counting.Load() {
			for _, m := range in[:n] {
				b := m.Buffers[0][:m.N]
				if len(b) >= 12 && b[3]&0x0f == 0 && binary.BigEndian.Uint16(b[6:8]) > 0 {
					answers.Add(1)
				} else {
					bad.Add(1)
				}
			}
		}
		send(n)
	}
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
