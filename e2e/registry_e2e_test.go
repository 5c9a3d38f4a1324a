package e2e

import (
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/dnsd/dnsd/internal/dnstest"
)

// A reload that opens a backend over a large hosts file (its parse takes
// seconds) does not hold up /metrics: every scrape during the open
// answers within a second.
func TestReloadOpenDoesNotStallMetrics(t *testing.T) {
	dir := t.TempDir()
	port, httpPort := freePort(t), freePort(t)
	writeFile(t, filepath.Join(dir, "big.hosts"), bigHosts(1000000, "big.test"))
	writeFile(t, filepath.Join(dir, "small.hosts"), "10.9.9.9 extra.big.test\n")
	conf := func(files string) {
		writeFile(t, filepath.Join(dir, "dnsd.yaml"), fmt.Sprintf("listen: [\"127.0.0.1:%d\"]\nhttp: \"127.0.0.1:%d\"\nzones:\n  big.test:\n    - hosts: {files: [%s]}\n", port, httpPort, files))
	}
	conf("big.hosts")
	p := startDnsd(t, dir)
	logged := func(s string, n int, within time.Duration) {
		t.Helper()
		dnstest.Eventually(t, fmt.Sprintf("dnsd to log %q (%d times)", s, n), within, func() bool {
			return strings.Count(p.stderr.String(), s) >= n
		})
	}
	logged("dnsd started", 1, 3*time.Minute)
	base := fmt.Sprintf("http://127.0.0.1:%d", httpPort)
	client := &http.Client{Timeout: 30 * time.Second}
	scrape := func() time.Duration {
		t.Helper()
		start := time.Now()
		resp, err := client.Get(base + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("/metrics: %d, %v", resp.StatusCode, err)
		}
		return time.Since(start)
	}
	scrape()

	// A second file: a new backend, which parses both files again.
	started := strings.Count(p.stderr.String(), "backend started")
	conf("big.hosts, small.hosts")
	p.signal(syscall.SIGHUP)
	opening := time.Now()
	var n int
	var slowest time.Duration
	for strings.Count(p.stderr.String(), "backend started") == started {
		if time.Since(opening) > 3*time.Minute {
			t.Fatal("the reload's backend never started")
		}
		d := scrape()
		n++
		slowest = max(slowest, d)
		time.Sleep(50 * time.Millisecond)
	}
	took := time.Since(opening)
	t.Logf("backend open took %v; %d scrapes meanwhile, slowest %v", took.Round(time.Millisecond), n, slowest.Round(time.Millisecond))
	if slowest > time.Second {
		t.Fatalf("a /metrics scrape during the reload's backend open took %v, want under 1s", slowest)
	}
	if n < 3 {
		t.Fatalf("the open took %v: only %d scrapes during it, too few to tell", took, n)
	}
	logged("reloaded", 1, 3*time.Minute)
	waitAnswer(t, fmt.Sprintf("127.0.0.1:%d", port), "extra.big.test", dns.TypeA, "NOERROR:10.9.9.9")
}
