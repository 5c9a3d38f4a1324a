package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/miekg/dns"
)

// vmHWM is the peak resident set size of process pid, in KiB.
func vmHWM(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for l := range strings.Lines(string(b)) {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmHWM:" {
			n, err := strconv.Atoi(f[1])
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("no VmHWM in /proc/PID/status")
	return 0
}

// longestLine is the length of s's longest line.
func longestLine(s string) int {
	n := 0
	for l := range strings.Lines(s) {
		n = max(n, len(l))
	}
	return n
}

// Lines over 64 KiB: a hosts file's is skipped and logged at its
// FILE:LINE (the rest served), without the line; a file of 20 MB without
// a newline loads in a fraction of its size; a zone file's is an error at
// its FILE:LINE at start (dnsd check) and at reload (the last good zone
// served).
func TestInputBoundsLongLines(t *testing.T) {
	token := strings.Repeat("x", 1<<20)
	s := startYAML(t, `listen: ["LISTEN"]
zones:
  example.internal:
    - hosts: {files: [a.hosts, big.hosts], fallthrough: true}
    - file: {path: z.zone}
`, map[string]string{
		"a.hosts":   "10.0.0.1 a.example.internal\n10.0.0.9 " + token + "\n10.0.0.2 b.example.internal\n",
		"big.hosts": strings.Repeat("\x00", 20<<20),
		"z.zone":    "@ 300 IN SOA ns admin 1 3600 600 86400 300\nwww 300 IN A 10.0.0.3\n",
	})
	waitAnswer(t, s.addr, "a.example.internal", dns.TypeA, "NOERROR:10.0.0.1")
	waitAnswer(t, s.addr, "b.example.internal", dns.TypeA, "NOERROR:10.0.0.2")
	waitAnswer(t, s.addr, "www.example.internal", dns.TypeA, "NOERROR:10.0.0.3")
	log := s.stderr.String()
	for _, want := range []string{filepath.Join(s.dir, "a.hosts") + ":2 ", filepath.Join(s.dir, "big.hosts") + ":1 "} {
		if !strings.Contains(log, "at="+want+`reason="line longer than 65536 bytes"`) {
			t.Errorf("the log does not name %s as a line too long:\n%.2000s", want, log)
		}
	}
	if n := longestLine(log); n > 1024 {
		t.Errorf("a log line of %d bytes", n)
	}
	// The race detector's shadow memory included, 20 MB read without a
	// newline peaked at several hundred MiB when the line was held.
	if kb := vmHWM(t, s.cmd.Process.Pid); kb > 160<<10 {
		t.Errorf("peak RSS %d MiB loading a 20 MB file without a newline", kb>>10)
	}

	zone := "z.zone" // as dnsd.yaml names it
	writeFile(t, filepath.Join(s.dir, zone), "@ 300 IN SOA ns admin 2 3600 600 86400 300\nwww 300 IN A 10.0.0.4\n"+token+" 300 IN A 10.0.0.5\n")
	s.waitLog("zone file not applied", 1)
	if !strings.Contains(s.stderr.String(), zone+":3:1: line longer than 65536 bytes") {
		t.Fatalf("the reload's error does not name %s:3:\n%s", zone, grep(s.stderr.String(), "zone file not applied"))
	}
	waitAnswer(t, s.addr, "www.example.internal", dns.TypeA, "NOERROR:10.0.0.3")
	if n := longestLine(s.stderr.String()); n > 1024 {
		t.Errorf("a log line of %d bytes", n)
	}

	cmd := exec.Command(dnsdBin, "check", "-config", "dnsd.yaml")
	cmd.Dir = s.dir
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.Contains(string(out), zone+":3:1: ") || !strings.Contains(string(out), "file: line longer than 65536 bytes") || longestLine(string(out)) > 1024 {
		t.Fatalf("check with a long zone line: %v\n%.2000s", err, out)
	}
}

// Key files are named, never quoted: dnsd check on a zone that includes
// the TSIG secret file (or a BIND key file) does not print the secret; a
// hosts source pointed at a PEM key logs that it is not a hosts file,
// not the key, and one pointed at the TSIG secret file is a config error.
func TestInputBoundsKeysNotQuoted(t *testing.T) {
	const secret = "c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0LXNlY3JldA=="
	const pemBody = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7"
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "xfr.key"), secret+"\n")
	writeFile(t, filepath.Join(dir, "bind.key"), "key \"xfr\" {\n\talgorithm hmac-sha256;\n\tsecret \""+secret+"\";\n};\n")
	writeFile(t, filepath.Join(dir, "tls.key"), "-----BEGIN PRIVATE KEY-----\n"+pemBody+"\n-----END PRIVATE KEY-----\n")
	conf := func(include, hosts string) string {
		writeFile(t, filepath.Join(dir, "z.zone"), "@ 300 IN SOA ns admin 1 3600 600 86400 300\n$INCLUDE "+include+"\n")
		return "listen: [\"127.0.0.1:5353\"]\nzones:\n  example.internal:\n    - hosts: {files: [" + hosts + "]}\n    - file: {path: z.zone}\n" +
			"transfer:\n  - zones: [example.internal]\n    allow: [127.0.0.1]\n    tsig: {name: xfr-key, algorithm: hmac-sha256, secret_file: xfr.key}\n"
	}
	for _, c := range []struct {
		include, hosts string
		want           []string
	}{
		{"xfr.key", "a.hosts", []string{"z.zone:2:10: zones.\"example.internal\"[1].file: $INCLUDE xfr.key: a key, password or certificate file"}},
		{"bind.key", "a.hosts", []string{"z.zone:2:10: zones.\"example.internal\"[1].file: $INCLUDE bind.key: a key, password or certificate file"}},
		{"a.zone", "xfr.key", []string{"hosts.files[0]: file xfr.key is a key, password or certificate file"}},
	} {
		writeFile(t, filepath.Join(dir, "a.hosts"), "10.0.0.1 a.example.internal\n")
		writeFile(t, filepath.Join(dir, "a.zone"), "www 300 IN A 10.0.0.3\n")
		writeFile(t, filepath.Join(dir, "dnsd.yaml"), conf(c.include, c.hosts))
		cmd := exec.Command(dnsdBin, "check", "-config", "dnsd.yaml")
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
			t.Fatalf("check (%s, %s): want exit 1, got %v\n%s", c.include, c.hosts, err, out)
		}
		if strings.Contains(string(out), secret[:16]) {
			t.Fatalf("check (%s, %s) printed the secret:\n%s", c.include, c.hosts, out)
		}
		for _, w := range c.want {
			if !strings.Contains(string(out), w) {
				t.Fatalf("check (%s, %s) does not say %q:\n%s", c.include, c.hosts, w, out)
			}
		}
	}

	s := startYAML(t, `listen: ["LISTEN"]
zones:
  example.internal:
    - hosts: {files: [a.hosts, tls.key]}
`, map[string]string{
		"a.hosts": "10.0.0.1 a.example.internal\n",
		"tls.key": "-----BEGIN PRIVATE KEY-----\n" + pemBody + "\n-----END PRIVATE KEY-----\n",
	})
	waitAnswer(t, s.addr, "a.example.internal", dns.TypeA, "NOERROR:10.0.0.1")
	log := s.stderr.String()
	if strings.Contains(log, pemBody[:16]) || strings.Contains(log, "BEGIN") {
		t.Fatalf("the key was logged:\n%s", log)
	}
	if !strings.Contains(log, "not a hosts file") || !strings.Contains(log, filepath.Join(s.dir, "tls.key")) {
		t.Fatalf("the log does not say %s is not a hosts file:\n%s", filepath.Join(s.dir, "tls.key"), log)
	}
}
