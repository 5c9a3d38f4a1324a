package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"

	"github.com/dnsd/dnsd/bench/internal/probe"
	"github.com/dnsd/dnsd/bench/internal/proc"
)

func main() {
	var o options
	flag.StringVar(&o.dnsd, "dnsd", "", "dnsd binary to run (required)")
	flag.IntVar(&o.records, "records", 200000, "names of the transferred zone")
	flag.IntVar(&o.transfers, "transfers", 20, "clients transferring the zone at once, each over and over")
	flag.IntVar(&o.maxTransfers, "max_transfers", 0, "limits.max_transfers (0: not set)")
	flag.DurationVar(&o.idle, "idle", 5*time.Second, "probe alone for this long")
	flag.DurationVar(&o.load, "duration", 20*time.Second, "probe during the transfers for this long")
	flag.IntVar(&o.qps, "qps", 200, "probe queries per second")
	flag.Parse()
	if o.dnsd == "" {
		fmt.Fprintln(os.Stderr, "xfrload: -dnsd is required")
		os.Exit(2)
	}
	if err := run(context.Background(), o); err != nil {
		fmt.Fprintln(os.Stderr, "xfrload:", err)
		os.Exit(1)
	}
}

type options struct {
	dnsd                             string
	records, transfers, maxTransfers int
	idle, load                       time.Duration
	qps                              int
}

func run(ctx context.Context, o options) error {
	dir, err := os.MkdirTemp("", "xfrload")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	var hosts strings.Builder
	for i := range o.records {
		fmt.Fprintf(&hosts, "10.%d.%d.%d h%d.big.internal\n", 1+i>>16, (i>>8)&0xff, i&0xff, i)
	}
	if err := os.WriteFile(filepath.Join(dir, "big.hosts"), []byte(hosts.String()), 0o644); err != nil {
		return err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", proc.FreePort())
	limits := ""
	if o.maxTransfers > 0 {
		limits = fmt.Sprintf("limits: {max_transfers: %d}\n", o.maxTransfers)
	}
	cfg := fmt.Sprintf(`listen: ["%s"]
log: {level: warn}
%szones:
  big.internal:
    - hosts: {files: [big.hosts]}
  probe.internal:
    - hosts: {entries: ["10.9.9.9 www"]}
transfer:
  - zones: [big.internal]
    allow: [127.0.0.0/8]
`, addr, limits)
	if err := os.WriteFile(filepath.Join(dir, "dnsd.yaml"), []byte(cfg), 0o644); err != nil {
		return err
	}
	cmd := exec.Command(o.dnsd, "-config", "dnsd.yaml")
	cmd.Dir, cmd.Stdout, cmd.Stderr = dir, os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		return err
	}
	defer proc.Stop(cmd)
	if err := probe.Wait(addr, fmt.Sprintf("h%d.big.internal.", o.records-1), dns.TypeA, 30*time.Second); err != nil {
		return err
	}

	total, err := axfrCount(addr, "big.internal.")
	if err != nil {
		return fmt.Errorf("a first transfer: %w", err)
	}

	idle := probe.Run(ctx, addr, "www.probe.internal.", o.qps, o.idle)

	lctx, cancel := context.WithTimeout(ctx, o.load)
	defer cancel()
	rss := proc.WatchRSS(cmd.Process.Pid, 50*time.Millisecond)
	var ok, servfail, failed atomic.Int64
	var wg sync.WaitGroup
	for range o.transfers {
		wg.Go(func() {
			for lctx.Err() == nil {
				switch err := axfr(addr, "big.internal.", total); {
				case err == nil:
					ok.Add(1)
				case errors.Is(err, errServfail):
					servfail.Add(1)
					time.Sleep(100 * time.Millisecond) // a secondary retries later
				default:
					failed.Add(1)
				}
			}
		})
	}
	loaded := probe.Run(lctx, addr, "www.probe.internal.", o.qps, o.load)
	wg.Wait()
	top := rss()
	fmt.Printf("idle %s | transfers %s max=%s lost=%d | rss=%d MiB | axfr ok=%d servfail=%d failed=%d\n",
		idle.Percentiles(), loaded.Percentiles(), loaded.Max().Round(10*time.Microsecond), loaded.Lost, top/1024, ok.Load(), servfail.Load(), failed.Load())
	return nil
}

var errServfail = errors.New("SERVFAIL")

// axfrCount transfers zone once with miekg/dns's client, checking every
// message, and returns its number of records.
func axfrCount(addr, zone string) (int, error) {
	m := new(dns.Msg)
	m.SetAxfr(zone)
	tr := &dns.Transfer{DialTimeout: 2 * time.Second, ReadTimeout: 10 * time.Second}
	ch, err := tr.In(m, addr)
	if err != nil {
		return 0, err
	}
	n := 0
	for env := range ch {
		if env.Error != nil {
			return 0, env.Error
		}
		n += len(env.RR)
	}
	return n, nil
}

// axfr transfers zone once, reading every message but parsing only its
// header (the clients must not take the CPU the probe measures): done
// when total records have come.
func axfr(addr, zone string, total int) error {
	m := new(dns.Msg)
	m.SetAxfr(zone)
	wire, err := m.Pack()
	if err != nil {
		return err
	}
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := c.Write(append(binary.BigEndian.AppendUint16(nil, uint16(len(wire))), wire...)); err != nil {
		return err
	}
	r := bufio.NewReaderSize(c, 64<<10)
	buf := make([]byte, dns.MaxMsgSize)
	for got := 0; got < total; {
		var hdr [2]byte
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			return err
		}
		msg := buf[:binary.BigEndian.Uint16(hdr[:])]
		if _, err := io.ReadFull(r, msg); err != nil {
			return err
		}
		if len(msg) < 12 {
			return fmt.Errorf("short message")
		}
		if rcode := msg[3] & 0xF; rcode == dns.RcodeServerFailure {
			return errServfail
		} else if rcode != dns.RcodeSuccess {
			return fmt.Errorf("rcode %d", rcode)
		}
		got += int(binary.BigEndian.Uint16(msg[6:]))
	}
	return nil
}
