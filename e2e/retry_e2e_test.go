package e2e

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"golang.org/x/sys/unix"

	"github.com/dnsd/dnsd/internal/dnstest"
)

// A hosts file and a zone file that could not be read (no file
// descriptor left) are read again once they can be, with no filesystem
// event to say so.
func TestRetryUnreadableFiles(t *testing.T) {
	s := startYAML(t, `listen: ["LISTEN"]
http: ""
zones:
  example.internal:
    - hosts: {files: [a.hosts], fallthrough: true}
    - file: {path: z.zone}
`, map[string]string{
		"a.hosts": "10.0.0.1 a.example.internal\n",
		"z.zone":  "@ 300 IN SOA ns admin 1 3600 600 86400 300\nwww 300 IN A 10.0.0.3\n",
	})
	waitAnswer(t, s.addr, "a.example.internal", dns.TypeA, "NOERROR:10.0.0.1")
	waitAnswer(t, s.addr, "www.example.internal", dns.TypeA, "NOERROR:10.0.0.3")

	pid := s.cmd.Process.Pid
	var was unix.Rlimit
	if err := unix.Prlimit(pid, unix.RLIMIT_NOFILE, nil, &was); err != nil {
		t.Fatal(err)
	}
	// No descriptor past stderr: every open fails (those open work on).
	low := unix.Rlimit{Cur: 3, Max: was.Max}
	if err := unix.Prlimit(pid, unix.RLIMIT_NOFILE, &low, nil); err != nil {
		t.Skipf("prlimit: %v", err)
	}
	restored := false
	restore := func() {
		if !restored {
			restored = true
			if err := unix.Prlimit(pid, unix.RLIMIT_NOFILE, &was, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	defer restore()
	writeFile(t, filepath.Join(s.dir, "a.hosts"), "10.0.0.2 a.example.internal\n")
	writeFile(t, filepath.Join(s.dir, "z.zone"), "@ 300 IN SOA ns admin 2 3600 600 86400 300\nwww 300 IN A 10.0.0.4\n")
	s.waitLog("hosts file unreadable", 1)
	s.waitLog("zone file not applied", 1)
	if log := s.stderr.String(); strings.Count(grep(log, "unreadable"), "too many open files") == 0 ||
		!strings.Contains(grep(log, "zone file not applied"), "too many open files") {
		t.Fatalf("the failed reads do not say why:\n%s", log)
	}
	time.Sleep(time.Second) // retried, still failing: logged once
	if n := strings.Count(s.stderr.String(), "hosts file unreadable"); n != 1 {
		t.Errorf("the failing hosts file was logged %d times", n)
	}
	if n := strings.Count(s.stderr.String(), "zone file not applied"); n != 1 {
		t.Errorf("the failing zone file was logged %d times", n)
	}
	restore()
	start := time.Now()
	for _, q := range []struct{ name, want string }{{"a.example.internal", "NOERROR:10.0.0.2"}, {"www.example.internal", "NOERROR:10.0.0.4"}} {
		dnstest.EventuallyNil(t, 15*time.Second, func() error {
			if r, err := query(t, "udp", s.addr, q.name, dns.TypeA); err != nil || dnstest.RData(r) != q.want {
				return fmt.Errorf("%s still not %s %v after the descriptors came back", q.name, q.want, time.Since(start).Round(time.Millisecond))
			}
			return nil
		})
	}
	t.Logf("both files read again %v after the descriptors came back", time.Since(start).Round(time.Millisecond))
}
