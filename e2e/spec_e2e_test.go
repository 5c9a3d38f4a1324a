package e2e

// Black-box conformance tests against the operator contract in docs/: the built
// binary, dnsd.yaml files, signals, real DNS queries and HTTP endpoints.
// Every test is named TestSpec…; each checks a statement of the docs
// (configuration.md, operations.md, sources/*.md).

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/dnsd/dnsd/internal/dnstest"
	"github.com/dnsd/dnsd/sources/etcd/etcdtest"
)

// checkNegative: AA=1, rcode, no answer, the zone's synthesized SOA with
// minimum = ttl.
func checkNegative(t *testing.T, r *dns.Msg, rcode int, zone string, ttl uint32) *dns.SOA {
	t.Helper()
	q := r.Question[0].Name
	if r.Rcode != rcode || !r.Authoritative {
		t.Errorf("%s %s: rcode %s aa=%v, want %s aa=true", q, dns.TypeToString[r.Question[0].Qtype], dns.RcodeToString[r.Rcode], r.Authoritative, dns.RcodeToString[rcode])
	}
	soa := dnstest.SOA(r)
	if soa == nil {
		t.Errorf("%s: negative answer without SOA: %v", q, r)
		return nil
	}
	if soa.Hdr.Name != zone || soa.Ns != "ns.dns."+zone || soa.Mbox != "hostmaster."+zone || soa.Minttl != ttl {
		t.Errorf("%s: SOA %v; want owner %s, ns.dns.%s hostmaster.%s, minimum %d", q, soa, zone, zone, zone, ttl)
	}
	return soa
}

func runCheck(t *testing.T, dir string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(dnsdBin, append([]string{"check"}, args...)...)
	cmd.Dir = dir
	var o, e syncBuffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	code = 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return o.String(), e.String(), code
}

// --- §2 command line ---------------------------------------------------

func TestSpecVersion(t *testing.T) {
	out, err := exec.Command(dnsdBin, "version").Output()
	if err != nil {
		t.Fatal(err)
	}
	s := string(out)
	for _, want := range []string{"dnsd", "dev", "commit", runtime.Version()} {
		if !strings.Contains(s, want) {
			t.Errorf("dnsd version = %q lacks %q", s, want)
		}
	}
}

func TestSpecCheckDefaultPath(t *testing.T) {
	if _, err := os.Stat("/etc/dnsd/dnsd.yaml"); err == nil {
		t.Skip("/etc/dnsd/dnsd.yaml exists")
	}
	dir := t.TempDir()
	_, stderr, code := runCheck(t, dir)
	if code != 1 || !strings.Contains(stderr, "dnsd.yaml") {
		t.Errorf("check without a config: exit %d %q; want 1 naming dnsd.yaml", code, stderr)
	}
	writeFile(t, filepath.Join(dir, "dnsd.yaml"), "zones:\n  example.internal:\n    - hosts: {entries: [\"10.0.0.1 a\"]}\n")
	stdout, stderr, code := runCheck(t, dir)
	if code != 0 || stderr != "" || !strings.Contains(stdout, "dnsd.yaml") {
		t.Errorf("check ./dnsd.yaml: exit %d stdout %q stderr %q", code, stdout, stderr)
	}
}

func TestSpecCheckErrors(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a.hosts"), "10.0.0.1 a.example.internal\n")
	writeFile(t, filepath.Join(dir, "secret"), "x")
	if err := os.Mkdir(filepath.Join(dir, "adir"), 0o755); err != nil {
		t.Fatal(err)
	}
	const head = "zones:\n  example.internal:\n    - hosts:\n        files: [a.hosts]\n"
	cases := []struct {
		name, cfg string
		pos       string // LINE:COL
		msg       string // a substring of the message
	}{
		{"unknown top key", "lisen: [\"127.0.0.1:53\"]\n" + head, "1:1", "lisen"},
		{"unknown key at depth", head + "        tll: 5s\n", "5:9", "tll"},
		{"unknown key in forward", "zones:\n  .:\n    - forward:\n        upstreams: [\"1.1.1.1\"]\n        exept: [a]\n", "5:9", "exept"},
		{"unknown key in cache", "cache:\n  sise: 10\n" + head, "2:3", "sise"},
		{"unknown key in limits", "limits: {udp_bufer: 1232}\n" + head, "1:10", "udp_bufer"},
		{"unknown key in acl", "acl: {alow: [10.0.0.0/8]}\n" + head, "1:7", "alow"},
		{"unknown key in log", "log: {levle: info}\n" + head, "1:7", "levle"},
		{"unknown key in etcd tls", "zones:\n  example.internal:\n    - etcd:\n        endpoints: [\"https://127.0.0.1:2379\"]\n        tls: {ca: a.hosts, sever_name: x}\n", "5:28", "sever_name"},
		{"wrong type list", "listen: \"127.0.0.1:53\"\n" + head, "1:9", "list"},
		{"wrong type bool", head + "        fallthrough: yes\n", "5:22", "yes"},
		{"wrong type int", "limits: {udp_buffer: \"1232\"}\n" + head, "1:22", "udp_buffer"},
		{"wrong type mapping", "cache: 5\n" + head, "1:8", "cache"},
		{"bad duration", head + "        ttl: 5x\n", "5:14", "5x"},
		{"bare number duration", "limits: {tcp_idle_timeout: 30}\n" + head, "1:28", "30"},
		{"bad CIDR", "acl: {allow: [10.0.0.300/8]}\n" + head, "1:15", "10.0.0.300/8"},
		{"CIDR with host bits", "acl: {deny: [10.0.0.1/8]}\n" + head, "1:14", "10.0.0.1/8"},
		{"bad zone CIDR", "zones:\n  10.0.0.1/8:\n    - hosts: {files: [a.hosts]}\n", "2:3", "10.0.0.1/8"},
		{"duplicate zone", head + "  example.internal.:\n    - hosts: {files: [a.hosts]}\n", "5:3", "example.internal"},
		{"duplicate zone by case", head + "  EXAMPLE.Internal:\n    - hosts: {files: [a.hosts]}\n", "5:3", "example.internal"},
		{"duplicate zone in one key", "zones:\n  example.internal Example.Internal.:\n    - hosts: {files: [a.hosts]}\n", "2:20", "example.internal"},
		{"duplicate zone via CIDR", "zones:\n  10.in-addr.arpa:\n    - hosts: {files: [a.hosts]}\n  10.0.0.0/8:\n    - hosts: {files: [a.hosts]}\n", "4:3", "10.in-addr.arpa"},
		{"missing file", "zones:\n  example.internal:\n    - hosts:\n        files: [nope.hosts]\n", "4:17", "nope.hosts"},
		{"directory as file", "zones:\n  example.internal:\n    - hosts:\n        files: [adir]\n", "4:17", "adir"},
		{"missing password file", "zones:\n  example.internal:\n    - etcd: {username: u, password_file: nope}\n", "3:42", "nope"},
		{"inline password", "zones:\n  example.internal:\n    - etcd: {username: u, password: x}\n", "3:27", "password"},
		{"no zones", "listen: [\"127.0.0.1:53\"]\n", "", "zones"},
		{"yaml syntax", "zones: [\n", "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			writeFile(t, filepath.Join(dir, "cfg.yaml"), tc.cfg)
			stdout, stderr, code := runCheck(t, dir, "-config", "cfg.yaml")
			if code != 1 {
				t.Fatalf("exit %d, want 1; stdout %q stderr %q", code, stdout, stderr)
			}
			lines := strings.Split(strings.TrimSpace(stderr), "\n")
			for _, line := range lines {
				if !regexp.MustCompile(`^cfg\.yaml:\d+:\d+: `).MatchString(line) {
					t.Fatalf("error line %q is not FILE:LINE:COL: message", line)
				}
			}
			line := lines[0]
			if tc.pos != "" {
				line = ""
				for _, l := range lines {
					if strings.HasPrefix(l, "cfg.yaml:"+tc.pos+": ") {
						line = l
					}
				}
				if line == "" {
					t.Errorf("errors %q, want one at cfg.yaml:%s", stderr, tc.pos)
				}
			}
			if !strings.Contains(line, tc.msg) {
				t.Errorf("error %q does not mention %q", line, tc.msg)
			}
		})
	}
	t.Run("unreadable config", func(t *testing.T) {
		_, stderr, code := runCheck(t, dir, "-config", "missing.yaml")
		if code != 1 || !strings.Contains(stderr, "missing.yaml") {
			t.Errorf("exit %d %q", code, stderr)
		}
	})
	t.Run("unreadable hosts file (mode 000)", func(t *testing.T) {
		if os.Getuid() == 0 {
			t.Skip("root reads any file")
		}
		p := filepath.Join(dir, "locked.hosts")
		writeFile(t, p, "10.0.0.1 a.example.internal\n")
		os.Chmod(p, 0)
		writeFile(t, filepath.Join(dir, "cfg.yaml"), "zones:\n  example.internal:\n    - hosts:\n        files: [locked.hosts]\n")
		_, stderr, code := runCheck(t, dir, "-config", "cfg.yaml")
		if code != 1 || !strings.HasPrefix(stderr, "cfg.yaml:4:17: ") {
			t.Errorf("exit %d %q", code, stderr)
		}
	})
	t.Run("several errors at once, sorted", func(t *testing.T) {
		writeFile(t, filepath.Join(dir, "cfg.yaml"), "limits: {udp_buffer: 5}\n"+head+"        ttl: 5x\n")
		_, stderr, code := runCheck(t, dir, "-config", "cfg.yaml")
		lines := strings.Split(strings.TrimSpace(stderr), "\n")
		if code != 1 || len(lines) != 2 || !strings.HasPrefix(lines[0], "cfg.yaml:1:") || !strings.HasPrefix(lines[1], "cfg.yaml:6:") {
			t.Errorf("exit %d %q", code, stderr)
		}
	})
	t.Run("valid full config", func(t *testing.T) {
		writeFile(t, filepath.Join(dir, "cfg.yaml"), `listen: ["127.0.0.1:5353", "tcp://127.0.0.1:5354"]
http: "127.0.0.1:9153"
log: {level: debug, format: json, queries: true}
acl: {allow: [127.0.0.0/8, "::1/128", 10.0.0.0/8], deny: []}
limits: {udp_buffer: 1232, max_tcp_connections: 1000, tcp_idle_timeout: 10s, rate_per_client: 0}
cache: {size: 100000, min_ttl: 0s, max_ttl: 1h, negative_ttl: 5m, serve_stale: 1h, prefetch: true}
zones:
  Example.Internal. 10.96.0.0/12:
    - hosts: {files: [a.hosts], entries: ["10.100.0.1 db"], ttl: 1h, reverse: true, fallthrough: true}
    - etcd: {endpoints: ["http://127.0.0.1:2379"], prefix: /skydns, ttl: 5m, sync_timeout: 5s}
  .:
    - forward: {upstreams: ["1.1.1.1", "10.0.0.2:5353", "tcp://8.8.8.8"], policy: sequential, except: [Corp.Internal.]}
`)
		stdout, stderr, code := runCheck(t, dir, "-config", "cfg.yaml")
		if code != 0 || stderr != "" {
			t.Errorf("exit %d stdout %q stderr %q", code, stdout, stderr)
		}
	})
}

// --- §4.1 parsing ------------------------------------------------------

const specHostsCfg = `listen: ["LISTEN"]
http: "HTTP"
zones:
  Example.Internal. 10.96.0.0/12:
    - hosts:
        entries: ["10.0.0.10 db", "fd00::10 DB.example.internal.", "10.100.0.5 svc", "10.0.0.20 a.b.Example.Internal"]
        ttl: 60s
        fallthrough: false
  sub.example.internal:
    - hosts: {entries: ["10.1.0.1 x"], ttl: 30s}
    - hosts: {entries: ["10.1.0.2 y"], ttl: 20s}
  one.internal two.internal:
    - hosts: {entries: ["10.2.0.1 a.one.internal", "10.2.0.2 a.two.internal"], ttl: 40s}
`

func TestSpecProtocol(t *testing.T) {
	s := startYAML(t, specHostsCfg, nil)
	q := func(name string, qtype uint16) *dns.Msg {
		m := new(dns.Msg)
		m.SetQuestion(name, qtype)
		return m
	}
	cases := []struct {
		name  string
		msg   func() *dns.Msg
		rcode int
	}{
		{"no question", func() *dns.Msg { m := q("db.example.internal.", dns.TypeA); m.Question = nil; return m }, dns.RcodeFormatError},
		{"two questions", func() *dns.Msg {
			m := q("db.example.internal.", dns.TypeA)
			m.Question = append(m.Question, m.Question[0])
			return m
		}, dns.RcodeFormatError},
		{"opcode NOTIFY, no secondary zone", func() *dns.Msg { m := q("example.internal.", dns.TypeSOA); m.Opcode = dns.OpcodeNotify; return m }, dns.RcodeNotImplemented},
		{"opcode UPDATE", func() *dns.Msg { m := q("example.internal.", dns.TypeSOA); m.Opcode = dns.OpcodeUpdate; return m }, dns.RcodeNotImplemented},
		{"opcode STATUS", func() *dns.Msg { m := q("example.internal.", dns.TypeSOA); m.Opcode = dns.OpcodeStatus; return m }, dns.RcodeNotImplemented},
		{"class CH", func() *dns.Msg {
			m := q("db.example.internal.", dns.TypeA)
			m.Question[0].Qclass = dns.ClassCHAOS
			return m
		}, dns.RcodeRefused},
		{"class ANY", func() *dns.Msg {
			m := q("db.example.internal.", dns.TypeA)
			m.Question[0].Qclass = dns.ClassANY
			return m
		}, dns.RcodeRefused},
		{"EDNS version 1", func() *dns.Msg {
			m := q("db.example.internal.", dns.TypeA)
			m.SetEdns0(1232, false)
			m.IsEdns0().SetVersion(1)
			return m
		}, dns.RcodeBadVers},
		{"AXFR", func() *dns.Msg { return q("example.internal.", dns.TypeAXFR) }, dns.RcodeRefused},
		{"IXFR", func() *dns.Msg { return q("example.internal.", dns.TypeIXFR) }, dns.RcodeRefused},
		{"no zone", func() *dns.Msg { return q("db.example.org.", dns.TypeA) }, dns.RcodeRefused},
	}
	for _, tc := range cases {
		for _, netw := range []string{"udp", "tcp"} {
			t.Run(tc.name+"/"+netw, func(t *testing.T) {
				m := tc.msg()
				r := dnstest.Exchange(t, netw, s.addr, m)
				if r.Rcode != tc.rcode || r.Id != m.Id || !r.Response {
					t.Errorf("rcode %s id %d, want %s id %d", dns.RcodeToString[r.Rcode], r.Id, dns.RcodeToString[tc.rcode], m.Id)
				}
				if tc.rcode == dns.RcodeBadVers {
					if o := r.IsEdns0(); o == nil || o.Version() != 0 {
						t.Errorf("BADVERS answer without an OPT of version 0: %v", r)
					}
				}
				if len(r.Answer) != 0 {
					t.Errorf("answer section not empty: %v", r)
				}
			})
		}
	}

	t.Run("ANY is minimal", func(t *testing.T) {
		r := dnstest.Ask(t, s.addr, "db.example.internal.", dns.TypeANY)
		types := map[uint16]bool{}
		for _, rr := range r.Answer {
			types[rr.Header().Rrtype] = true
		}
		if r.Rcode != dns.RcodeSuccess || len(types) != 1 {
			t.Errorf("ANY at a name with A and AAAA: %v; want one RRset", r)
		}
	})

	t.Run("garbage is dropped, server lives", func(t *testing.T) {
		c, err := net.Dial("udp", s.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		for _, b := range [][]byte{{}, {1}, {1, 2, 3, 4, 5}, []byte(strings.Repeat("\xff", 40)), {0, 1, 0, 0, 0, 5, 0, 0, 0, 0, 0, 0}} {
			c.Write(b)
		}
		c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		buf := make([]byte, 512)
		if n, err := c.Read(buf); err == nil {
			r := new(dns.Msg)
			if r.Unpack(buf[:n]) != nil {
				t.Errorf("answered garbage with garbage %x", buf[:n])
			}
		}
		// TCP: a bad length / garbage message.
		tc, err := net.Dial("tcp", s.addr)
		if err != nil {
			t.Fatal(err)
		}
		tc.Write([]byte{0, 5, 1, 2, 3, 4, 5})
		tc.Close()
		waitAnswer(t, s.addr, "db.example.internal", dns.TypeA, "NOERROR:10.0.0.10")
	})
}

// --- §3 names, zones, §4.3–5 ---------------------------------------------

// Names outside the zone key's names are ignored, in files and inline
// entries alike: no PTR points at them, even from a reverse zone of the
// same key; an address with a name inside and one outside answers only
// the inside one.
func TestHostsNamesOutsideZoneGetNoPTR(t *testing.T) {
	s := startYAML(t, `listen: ["LISTEN"]
zones:
  example.internal 10.100.0.0/16:
    - hosts:
        files: [a.hosts]
        entries: ["10.100.0.9 out.elsewhere.", "10.100.0.10 in"]
`, map[string]string{"a.hosts": "10.100.0.7 other.example.org\n10.100.0.8 in2.example.internal other.example.org\n"})
	for name, want := range map[string]string{
		"7.0.100.10.in-addr.arpa.":  "NXDOMAIN:",
		"8.0.100.10.in-addr.arpa.":  "NOERROR:in2.example.internal.",
		"9.0.100.10.in-addr.arpa.":  "NXDOMAIN:",
		"10.0.100.10.in-addr.arpa.": "NOERROR:in.example.internal.",
	} {
		if got := dnstest.RData(dnstest.Ask(t, s.addr, name, dns.TypePTR)); got != want {
			t.Errorf("%s PTR: %s, want %s", name, got, want)
		}
	}
}

func TestSpecZonesAndNames(t *testing.T) {
	s := startYAML(t, specHostsCfg, nil)
	const zone = "example.internal."

	for _, name := range []string{"db.example.internal.", "DB.EXAMPLE.INTERNAL.", "Db.Example.Internal."} {
		r := dnstest.Ask(t, s.addr, name, dns.TypeA)
		if dnstest.RData(r) != "NOERROR:10.0.0.10" || !r.Authoritative || r.Answer[0].Header().Name != name {
			t.Errorf("%s A: %v", name, r)
		}
		if r.Answer[0].Header().Ttl != 60 {
			t.Errorf("%s TTL %d, want 60", name, r.Answer[0].Header().Ttl)
		}
	}
	if r := dnstest.Ask(t, s.addr, "db.example.internal.", dns.TypeAAAA); dnstest.RData(r) != "NOERROR:fd00::10" {
		t.Errorf("AAAA: %v", r)
	}

	t.Run("CIDR zone key answers PTR", func(t *testing.T) {
		r := dnstest.Ask(t, s.addr, "5.0.100.10.in-addr.arpa.", dns.TypePTR)
		if dnstest.RData(r) != "NOERROR:svc.example.internal." || !r.Authoritative {
			t.Errorf("PTR 10.100.0.5: %v", r)
		}
		// 10.96.0.0/12 covers 96..111.10.in-addr.arpa.
		r = dnstest.Ask(t, s.addr, "1.0.111.10.in-addr.arpa.", dns.TypePTR)
		checkNegative(t, r, dns.RcodeNameError, "111.10.in-addr.arpa.", 60)
		r = dnstest.Ask(t, s.addr, "1.0.112.10.in-addr.arpa.", dns.TypePTR)
		if r.Rcode != dns.RcodeRefused {
			t.Errorf("10.112.0.1 outside 10.96.0.0/12: %v", r)
		}
		r = dnstest.Ask(t, s.addr, "96.10.in-addr.arpa.", dns.TypeSOA)
		if len(r.Answer) != 1 || r.Answer[0].(*dns.SOA).Ns != "ns.dns.96.10.in-addr.arpa." {
			t.Errorf("apex SOA of 96.10.in-addr.arpa: %v", r)
		}
	})

	t.Run("negative answers", func(t *testing.T) {
		checkNegative(t, dnstest.Ask(t, s.addr, "nope.example.internal.", dns.TypeA), dns.RcodeNameError, zone, 60)
		checkNegative(t, dnstest.Ask(t, s.addr, "NOPE.Example.Internal.", dns.TypeTXT), dns.RcodeNameError, zone, 60)
		r := dnstest.Ask(t, s.addr, "db.example.internal.", dns.TypeMX)
		checkNegative(t, r, dns.RcodeSuccess, zone, 60)
		if len(r.Answer) != 0 {
			t.Errorf("NODATA with answers: %v", r)
		}
		// empty non-terminal
		checkNegative(t, dnstest.Ask(t, s.addr, "b.example.internal.", dns.TypeA), dns.RcodeSuccess, zone, 60)
		// every name of a key is its own zone
		checkNegative(t, dnstest.Ask(t, s.addr, "nope.two.internal.", dns.TypeA), dns.RcodeNameError, "two.internal.", 40)
		checkNegative(t, dnstest.Ask(t, s.addr, "nope.one.internal.", dns.TypeA), dns.RcodeNameError, "one.internal.", 40)
		// apex NODATA
		checkNegative(t, dnstest.Ask(t, s.addr, "example.internal.", dns.TypeA), dns.RcodeSuccess, zone, 60)
	})

	t.Run("longest suffix zone", func(t *testing.T) {
		waitAnswer(t, s.addr, "x.sub.example.internal", dns.TypeA, "NOERROR:10.1.0.1")
		// hosts default fallthrough: true → second source answers.
		waitAnswer(t, s.addr, "y.sub.example.internal", dns.TypeA, "NOERROR:10.1.0.2")
		// After the last source: NXDOMAIN with the sub zone's SOA.
		r := dnstest.Ask(t, s.addr, "db.sub.example.internal.", dns.TypeA)
		checkNegative(t, r, dns.RcodeNameError, "sub.example.internal.", 20)
	})

	t.Run("apex SOA and NS", func(t *testing.T) {
		for _, name := range []string{"example.internal.", "EXAMPLE.internal."} {
			r := dnstest.Ask(t, s.addr, name, dns.TypeSOA)
			if len(r.Answer) != 1 || !r.Authoritative || r.Rcode != dns.RcodeSuccess {
				t.Fatalf("SOA %s: %v", name, r)
			}
			soa := r.Answer[0].(*dns.SOA)
			if soa.Ns != "ns.dns."+zone || soa.Mbox != "hostmaster."+zone || soa.Minttl != 60 {
				t.Errorf("SOA %v", soa)
			}
		}
		r := dnstest.Ask(t, s.addr, zone, dns.TypeNS)
		if dnstest.RData(r) != "NOERROR:ns.dns.example.internal." || !r.Authoritative {
			t.Fatalf("NS: %v", r)
		}
		if len(r.Extra) != 1 || r.Extra[0].String() != "ns.dns.example.internal.\t60\tIN\tA\t127.0.0.1" {
			t.Errorf("NS glue: %v; want ns.dns.example.internal. A 127.0.0.1", r.Extra)
		}
		waitAnswer(t, s.addr, "ns.dns.example.internal", dns.TypeA, "NOERROR:127.0.0.1")
		r = dnstest.Ask(t, s.addr, "sub.example.internal.", dns.TypeNS)
		if dnstest.RData(r) != "NOERROR:ns.dns.sub.example.internal." {
			t.Errorf("sub NS: %v", r)
		}
	})
}

// NS address from the source's data when it has that name.
func TestSpecNSFromSource(t *testing.T) {
	s := startYAML(t, `listen: ["LISTEN"]
zones:
  example.internal:
    - hosts: {entries: ["10.0.0.53 ns.dns.example.internal"], ttl: 60s}
`, nil)
	r := dnstest.Ask(t, s.addr, "example.internal.", dns.TypeNS)
	if dnstest.RData(r) != "NOERROR:ns.dns.example.internal." || len(r.Extra) != 1 || !strings.HasSuffix(r.Extra[0].String(), "10.0.0.53") {
		t.Errorf("NS: %v", r)
	}
	waitAnswer(t, s.addr, "ns.dns.example.internal", dns.TypeA, "NOERROR:10.0.0.53")
}

func TestSpecFallthroughFalseAndHostsFile(t *testing.T) {
	s := startYAML(t, `listen: ["LISTEN"]
zones:
  example.internal:
    - hosts: {files: [a.hosts], ttl: 10s, fallthrough: false}
    - hosts: {entries: ["10.0.0.2 second"]}
`, map[string]string{"a.hosts": "10.0.0.1 First.Example.Internal.  # comment\nfd00::1 first.example.internal\n10.9.9.9 outside.example.org\n"})
	waitAnswer(t, s.addr, "first.example.internal", dns.TypeA, "NOERROR:10.0.0.1")
	waitAnswer(t, s.addr, "FIRST.example.internal", dns.TypeAAAA, "NOERROR:fd00::1")
	r := dnstest.Ask(t, s.addr, "second.example.internal.", dns.TypeA)
	soa1 := checkNegative(t, r, dns.RcodeNameError, "example.internal.", 10)

	// The serial increases when the file changes (within 100 ms).
	time.Sleep(10 * time.Millisecond)
	writeFile(t, filepath.Join(s.dir, "a.hosts"), "10.0.0.3 first.example.internal\n")
	waitAnswer(t, s.addr, "first.example.internal", dns.TypeA, "NOERROR:10.0.0.3")
	soa2 := checkNegative(t, dnstest.Ask(t, s.addr, "nope.example.internal.", dns.TypeA), dns.RcodeNameError, "example.internal.", 10)
	if soa1 != nil && soa2 != nil && soa2.Serial <= soa1.Serial {
		t.Errorf("serial %d after a change, was %d", soa2.Serial, soa1.Serial)
	}
	// Deleted file: last good data kept.
	os.Remove(filepath.Join(s.dir, "a.hosts"))
	time.Sleep(300 * time.Millisecond)
	waitAnswer(t, s.addr, "first.example.internal", dns.TypeA, "NOERROR:10.0.0.3")
}

// The serial increases when a reload changes inline entries (even with an
// unchanged, reused hosts file backend) and never goes backwards.
func TestSpecSerialReloadInline(t *testing.T) {
	cfg := func(ip string) string {
		return `listen: ["LISTEN"]
zones:
  example.internal:
    - hosts: {files: [a.hosts], entries: ["` + ip + ` inline"], ttl: 10s}
`
	}
	s := startYAML(t, cfg("10.0.0.1"), map[string]string{"a.hosts": "10.0.0.9 f.example.internal\n"})
	soa := checkNegative(t, dnstest.Ask(t, s.addr, "nope.example.internal.", dns.TypeA), dns.RcodeNameError, "example.internal.", 10)
	for i := 2; i <= 3; i++ {
		s.reload(t, cfg(fmt.Sprintf("10.0.0.%d", i)), true, i-1)
		waitAnswer(t, s.addr, "inline.example.internal", dns.TypeA, fmt.Sprintf("NOERROR:10.0.0.%d", i))
		next := checkNegative(t, dnstest.Ask(t, s.addr, "nope.example.internal.", dns.TypeA), dns.RcodeNameError, "example.internal.", 10)
		if soa != nil && next != nil && next.Serial <= soa.Serial {
			t.Errorf("reload %d changed inline entries: serial %d, was %d", i, next.Serial, soa.Serial)
		}
		soa = next
	}
	// Inline-only source, changed by reloads in quick succession.
	cfg2 := func(ip string) string {
		return `listen: ["LISTEN"]
zones:
  example.internal:
    - hosts: {entries: ["` + ip + ` inline"], ttl: 10s}
`
	}
	for i := 4; i <= 5; i++ {
		s.reload(t, cfg2(fmt.Sprintf("10.0.0.%d", i)), true, i-1)
		waitAnswer(t, s.addr, "inline.example.internal", dns.TypeA, fmt.Sprintf("NOERROR:10.0.0.%d", i))
		next := checkNegative(t, dnstest.Ask(t, s.addr, "nope.example.internal.", dns.TypeA), dns.RcodeNameError, "example.internal.", 10)
		if soa != nil && next != nil && next.Serial <= soa.Serial {
			t.Errorf("reload %d changed inline entries: serial %d, was %d", i, next.Serial, soa.Serial)
		}
		soa = next
	}
}

// --- §4.2 ACL ------------------------------------------------------------

func TestSpecACL(t *testing.T) {
	s := startYAML(t, `listen: ["LISTEN"]
acl: {allow: [127.0.0.0/8], deny: [127.0.0.1]}
zones:
  example.internal:
    - hosts: {entries: ["10.0.0.1 a"]}
`, nil)
	for _, netw := range []string{"udp", "tcp"} {
		m := new(dns.Msg)
		m.SetQuestion("a.example.internal.", dns.TypeA)
		if r := dnstest.Exchange(t, netw, s.addr, m); r.Rcode != dns.RcodeRefused || len(r.Answer) != 0 {
			t.Errorf("%s: deny must win over allow: %v", netw, r)
		}
	}
}

// --- §4.6–8 CNAME, SRV, EDNS --------------------------------------------

func TestSpecEtcdRecords(t *testing.T) {
	srv := etcdtest.Start(t, etcdtest.Options{})
	puts := map[string]string{
		"/skydns/internal/example/web":          `{"host":"10.0.1.1"}`,
		"/skydns/internal/example/alias":        `{"host":"Web.Example.Internal"}`,
		"/skydns/internal/example/alias2":       `{"host":"alias.example.internal"}`,
		"/skydns/internal/example/loop1":        `{"host":"loop2.example.internal"}`,
		"/skydns/internal/example/loop2":        `{"host":"loop1.example.internal"}`,
		"/skydns/internal/example/self":         `{"host":"self.example.internal"}`,
		"/skydns/internal/example/dangling":     `{"host":"nothing.example.internal"}`,
		"/skydns/internal/example/cross":        `{"host":"h.other.internal"}`,
		"/skydns/internal/example/_tcp/_pg/x1":  `{"host":"web.example.internal","port":5432}`,
		"/skydns/internal/example/_tcp/_pg/x2":  `{"host":"10.0.2.2","port":5433}`,
		"/skydns/internal/example/deep/er/name": `{"host":"10.0.3.1"}`,
		"/skydns/internal/example/bad":          `{not json`,
		"/skydns/internal/example/txt":          `{"text":"hello"}`,
		"/skydns/internal/example/mx":           `{"host":"web.example.internal","mail":true,"priority":10}`,
	}
	for i := 0; i < 10; i++ {
		puts[fmt.Sprintf("/skydns/internal/example/c%d", i)] = fmt.Sprintf(`{"host":"c%d.example.internal"}`, i+1)
	}
	puts["/skydns/internal/example/c10"] = `{"host":"10.0.4.1"}`
	for k, v := range puts {
		srv.Put(k, v)
	}
	s := startYAML(t, fmt.Sprintf(`listen: ["LISTEN"]
http: "HTTP"
zones:
  Example.Internal:
    - etcd: {endpoints: ["%s"], ttl: 30s, sync_timeout: 10s}
  other.internal:
    - hosts: {entries: ["10.5.0.1 h"], ttl: 15s}
`, srv.Endpoint()), nil)
	waitReady(t, s.base, 200)
	waitAnswer(t, s.addr, "web.example.internal", dns.TypeA, "NOERROR:10.0.1.1")

	cases := []struct {
		name  string
		qtype uint16
		want  string
	}{
		{"ALIAS.example.internal.", dns.TypeA, "NOERROR:web.example.internal.,10.0.1.1"},
		{"alias2.example.internal.", dns.TypeA, "NOERROR:alias.example.internal.,web.example.internal.,10.0.1.1"},
		{"alias.example.internal.", dns.TypeCNAME, "NOERROR:web.example.internal."},
		{"cross.example.internal.", dns.TypeA, "NOERROR:h.other.internal.,10.5.0.1"},
		{"deep.example.internal.", dns.TypeA, "NOERROR:"},
		{"er.deep.example.internal.", dns.TypeA, "NOERROR:10.0.3.1"}, // SkyDNS: keys one level below are records of the name
		{"txt.example.internal.", dns.TypeTXT, `NOERROR:"hello"`},
		{"mx.example.internal.", dns.TypeMX, "NOERROR:10 web.example.internal."},
		{"nope.example.internal.", dns.TypeA, "NXDOMAIN:"},
	}
	for _, tc := range cases {
		r := dnstest.Ask(t, s.addr, tc.name, tc.qtype)
		if got := dnstest.RData(r); got != tc.want || !r.Authoritative {
			t.Errorf("%s %s = %q aa=%v, want %q", tc.name, dns.TypeToString[tc.qtype], got, r.Authoritative, tc.want)
		}
	}

	t.Run("CNAME to a name that does not exist", func(t *testing.T) {
		r := dnstest.Ask(t, s.addr, "dangling.example.internal.", dns.TypeA)
		if r.Rcode != dns.RcodeNameError || len(r.Answer) != 1 || dnstest.SOA(r) == nil || !r.Authoritative {
			t.Errorf("dangling CNAME: %v", r)
		}
	})
	t.Run("CNAME loops", func(t *testing.T) {
		for _, name := range []string{"loop1.example.internal.", "self.example.internal."} {
			start := time.Now()
			r := dnstest.Ask(t, s.addr, name, dns.TypeA)
			if r.Rcode == dns.RcodeServerFailure && len(r.Answer) == 0 {
				continue // acceptable too
			}
			if r.Rcode != dns.RcodeSuccess || len(r.Answer) == 0 || len(r.Answer) > 3 || time.Since(start) > time.Second {
				t.Errorf("%s: %v", name, r)
			}
		}
	})
	t.Run("CNAME chain limit 8", func(t *testing.T) {
		r := dnstest.Ask(t, s.addr, "c0.example.internal.", dns.TypeA)
		n := 0
		for _, rr := range r.Answer {
			if rr.Header().Rrtype == dns.TypeCNAME {
				n++
			}
			if rr.Header().Rrtype == dns.TypeA {
				t.Errorf("an 11-link chain was followed to the end: %v", r)
			}
		}
		if n > 9 || n < 8 {
			t.Errorf("chain of %d CNAMEs; want about 8: %v", n, r)
		}
		r = dnstest.Ask(t, s.addr, "c3.example.internal.", dns.TypeA)
		if !strings.HasSuffix(dnstest.RData(r), ",10.0.4.1") {
			t.Errorf("a 7-link chain is not completed: %v", dnstest.RData(r))
		}
	})
	t.Run("SRV additionals", func(t *testing.T) {
		r := dnstest.Ask(t, s.addr, "_pg._tcp.example.internal.", dns.TypeSRV)
		if len(r.Answer) != 2 {
			t.Fatalf("SRV: %v", r)
		}
		var extra []string
		for _, rr := range r.Extra {
			if rr.Header().Rrtype != dns.TypeOPT {
				extra = append(extra, rr.Header().Name+" "+strings.Fields(rr.String())[4])
			}
		}
		if len(extra) != 2 {
			t.Errorf("SRV additionals %v; want the A of both targets", r.Extra)
		}
	})
	t.Run("malformed value skipped", func(t *testing.T) {
		r := dnstest.Ask(t, s.addr, "bad.example.internal.", dns.TypeA)
		if r.Rcode == dns.RcodeServerFailure {
			t.Errorf("malformed value: %v", r)
		}
	})
	t.Run("serial increases with a put, minimum is the etcd ttl", func(t *testing.T) {
		soa1 := checkNegative(t, dnstest.Ask(t, s.addr, "nope.example.internal.", dns.TypeA), dns.RcodeNameError, "example.internal.", 30)
		srv.Put("/skydns/internal/example/new", `{"host":"10.0.9.9"}`)
		waitAnswer(t, s.addr, "new.example.internal", dns.TypeA, "NOERROR:10.0.9.9")
		soa2 := checkNegative(t, dnstest.Ask(t, s.addr, "nope.example.internal.", dns.TypeA), dns.RcodeNameError, "example.internal.", 30)
		if soa1 != nil && soa2 != nil && soa2.Serial <= soa1.Serial {
			t.Errorf("serial %d after a put, was %d", soa2.Serial, soa1.Serial)
		}
	})
	t.Run("wildcard query label", func(t *testing.T) {
		r := dnstest.Ask(t, s.addr, "*.deep.example.internal.", dns.TypeA)
		if r.Rcode != dns.RcodeSuccess {
			t.Errorf("* query: %v", r)
		}
	})
}

func TestSpecEDNS(t *testing.T) {
	var entries []string
	for i := 1; i <= 120; i++ {
		entries = append(entries, fmt.Sprintf(`"10.0.%d.%d big"`, i/250, i%250+1))
	}
	cfg := `listen: ["LISTEN"]
limits: {udp_buffer: 1400}
zones:
  example.internal:
    - hosts: {entries: [` + strings.Join(entries, ", ") + `, "10.0.0.1 small"]}
`
	s := startYAML(t, cfg, nil)
	send := func(netw string, size uint16, do bool) (*dns.Msg, int) {
		m := new(dns.Msg)
		m.SetQuestion("big.example.internal.", dns.TypeA)
		if size > 0 {
			m.SetEdns0(size, do)
		}
		c, err := net.Dial(netw, s.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		co := &dns.Conn{Conn: c, UDPSize: 65535}
		if err := co.WriteMsg(m); err != nil {
			t.Fatal(err)
		}
		co.SetReadDeadline(time.Now().Add(2 * time.Second))
		raw, err := co.ReadMsgHeader(nil)
		if err != nil {
			t.Fatal(err)
		}
		r := new(dns.Msg)
		if err := r.Unpack(raw); err != nil {
			t.Fatalf("invalid response (%d bytes): %v", len(raw), err)
		}
		if r.Id != m.Id {
			t.Fatalf("id %d, want %d", r.Id, m.Id)
		}
		return r, len(raw)
	}
	r, n := send("udp", 0, false)
	if !r.Truncated || n > 512 || r.IsEdns0() != nil {
		t.Errorf("no EDNS: tc=%v size=%d opt=%v", r.Truncated, n, r.IsEdns0())
	}
	r, n = send("udp", 1000, false)
	if !r.Truncated || n > 1000 || r.IsEdns0() == nil || r.IsEdns0().UDPSize() != 1400 {
		t.Errorf("EDNS 1000: tc=%v size=%d opt=%v", r.Truncated, n, r.IsEdns0())
	}
	r, n = send("udp", 4096, true)
	if !r.Truncated || n > 1400 || r.IsEdns0() == nil || !r.IsEdns0().Do() {
		t.Errorf("EDNS 4096 with our 1400: tc=%v size=%d opt=%v", r.Truncated, n, r.IsEdns0())
	}
	r, _ = send("tcp", 0, false)
	if r.Truncated || len(r.Answer) != 120 {
		t.Errorf("TCP: tc=%v %d answers", r.Truncated, len(r.Answer))
	}
	// Our OPT: the configured size on a small answer.
	m := new(dns.Msg)
	m.SetQuestion("small.example.internal.", dns.TypeA)
	m.SetEdns0(4096, false)
	r = dnstest.Exchange(t, "udp", s.addr, m)
	if o := r.IsEdns0(); o == nil || o.UDPSize() != 1400 || r.Truncated || len(r.Answer) != 1 {
		t.Errorf("small with EDNS: %v", r)
	}
	// Default 1232.
	s2 := startYAML(t, "listen: [\"LISTEN\"]\nzones:\n  example.internal:\n    - hosts: {entries: [\"10.0.0.1 a\"]}\n", nil)
	m.SetQuestion("a.example.internal.", dns.TypeA)
	r = dnstest.Exchange(t, "udp", s2.addr, m)
	if o := r.IsEdns0(); o == nil || o.UDPSize() != 1232 {
		t.Errorf("default buffer: %v", r)
	}
}

// TestTruncatedRetriedOverTCP: a name with 2,000 addresses in a hosts
// file (72 KB as written, 32 KB with its names compressed) is TC=1 over
// UDP, and the client's retry over TCP gets every address.
func TestTruncatedRetriedOverTCP(t *testing.T) {
	var hosts strings.Builder
	for i := range 2000 {
		fmt.Fprintf(&hosts, "10.5.%d.%d huge.example.internal\n", i/250, i%250+1)
	}
	s := startYAML(t, "listen: [\"LISTEN\"]\nzones:\n  example.internal:\n    - hosts: {files: [big.hosts]}\n",
		map[string]string{"big.hosts": hosts.String()})
	m := new(dns.Msg)
	m.SetQuestion("huge.example.internal.", dns.TypeA)
	m.SetEdns0(1232, false)
	if r := dnstest.Exchange(t, "udp", s.addr, m); !r.Truncated || r.Rcode != dns.RcodeSuccess {
		t.Errorf("over UDP: %s, TC %v; want NOERROR with TC", dns.RcodeToString[r.Rcode], r.Truncated)
	}
	r := dnstest.Exchange(t, "tcp", s.addr, m)
	if r.Rcode != dns.RcodeSuccess || r.Truncated || len(r.Answer) != 2000 {
		t.Fatalf("over TCP: %s, TC %v, %d answers; want all 2,000", dns.RcodeToString[r.Rcode], r.Truncated, len(r.Answer))
	}
	seen := map[string]bool{}
	for _, rr := range r.Answer {
		if a, ok := rr.(*dns.A); ok && a.Hdr.Name == "huge.example.internal." {
			seen[a.A.String()] = true
		}
	}
	if len(seen) != 2000 || !seen["10.5.0.1"] || !seen["10.5.7.250"] {
		t.Errorf("over TCP: %d distinct addresses of huge.example.internal, want 2,000", len(seen))
	}
}

// --- §4.9 forward, cache -------------------------------------------------

func TestSpecForward(t *testing.T) {
	var sawDO atomic.Bool
	var tcpQueries atomic.Int64
	handler := func(w dns.ResponseWriter, r *dns.Msg) {
		q := r.Question[0]
		m := new(dns.Msg)
		m.SetReply(r)
		m.RecursionAvailable = true
		if o := r.IsEdns0(); o != nil && o.Do() && strings.HasPrefix(q.Name, "do.") {
			sawDO.Store(true)
		}
		isTCP := w.RemoteAddr().Network() == "tcp"
		if isTCP && q.Name != "." {
			tcpQueries.Add(1)
		}
		switch {
		case strings.HasPrefix(q.Name, "tc."):
			if !isTCP {
				m.Truncated = true
			} else {
				m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60}, A: net.ParseIP("192.0.2.9")})
			}
		case strings.HasPrefix(q.Name, "nx."):
			m.Rcode = dns.RcodeNameError
			m.Ns = append(m.Ns, &dns.SOA{Hdr: dns.RR_Header{Name: "example.com.", Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: 60}, Ns: "ns.example.com.", Mbox: "h.example.com.", Serial: 7, Minttl: 60})
		case q.Qtype == dns.TypeA:
			m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 300}, A: net.ParseIP("192.0.2.1")})
		}
		_ = w.WriteMsg(m)
	}
	// bad answers SERVFAIL to everything except the root probe.
	bad := dnstest.StartUpstream(t, func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetRcode(r, dns.RcodeServerFailure)
		if r.Question[0].Name == "." {
			m.Rcode = dns.RcodeSuccess
		}
		_ = w.WriteMsg(m)
	})
	good := dnstest.StartUpstream(t, handler)
	s := startYAML(t, fmt.Sprintf(`listen: ["LISTEN"]
http: "HTTP"
zones:
  example.internal:
    - hosts: {entries: ["10.0.0.1 a"]}
  .:
    - forward:
        upstreams: ["%s", "%s"]
        policy: sequential
        timeout: 500ms
        except: [Corp.Internal.]
`, bad.Addr, good.Addr), nil)

	r := dnstest.Ask(t, s.addr, "www.example.com.", dns.TypeA)
	if dnstest.RData(r) != "NOERROR:192.0.2.1" || r.Authoritative {
		t.Errorf("SERVFAIL from the first upstream must try the next: %v", r)
	}
	// ID rewritten: cached answers with other IDs.
	for i := 0; i < 3; i++ {
		m := new(dns.Msg)
		m.SetQuestion("www.example.com.", dns.TypeA)
		m.Id = uint16(1000 + i)
		if r := dnstest.Exchange(t, "udp", s.addr, m); r.Id != m.Id || dnstest.RData(r) != "NOERROR:192.0.2.1" {
			t.Errorf("cached answer id %d, want %d", r.Id, m.Id)
		}
	}
	// TC=1 from upstream over UDP: retried over TCP.
	if r := dnstest.Ask(t, s.addr, "tc.example.com.", dns.TypeA); dnstest.RData(r) != "NOERROR:192.0.2.9" || r.Truncated {
		t.Errorf("TC=1 upstream answer not retried over TCP: %v", r)
	}
	// DO bit passed to upstreams.
	m := new(dns.Msg)
	m.SetQuestion("do.example.com.", dns.TypeA)
	m.SetEdns0(1232, true)
	dnstest.Exchange(t, "udp", s.addr, m)
	if !sawDO.Load() {
		t.Errorf("the DO bit did not reach the upstream")
	}
	// Upstream negative answer as given.
	r = dnstest.Ask(t, s.addr, "nx.example.com.", dns.TypeA)
	if r.Rcode != dns.RcodeNameError || dnstest.SOA(r) == nil || dnstest.SOA(r).Serial != 7 {
		t.Errorf("upstream NXDOMAIN: %v", r)
	}
	// except: not forwarded, falls through → NXDOMAIN with the root's SOA.
	for _, name := range []string{"x.corp.internal.", "X.CORP.INTERNAL.", "corp.internal."} {
		r = dnstest.Ask(t, s.addr, name, dns.TypeA)
		if r.Rcode != dns.RcodeNameError || dnstest.SOA(r) == nil || dnstest.SOA(r).Hdr.Name != "." {
			t.Errorf("%s (except): %v", name, r)
		}
	}
	_, metrics := httpGet(t, s.base+"/metrics")
	for _, want := range []string{
		`dnsd_forward_requests_total{rcode="SERVFAIL",upstream="udp://` + bad.Addr + `"}`,
		`dnsd_forward_upstream_up{upstream="udp://` + good.Addr + `"} 1`,
		"dnsd_cache_hits_total 3",
		"dnsd_cache_entries ",
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s\n%s", want, grep(metrics, "dnsd_"))
		}
	}

	// §5: a reload that puts a name under except drops its cache entry.
	n := good.Queries()
	s.reload(t, fmt.Sprintf(`listen: ["LISTEN"]
http: "HTTP"
zones:
  example.internal:
    - hosts: {entries: ["10.0.0.1 a"]}
  .:
    - forward:
        upstreams: ["%s"]
        except: [example.com]
`, good.Addr), true, 1)
	r = dnstest.Ask(t, s.addr, "www.example.com.", dns.TypeA)
	if r.Rcode != dns.RcodeNameError {
		t.Errorf("after except: [example.com] the cached entry is still served: %v", r)
	}
	_ = n
}

// All upstreams down and serve_stale off: SERVFAIL, immediately after the
// first timeout; never NXDOMAIN.
func TestSpecForwardAllDown(t *testing.T) {
	up := dnstest.StartUpstream(t, nil)
	s := startYAML(t, fmt.Sprintf(`listen: ["LISTEN"]
cache: {serve_stale: 0s}
zones:
  .:
    - forward: {upstreams: ["%s"], timeout: 200ms, health_check: 100ms}
`, up.Addr), nil)
	if r := dnstest.Ask(t, s.addr, "short.example.com.", dns.TypeA); dnstest.RData(r) != "NOERROR:192.0.2.1" {
		t.Fatalf("%v", r)
	}
	up.Stop()
	time.Sleep(1200 * time.Millisecond)
	if r := dnstest.Ask(t, s.addr, "short.example.com.", dns.TypeA); r.Rcode != dns.RcodeServerFailure {
		t.Errorf("expired, serve_stale off, upstream down: %v; want SERVFAIL", r)
	}
}

// A source error never falls through to forward (§4.4).
func TestSpecServfailNoFallthrough(t *testing.T) {
	up := dnstest.StartUpstream(t, nil)
	dead := freePort(t)
	s := startYAML(t, fmt.Sprintf(`listen: ["LISTEN"]
http: "HTTP"
zones:
  example.internal:
    - etcd: {endpoints: ["http://127.0.0.1:%d"], sync_timeout: 300ms}
    - forward: {upstreams: ["%s"]}
`, dead, up.Addr), nil)
	for i := 0; i < 2; i++ {
		r := dnstest.Ask(t, s.addr, "db.example.internal.", dns.TypeA)
		if r.Rcode != dns.RcodeServerFailure || len(r.Answer) != 0 {
			t.Errorf("unsynced etcd: %v", r)
		}
		time.Sleep(400 * time.Millisecond)
	}
	if n := up.Queries(); n != 0 {
		t.Errorf("an internal name leaked to the upstream %d times", n)
	}
	code, body := httpGet(t, s.base+"/ready")
	if code != 503 || strings.TrimSpace(body) == "" {
		t.Errorf("/ready = %d %q", code, body)
	}
	if code, _ := httpGet(t, s.base+"/health"); code != 200 {
		t.Errorf("/health = %d", code)
	}
}

// --- §5 reload, §6 metrics -------------------------------------------------

func TestSpecReloadAndMetrics(t *testing.T) {
	cfg := `listen: ["LISTEN"]
http: "HTTP"
zones:
  example.internal:
    - hosts: {files: [a.hosts, b.hosts], ttl: 10s}
`
	s := startYAML(t, cfg, map[string]string{"a.hosts": "10.0.0.1 a.example.internal\n", "b.hosts": "10.0.0.2 b.example.internal\n"})
	waitAnswer(t, s.addr, "a.example.internal", dns.TypeA, "NOERROR:10.0.0.1")
	dnstest.Ask(t, s.addr, "nope.example.internal.", dns.TypeAAAA)
	m := new(dns.Msg)
	m.SetQuestion("a.example.internal.", dns.TypeA)
	dnstest.Exchange(t, "tcp", s.addr, m)

	_, metrics := httpGet(t, s.base+"/metrics")
	for _, re := range []string{
		`(?m)^dnsd_requests_total\{proto="udp",qtype="A",view="default",zone="example.internal."\} [1-9]`,
		`(?m)^dnsd_requests_total\{proto="tcp",qtype="A",view="default",zone="example.internal."\} 1$`,
		`(?m)^dnsd_responses_total\{rcode="NOERROR",source="hosts",view="default",zone="example.internal."\} [1-9]`,
		`(?m)^dnsd_responses_total\{rcode="NXDOMAIN",source="[a-z]*",view="default",zone="example.internal."\} 1$`,
		`(?m)^dnsd_request_duration_seconds_bucket\{zone="example.internal.",le="`,
		`(?m)^dnsd_request_duration_seconds_count\{zone="example.internal."\} [1-9]`,
		`(?m)^dnsd_source_synced\{source="[^"]+"\} 1$`,
		`(?m)^dnsd_source_synced\{source="hosts files=[^",]*a\.hosts,[^",]*b\.hosts[^"]*"\} 1$`, // printable: no NUL between the files
		`(?m)^dnsd_reload_total\{result="success"\} 0$`,
		`(?m)^dnsd_reload_total\{result="error"\} 0$`,
		`(?m)^dnsd_build_info\{commit="[^"]*",goversion="go[^"]+",version="dev"\} 1$`,
		`(?m)^# TYPE dnsd_cache_hits_total counter$`,
		`(?m)^# TYPE dnsd_cache_misses_total counter$`,
		`(?m)^# TYPE dnsd_cache_entries gauge$`,
	} {
		if !regexp.MustCompile(re).MatchString(metrics) {
			t.Errorf("/metrics does not match %s", re)
		}
	}
	if code, body := httpGet(t, s.base+"/ready"); code != 200 {
		t.Errorf("/ready = %d %q", code, body)
	}

	// Broken reloads: each kind keeps the old answers and counts an error.
	broken := []string{
		cfg + "        bogus: 1\n",
		strings.Replace(cfg, "a.hosts", "missing.hosts", 1),
		cfg + "  Example.Internal.:\n    - hosts: {entries: [\"10.0.0.2 a\"]}\n",
		strings.Replace(cfg, "10s", "10", 1),
	}
	for i, b := range broken {
		s.reload(t, b, false, i+1)
		waitAnswer(t, s.addr, "a.example.internal", dns.TypeA, "NOERROR:10.0.0.1")
	}
	if !regexp.MustCompile(`dnsd\.yaml:\d+:\d+`).MatchString(grep(s.stderr.String(), "reload failed")) {
		t.Errorf("reload errors lack file:line:col:\n%s", grep(s.stderr.String(), "reload failed"))
	}
	_, metrics = httpGet(t, s.base+"/metrics")
	if !strings.Contains(metrics, fmt.Sprintf(`dnsd_reload_total{result="error"} %d`, len(broken))) {
		t.Errorf("reload errors: %s", grep(metrics, "dnsd_reload_total"))
	}
	// A good reload with a new listen address; the old one closes.
	newAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	old := s.addr
	s.addr = newAddr
	s.reload(t, cfg, true, 1)
	waitAnswer(t, newAddr, "a.example.internal", dns.TypeA, "NOERROR:10.0.0.1")
	if _, err := query(t, "tcp", old, "a.example.internal", dns.TypeA); err == nil {
		t.Errorf("removed listen address %s still answers", old)
	}
	_, metrics = httpGet(t, s.base+"/metrics")
	if !strings.Contains(metrics, `dnsd_reload_total{result="success"} 1`) {
		t.Errorf("reload success: %s", grep(metrics, "dnsd_reload_total"))
	}

	// SIGINT: graceful stop, exit 0.
	s.stop(os.Interrupt)
}

// /ready is 503 with a reason until an etcd source syncs, then 200.
func TestSpecReadyEtcdLate(t *testing.T) {
	port := etcdtest.FreePort(t)
	s := startYAML(t, fmt.Sprintf(`listen: ["LISTEN"]
http: "HTTP"
zones:
  example.internal:
    - etcd: {endpoints: ["http://127.0.0.1:%d"], sync_timeout: 300ms}
`, port), nil)
	code, body := httpGet(t, s.base+"/ready")
	if code != 503 || !strings.Contains(body, "etcd") {
		t.Errorf("/ready = %d %q; want 503 naming etcd", code, body)
	}
	r := dnstest.Ask(t, s.addr, "a.example.internal.", dns.TypeA)
	if r.Rcode != dns.RcodeServerFailure {
		t.Errorf("unsynced: %v", r)
	}
	srv := etcdtest.Start(t, etcdtest.Options{ClientPort: port})
	srv.Put("/skydns/internal/example/a", `{"host":"10.0.0.1"}`)
	waitReady(t, s.base, 200)
	waitAnswer(t, s.addr, "a.example.internal", dns.TypeA, "NOERROR:10.0.0.1")
	_, metrics := httpGet(t, s.base+"/metrics")
	if !regexp.MustCompile(`(?m)^dnsd_source_synced\{source="etcd[^"]*"\} 1$`).MatchString(metrics) {
		t.Errorf("synced: %s", grep(metrics, "dnsd_source_synced"))
	}
}

// --- more §2–§5 --------------------------------------------------------

// A config error at start: FILE:LINE:COL lines and exit 1, nothing served.
func TestSpecStartConfigError(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "dnsd.yaml"), "zones:\n  example.internal:\n    - hosts: {entries: [\"10.0.0.1 a\"], ttl: 5x}\n")
	cmd := exec.Command(dnsdBin)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != 1 || !strings.Contains(string(out), "dnsd.yaml:3:") {
		t.Errorf("start with a bad config: %v %q", err, out)
	}
	cmd = exec.Command(dnsdBin, "-config", "nope.yaml")
	cmd.Dir = dir
	out, err = cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.Contains(string(out), "nope.yaml") {
		t.Errorf("start with a missing config: %v %q", err, out)
	}
}

// SIGTERM: queries in flight are finished, then exit 0.
func TestSpecGracefulStop(t *testing.T) {
	up := dnstest.StartUpstream(t, func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(r)
		if r.Question[0].Name == "slow.example.com." {
			time.Sleep(700 * time.Millisecond)
			m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: r.Question[0].Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60}, A: net.ParseIP("192.0.2.7")})
		}
		_ = w.WriteMsg(m)
	})
	s := startYAML(t, fmt.Sprintf("listen: [\"LISTEN\"]\nzones:\n  .:\n    - forward: {upstreams: [\"%s\"], timeout: 2s}\n", up.Addr), nil)
	got := make(chan string, 1)
	go func() {
		r, err := query(t, "udp", s.addr, "slow.example.com", dns.TypeA)
		if err != nil {
			got <- err.Error()
			return
		}
		got <- dnstest.RData(r)
	}()
	time.Sleep(200 * time.Millisecond)
	s.signal(syscall.SIGTERM)
	if g := <-got; g != "NOERROR:192.0.2.7" {
		t.Errorf("query in flight at SIGTERM: %s", g)
	}
	s.waitExit()
}

// rate_per_client: over the rate, UDP gets empty TC=1 answers; TCP is never
// limited.
func TestSpecRateLimit(t *testing.T) {
	s := startYAML(t, "listen: [\"LISTEN\"]\nlimits: {rate_per_client: 5}\nzones:\n  example.internal:\n    - hosts: {entries: [\"10.0.0.1 a\"]}\n", nil)
	tc := 0
	for i := 0; i < 30; i++ {
		r := dnstest.Ask(t, s.addr, "a.example.internal.", dns.TypeA)
		if r.Truncated {
			tc++
			if len(r.Answer) != 0 {
				t.Errorf("rate-limited answer not empty: %v", r)
			}
		}
	}
	if tc < 10 {
		t.Errorf("%d of 30 fast UDP queries were TC=1 with rate 5/s", tc)
	}
	for i := 0; i < 20; i++ {
		m := new(dns.Msg)
		m.SetQuestion("a.example.internal.", dns.TypeA)
		if r := dnstest.Exchange(t, "tcp", s.addr, m); dnstest.RData(r) != "NOERROR:10.0.0.1" || r.Truncated {
			t.Fatalf("TCP rate limited: %v", r)
		}
	}
}

// udp:// and tcp:// listen only on that transport; REFUSED from an
// upstream tries the next; ANY at an apex.
func TestSpecListenSchemesAndRefusedUpstream(t *testing.T) {
	refusing := dnstest.StartUpstream(t, func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetRcode(r, dns.RcodeRefused)
		if r.Question[0].Name == "." {
			m.Rcode = dns.RcodeSuccess
		}
		_ = w.WriteMsg(m)
	})
	good := dnstest.StartUpstream(t, nil)
	up, tp := freePort(t), freePort(t)
	startYAML(t, fmt.Sprintf(`listen: ["udp://127.0.0.1:%d", "tcp://127.0.0.1:%d"]
zones:
  example.internal:
    - hosts: {entries: ["10.0.0.1 a"], ttl: 7s}
  .:
    - forward: {upstreams: ["%s", "%s"], policy: sequential}
`, up, tp, refusing.Addr, good.Addr), nil)
	ua, ta := fmt.Sprintf("127.0.0.1:%d", up), fmt.Sprintf("127.0.0.1:%d", tp)
	waitAnswer(t, ua, "a.example.internal", dns.TypeA, "NOERROR:10.0.0.1")
	if r, err := query(t, "tcp", ta, "a.example.internal", dns.TypeA); err != nil || dnstest.RData(r) != "NOERROR:10.0.0.1" {
		t.Errorf("tcp://: %v %v", r, err)
	}
	if _, err := query(t, "tcp", ua, "a.example.internal", dns.TypeA); err == nil {
		t.Errorf("udp:// listen answers TCP")
	}
	if r := dnstest.Ask(t, ua, "www.example.com.", dns.TypeA); dnstest.RData(r) != "NOERROR:192.0.2.1" {
		t.Errorf("REFUSED from the first upstream must try the next: %v", r)
	}
	r := dnstest.Ask(t, ua, "example.internal.", dns.TypeANY)
	if len(r.Answer) != 1 || r.Answer[0].Header().Rrtype != dns.TypeSOA || !r.Authoritative {
		t.Errorf("ANY at the apex: %v", r)
	}
	r = dnstest.Ask(t, ua, "nope.example.internal.", dns.TypeANY)
	checkNegative(t, r, dns.RcodeNameError, "example.internal.", 7)
	r = dnstest.Ask(t, ua, "example.internal.", dns.TypeNS)
	if len(r.Extra) != 1 || !strings.HasSuffix(r.Extra[0].String(), "127.0.0.1") {
		t.Errorf("NS glue with udp:// and tcp:// listen: %v", r.Extra)
	}
}

// max_concurrent: in-flight forwards over it get REFUSED.
func TestSpecForwardMaxConcurrent(t *testing.T) {
	up := dnstest.StartUpstream(t, func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(r)
		if r.Question[0].Name != "." {
			time.Sleep(500 * time.Millisecond)
			m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: r.Question[0].Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60}, A: net.ParseIP("192.0.2.7")})
		}
		_ = w.WriteMsg(m)
	})
	s := startYAML(t, fmt.Sprintf("listen: [\"LISTEN\"]\nzones:\n  .:\n    - forward: {upstreams: [\"%s\"], timeout: 2s, max_concurrent: 1}\n", up.Addr), nil)
	res := make(chan int, 3)
	for i := 0; i < 3; i++ {
		go func(i int) {
			r, err := query(t, "udp", s.addr, fmt.Sprintf("n%d.example.com", i), dns.TypeA)
			if err != nil {
				res <- -1
				return
			}
			res <- r.Rcode
		}(i)
	}
	counts := map[int]int{}
	for i := 0; i < 3; i++ {
		counts[<-res]++
	}
	if counts[dns.RcodeSuccess] < 1 || counts[dns.RcodeRefused] < 1 {
		t.Errorf("3 concurrent forwards with max_concurrent 1: rcodes %v; want NOERROR and REFUSED", counts)
	}
}

// A reload that removes an etcd source stops its backend; /ready follows
// the new pipeline.
func TestSpecReloadRemovesUnsyncedSource(t *testing.T) {
	dead := freePort(t)
	base := "listen: [\"LISTEN\"]\nhttp: \"HTTP\"\nzones:\n  example.internal:\n    - hosts: {entries: [\"10.0.0.1 a\"]}\n"
	s := startYAML(t, base+fmt.Sprintf("  other.internal:\n    - etcd: {endpoints: [\"http://127.0.0.1:%d\"], sync_timeout: 200ms}\n", dead), nil)
	waitReady(t, s.base, 503)
	s.reload(t, base, true, 1)
	waitReady(t, s.base, 200)
	if r := dnstest.Ask(t, s.addr, "x.other.internal.", dns.TypeA); r.Rcode != dns.RcodeRefused {
		t.Errorf("removed zone: %v", r)
	}
	_, metrics := httpGet(t, s.base+"/metrics")
	if strings.Contains(metrics, `dnsd_source_synced{source="etcd`) {
		t.Errorf("a removed backend is still reported: %s", grep(metrics, "dnsd_source_synced"))
	}
}

// Names outside the zone are ignored and logged at load, in hosts files
// and in inline entries alike: dnsd check accepts the file, dnsd starts,
// the zone's other names answer, the outside name is not answered from
// this source.
func TestSpecHostsOutsideZoneIgnored(t *testing.T) {
	cfg := `listen: ["LISTEN"]
zones:
  example.internal:
    - hosts: {entries: ["10.0.0.1 a", "10.0.0.2 b.other.test"], files: [x.hosts]}
  other.test:
    - hosts: {entries: ["10.9.9.9 c"]}
`
	s := startYAML(t, cfg, map[string]string{"x.hosts": "10.0.0.3 d.example.internal\n10.0.0.4 e.elsewhere.test\n"})
	for name, want := range map[string]string{
		"a.example.internal.": "NOERROR:10.0.0.1", "d.example.internal.": "NOERROR:10.0.0.3",
		"b.other.test.": "NXDOMAIN:", "c.other.test.": "NOERROR:10.9.9.9",
	} {
		if got := dnstest.RData(dnstest.Ask(t, s.addr, name, dns.TypeA)); got != want {
			t.Errorf("%s: %s, want %s", name, got, want)
		}
	}
	s.waitLog("entries' names outside the zone are ignored", 1)
	s.waitLog("hosts names outside the zone are ignored", 1)
	if _, stderr, code := runCheck(t, s.dir, "-config", "dnsd.yaml"); code != 0 {
		t.Errorf("dnsd check: exit %d\n%s", code, stderr)
	}
}
