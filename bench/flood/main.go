package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
)

func main() {
	bin := flag.String("dnsd", "./dnsd", "dnsd binary")
	rate := flag.Int("rate", 5000, "flood queries per second")
	dur := flag.Duration("duration", 60*time.Second, "flood duration")
	random := flag.Bool("random", false, "a random name per query instead of one name")
	flag.Parse()
	if err := run(*bin, *rate, *dur, *random); err != nil {
		fmt.Fprintln(os.Stderr, "flood:", err)
		os.Exit(1)
	}
}

func run(bin string, rate int, dur time.Duration, random bool) error {
	hole, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	defer hole.Close()
	go func() {
		buf := make([]byte, 4096)
		for {
			if _, _, err := hole.ReadFrom(buf); err != nil {
				return
			}
		}
	}()
	addr, err := freeAddr()
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "dnsd-flood-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	cfg := filepath.Join(dir, "dnsd.yaml")
	// Default settings but for the upstream: the rule is about defaults.
	conf := fmt.Sprintf("listen: [%q]\nlog: {level: warn}\nzones:\n  example.internal:\n    - hosts: {entries: [\"10.0.0.1 db\"]}\n  .:\n    - forward: {upstreams: [%q]}\n", addr, hole.LocalAddr().String())
	if err := os.WriteFile(cfg, []byte(conf), 0o644); err != nil {
		return err
	}
	cmd := exec.Command(bin, "-config", cfg)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return err
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	if err := waitAnswer(addr); err != nil {
		return err
	}
	rssStart := rss(cmd.Process.Pid)

	ctx, cancel := context.WithTimeout(context.Background(), dur)
	defer cancel()
	var sent, answered, refused, servfail atomic.Int64
	const socks = 8
	var wg sync.WaitGroup
	conns := make([]net.Conn, socks)
	for i := range conns {
		c, err := net.Dial("udp", addr)
		if err != nil {
			return err
		}
		conns[i] = c
		wg.Add(1)
		go func() { // reader
			defer wg.Done()
			buf := make([]byte, 1500)
			m := new(dns.Msg)
			for {
				n, err := c.Read(buf)
				if err != nil {
					return
				}
				if m.Unpack(buf[:n]) == nil {
					answered.Add(1)
					switch m.Rcode {
					case dns.RcodeRefused:
						refused.Add(1)
					case dns.RcodeServerFailure:
						servfail.Add(1)
					}
				}
			}
		}()
	}
	var flooders sync.WaitGroup
	for i, c := range conns {
		flooders.Add(1)
		go func() { // writer: rate/socks per second, in 10 ms ticks
			defer flooders.Done()
			perTick := max(1, rate/socks/100)
			t := time.NewTicker(10 * time.Millisecond)
			defer t.Stop()
			id := uint16(i << 12)
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
				}
				for j := 0; j < perTick; j++ {
					id++
					name := "flood.example.com."
					if random {
						name = fmt.Sprintf("r%x.example.com.", rand.Uint64())
					}
					m := new(dns.Msg)
					m.SetQuestion(name, dns.TypeA)
					m.Id = id
					b, _ := m.Pack()
					if _, err := c.Write(b); err == nil {
						sent.Add(1)
					}
				}
			}
		}()
	}
	var peak int64
	var local []time.Duration
	lost := 0
	tick := time.NewTicker(200 * time.Millisecond)
	for done := false; !done; {
		select {
		case <-ctx.Done():
			done = true
		case <-tick.C:
			peak = max(peak, rss(cmd.Process.Pid))
			start := time.Now()
			if err := ask(addr, "db.example.internal.", time.Second); err != nil {
				lost++
			} else {
				local = append(local, time.Since(start))
			}
		}
	}
	tick.Stop()
	flooders.Wait()
	time.Sleep(5 * time.Second) // the last waiters time out upstream
	for _, c := range conns {
		c.Close()
	}
	wg.Wait()
	slices.Sort(local)
	pct := func(p float64) time.Duration {
		if len(local) == 0 {
			return 0
		}
		return local[min(len(local)-1, int(p*float64(len(local))))]
	}
	fmt.Printf("flood %s names=%s rate=%d/s: sent %d, answered %d (%.2f%%; REFUSED %d, SERVFAIL %d); dnsd RSS %.0f MiB at start, peak %.0f MiB; local answers p50 %v p99 %v, %d of %d lost\n",
		dur, map[bool]string{false: "one", true: "random"}[random], rate, sent.Load(), answered.Load(),
		100*float64(answered.Load())/float64(max(1, sent.Load())), refused.Load(), servfail.Load(),
		float64(rssStart)/(1<<20), float64(peak)/(1<<20), pct(0.5), pct(0.99), lost, lost+len(local))
	return nil
}

func ask(addr, name string, timeout time.Duration) error {
	c := &dns.Client{Timeout: timeout}
	m := new(dns.Msg)
	m.SetQuestion(name, dns.TypeA)
	r, _, err := c.Exchange(m, addr)
	if err != nil {
		return err
	}
	if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
		return fmt.Errorf("%s: %v", name, r)
	}
	return nil
}

func waitAnswer(addr string) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := ask(addr, "db.example.internal.", 200*time.Millisecond)
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// rss is the process's resident set size in bytes (0 when unknown).
func rss(pid int) int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}
