package etcd

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/dnsd/dnsd/pipeline"
	"github.com/dnsd/dnsd/sources/etcd/etcdtest"
)

// TestMemory1M writes 1,000,000 SkyDNS keys (h<i>.s<i%1000>.example.internal,
// one address each, every tenth IPv6) into a real etcd, then syncs a
// backend from it and reports the first sync's time, the heap in use and
// the RSS once synced. The etcd server holds much more memory than the
// backend, so the backend runs in a process of its own (this test binary
// again) and only that process is measured. It is slow, so it runs only
// when DNSD_ETCD_MEM is set (to the number of keys, or 1 for a million):
//
//	DNSD_ETCD_MEM=1 go test -run TestMemory1M -v ./sources/etcd
func TestMemory1M(t *testing.T) {
	if ep := os.Getenv("DNSD_ETCD_MEM_ENDPOINT"); ep != "" {
		measureSync(t, ep)
		return
	}
	env := os.Getenv("DNSD_ETCD_MEM")
	if env == "" {
		t.Skip("set DNSD_ETCD_MEM=1 to measure 1,000,000 keys")
	}
	n := 1_000_000
	if v, err := strconv.Atoi(env); err == nil && v > 1 {
		n = v
	}
	srv := etcdtest.Start(t, etcdtest.Options{NoFsync: true})
	start := time.Now()
	fillKeys(t, srv.Client(), n)
	t.Logf("wrote %d keys in %v", n, time.Since(start).Round(time.Millisecond))

	cmd := exec.Command(os.Args[0], "-test.run", "^TestMemory1M$", "-test.v", "-test.count", "1")
	cmd.Env = append(os.Environ(), "DNSD_ETCD_MEM_ENDPOINT="+srv.Endpoint(), "DNSD_ETCD_MEM_KEYS="+strconv.Itoa(n))
	out, err := cmd.CombinedOutput()
	for line := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		if strings.Contains(line, "mem_test.go") {
			t.Log(strings.TrimSpace(line))
		}
	}
	if err != nil {
		t.Fatalf("measuring process: %v\n%s", err, out)
	}
}

// fillKeys writes n keys in transactions of 128 puts (etcd's default
// limit), four at a time.
func fillKeys(t *testing.T, cli *clientv3.Client, n int) {
	const workers, batch = 4, 128
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ops := make([]clientv3.Op, 0, batch)
			flush := func() error {
				if len(ops) == 0 {
					return nil
				}
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				if _, err := cli.Txn(ctx).Then(ops...).Commit(); err != nil {
					return fmt.Errorf("txn: %w", err)
				}
				ops = ops[:0]
				return nil
			}
			for i := w; i < n; i += workers {
				ops = append(ops, clientv3.OpPut(memKey(i), memValue(i)))
				if len(ops) == batch {
					if err := flush(); err != nil {
						errs <- err
						return
					}
				}
			}
			if err := flush(); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

func memKey(i int) string { return fmt.Sprintf("/skydns/internal/example/s%d/h%d", i%1000, i) }

func memValue(i int) string {
	if i%10 == 9 {
		return fmt.Sprintf(`{"host":"2001:db8::%x:%x"}`, i>>16, i&0xffff)
	}
	return fmt.Sprintf(`{"host":"10.%d.%d.%d"}`, i>>16&255, i>>8&255, i&255)
}

// measureSync is the measuring process: it syncs a backend from endpoint
// and logs the figures.
func measureSync(t *testing.T, endpoint string) {
	n, err := strconv.Atoi(os.Getenv("DNSD_ETCD_MEM_KEYS"))
	if err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	debug.FreeOSMemory()
	rss0, heap0 := procStatus(t, "VmRSS"), heapInuse()
	start := time.Now()
	b, err := Open(Options{Endpoints: []string{endpoint}, Prefix: "/skydns", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if err := b.WaitSynced(ctx); err != nil {
		t.Fatal(err)
	}
	load := time.Since(start)
	cpu := cpuTime(t)
	if b.Records() != n {
		t.Fatalf("%d records, want %d", b.Records(), n)
	}
	s := NewSource(b, []string{"example.internal."}, time.Minute)
	q := &pipeline.Question{Name: "h4242.s242.example.internal.", Type: dns.TypeA, Zone: "example.internal."}
	if r := s.Lookup(ctx, q); r.Status != pipeline.Found || len(r.RRs) != 1 || r.RRs[0].(*dns.A).A.String() != "10.0.16.146" {
		t.Fatalf("lookup %s: %+v", q.Name, r)
	}
	peak := procStatus(t, "VmHWM")
	runtime.GC()
	rssGC, heapGC := procStatus(t, "VmRSS"), heapInuse()
	debug.FreeOSMemory()
	rssFree := procStatus(t, "VmRSS")
	const mib = 1 << 20
	t.Logf("%d keys, %d records: first sync %v (%v CPU in this process); heap in use %.1f MiB (%.0f B/record); RSS %.1f MiB after GC, %.1f MiB after FreeOSMemory, peak %.1f MiB (process before: RSS %.1f MiB, heap %.1f MiB)",
		n, b.Records(), load.Round(time.Millisecond), cpu.Round(time.Millisecond), float64(heapGC-heap0)/mib, float64(heapGC-heap0)/float64(n),
		float64(rssGC)/mib, float64(rssFree)/mib, float64(peak)/mib, float64(rss0)/mib, float64(heap0)/mib)
	runtime.KeepAlive(s)
}

// cpuTime is the CPU time (user and system) the process has used.
func cpuTime(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func heapInuse() uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}

// procStatus reads a size field (VmRSS, VmHWM) of /proc/self/status, in
// bytes (Linux).
func procStatus(tb testing.TB, field string) uint64 {
	tb.Helper()
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		tb.Skip("no /proc/self/status:", err)
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				tb.Fatal(err)
			}
			return kb << 10
		}
	}
	tb.Skip("no " + field)
	return 0
}
