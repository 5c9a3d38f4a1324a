// Command updload measures dynamic updates: it runs a dnsd binary with a
// dynamic zone filled with -records records, then -clients clients each
// send TSIG-signed UPDATEs (one A record added at a name of its own, the
// next update deleting it again) one after another for -duration, while
// a probe asks a name of the zone at a steady rate. It prints the update
// latency (send to NOERROR) percentiles, the updates per second, dnsd's
// CPU use meanwhile (100% is one core), and the probe's latency alone and
// during the updates:
//
//	updates n=… p50=… p99=… max=… rate=…/s errors=N dnsd-cpu=…% | queries idle p50=… p99=… | during p50=… p99=… lost=N
//
// Every commit is fsync'd by the store (state_dir on the -dir file
// system). Figures go to docs/performance.md.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"

	"github.com/dnsd/dnsd/bench/internal/probe"
	"github.com/dnsd/dnsd/bench/internal/proc"
)

const (
	keyName = "bench-key."
	secret  = "YmVuY2gta2V5LXNlY3JldC1mb3ItdXBkbG9hZC0xMjM0NTY="
)

type options struct {
	dnsd, dir        string
	records, clients int
	idle, load       time.Duration
	qps, rate        int
}

func main() {
	var o options
	flag.StringVar(&o.dnsd, "dnsd", "", "the dnsd binary to measure (required)")
	flag.StringVar(&o.dir, "dir", "", "directory for the config and the store (default: a new temporary one)")
	flag.IntVar(&o.records, "records", 10000, "records in the zone before the updates")
	flag.IntVar(&o.clients, "clients", 8, "clients updating at once, each one update after another")
	flag.DurationVar(&o.idle, "idle", 3*time.Second, "probe alone for this long")
	flag.DurationVar(&o.load, "duration", 10*time.Second, "update (and probe) for this long")
	flag.IntVar(&o.qps, "qps", 200, "probe queries per second")
	flag.IntVar(&o.rate, "rate", 0, "updates per second of all clients together (0: each client as fast as it can)")
	flag.Parse()
	if o.dnsd == "" {
		fmt.Fprintln(os.Stderr, "updload: -dnsd is required")
		os.Exit(2)
	}
	if err := run(context.Background(), o); err != nil {
		fmt.Fprintln(os.Stderr, "updload:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o options) error {
	dir := o.dir
	if dir == "" {
		d, err := os.MkdirTemp("", "updload")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	if err := os.WriteFile(filepath.Join(dir, "bench.key"), []byte(secret+"\n"), 0o600); err != nil {
		return err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", proc.FreePort())
	cfg := fmt.Sprintf(`listen: ["%s"]
log: {level: warn}
state_dir: state
zones:
  bench.internal:
    - dynamic: {}
update:
  - zones: [bench.internal]
    tsig: {name: bench-key, algorithm: hmac-sha256, secret_file: bench.key}
`, addr)
	if err := os.WriteFile(filepath.Join(dir, "dnsd.yaml"), []byte(cfg), 0o644); err != nil {
		return err
	}
	cmd := exec.Command(o.dnsd, "-config", "dnsd.yaml")
	cmd.Dir, cmd.Stdout, cmd.Stderr = dir, os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		return err
	}
	defer proc.Stop(cmd)
	if err := probe.Wait(addr, "bench.internal.", dns.TypeSOA, 30*time.Second); err != nil {
		return err
	}
	// Fill the zone, 1,000 records per update (limits.max_update_rrs).
	for i := 0; i < o.records; i += 1000 {
		var rrs []dns.RR
		for j := i; j < min(i+1000, o.records); j++ {
			rrs = append(rrs, a(fmt.Sprintf("h%d.bench.internal.", j), j))
		}
		m := new(dns.Msg)
		m.SetUpdate("bench.internal.")
		m.Insert(rrs)
		if rcode, err := send(addr, m); err != nil || rcode != dns.RcodeSuccess {
			return fmt.Errorf("filling the zone: %s %v", dns.RcodeToString[rcode], err)
		}
	}
	probeName := "h0.bench.internal."
	idle := probe.Run(ctx, addr, probeName, o.qps, o.idle)

	lctx, cancel := context.WithTimeout(ctx, o.load)
	defer cancel()
	var (
		mu     sync.Mutex
		lat    []time.Duration
		errs   atomic.Int64
		wg     sync.WaitGroup
		during *probe.Samples
	)
	start := time.Now()
	cpu0, _ := proc.CPUTicks(cmd.Process.Pid)
	wg.Go(func() { during = probe.Run(lctx, addr, probeName, o.qps, o.load) })
	var tick <-chan time.Time // paces the clients together with -rate
	if o.rate > 0 {
		t := time.NewTicker(time.Second / time.Duration(o.rate))
		defer t.Stop()
		tick = t.C
	}
	for c := range o.clients {
		wg.Go(func() {
			var mine []time.Duration
			name := fmt.Sprintf("c%d.load.bench.internal.", c)
			for i := 0; lctx.Err() == nil; i++ {
				if tick != nil {
					select {
					case <-tick:
					case <-lctx.Done():
						continue
					}
				}
				m := new(dns.Msg)
				m.SetUpdate("bench.internal.")
				if i%2 == 0 {
					m.Insert([]dns.RR{a(name, i)})
				} else {
					m.RemoveName([]dns.RR{&dns.ANY{Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeANY, Class: dns.ClassANY}}})
				}
				t0 := time.Now()
				rcode, err := send(addr, m)
				if err != nil || rcode != dns.RcodeSuccess {
					errs.Add(1)
					continue
				}
				mine = append(mine, time.Since(t0))
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	took := time.Since(start)
	cpu1, _ := proc.CPUTicks(cmd.Process.Pid)
	slices.Sort(lat)
	s := &probe.Samples{D: lat}
	fmt.Printf("updates n=%d %s max=%s rate=%.0f/s errors=%d dnsd-cpu=%.0f%% | queries idle %s | during %s lost=%d\n",
		len(lat), s.Percentiles(), s.Max().Round(10*time.Microsecond), float64(len(lat))/took.Seconds(), errs.Load(),
		float64(cpu1-cpu0)/took.Seconds(), idle.Percentiles(), during.Percentiles(), during.Lost)
	return nil
}

func a(name string, i int) dns.RR {
	return &dns.A{Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 300},
		A: []byte{10, byte(i >> 16), byte(i >> 8), byte(i)}}
}

// send signs m with the bench key and sends it over TCP (updates of
// 1,000 records do not fit a datagram), returning the answer's rcode.
func send(addr string, m *dns.Msg) (int, error) {
	m.SetTsig(keyName, dns.HmacSHA256, 300, time.Now().Unix())
	c := &dns.Client{Net: "tcp", Timeout: 10 * time.Second, TsigSecret: map[string]string{keyName: secret}}
	r, _, err := c.Exchange(m, addr)
	if err != nil {
		return -1, err
	}
	return r.Rcode, nil
}
