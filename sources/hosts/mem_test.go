package hosts

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestMemory1M loads a 1,000,000-line hosts file (10 % IPv6) and reports
// the load time, the heap and the process RSS once it is loaded. It is
// slow and measures the whole process, so it runs only when
// DNSD_HOSTS_MEM is set (to the number of lines, or 1 for a million):
//
//	DNSD_HOSTS_MEM=1 go test -run TestMemory1M -v ./sources/hosts
func TestMemory1M(t *testing.T) {
	env := os.Getenv("DNSD_HOSTS_MEM")
	if env == "" {
		t.Skip("set DNSD_HOSTS_MEM=1 to measure a 1,000,000-line file")
	}
	lines := 1_000_000
	if n, err := strconv.Atoi(env); err == nil && n > 1 {
		lines = n
	}
	path := filepath.Join(t.TempDir(), "hosts")
	writeBigHosts(t, path, lines)
	runtime.GC()
	debug.FreeOSMemory()
	rss0, heap0 := rss(t), heapInuse()

	start := time.Now()
	b, err := OpenBackend([]string{path}, time.Hour, Options{})
	if err != nil {
		t.Fatal(err)
	}
	load := time.Since(start)
	defer b.Close()
	runtime.GC()
	rssGC, heapGC := rss(t), heapInuse()
	if os.Getenv("DNSD_HOSTS_MEM_WAIT") != "" {
		for i := range 10 {
			time.Sleep(time.Second)
			t.Logf("after %ds: RSS %.1f MiB", i+1, float64(rss(t))/(1<<20))
		}
	}
	debug.FreeOSMemory()
	rssFree := rss(t)
	const mib = 1 << 20
	t.Logf("%d lines, %d records: load %v; heap in use %.1f MiB; RSS %.1f MiB after GC, %.1f MiB after FreeOSMemory (process before load: RSS %.1f MiB, heap %.1f MiB)",
		lines, b.Records(), load.Round(time.Millisecond), float64(heapGC-heap0)/mib,
		float64(rssGC)/mib, float64(rssFree)/mib, float64(rss0)/mib, float64(heap0)/mib)
	runtime.KeepAlive(b)
}

// writeBigHosts writes lines lines, one name each, every tenth address
// IPv6: "10.x.y.z host-N.example.internal".
func writeBigHosts(tb testing.TB, path string, lines int) {
	tb.Helper()
	fh, err := os.Create(path)
	if err != nil {
		tb.Fatal(err)
	}
	w := bufio.NewWriter(fh)
	for i := range lines {
		if i%10 == 9 {
			fmt.Fprintf(w, "2001:db8::%x:%x host-%d.example.internal\n", i>>16, i&0xffff, i)
		} else {
			fmt.Fprintf(w, "10.%d.%d.%d host-%d.example.internal\n", i>>16&255, i>>8&255, i&255, i)
		}
	}
	if err := w.Flush(); err != nil {
		tb.Fatal(err)
	}
	if err := fh.Close(); err != nil {
		tb.Fatal(err)
	}
}

func heapInuse() uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}

// rss is the process's resident set size (Linux).
func rss(tb testing.TB) uint64 {
	tb.Helper()
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		tb.Skip("no /proc/self/status:", err)
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				tb.Fatal(err)
			}
			return kb << 10
		}
	}
	tb.Skip("no VmRSS")
	return 0
}
