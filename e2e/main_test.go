package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/dnsd/dnsd/internal/dnstest"
	"github.com/dnsd/dnsd/internal/logtest"
	"github.com/dnsd/dnsd/internal/testpki"

	"github.com/miekg/dns"
)

var dnsdBin string

// TestMain builds the -race binary once for every test, and runs the tests
// from the module's root: the paths they name (contrib/, docs/, scripts/,
// "." to build) are relative to it.
func TestMain(m *testing.M) {
	if err := os.Chdir(".."); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	dir, err := os.MkdirTemp("", "dnsd-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	dnsdBin = filepath.Join(dir, "dnsd")
	out, err := exec.Command("go", "build", "-race", "-o", dnsdBin, ".").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "building dnsd: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// handedOut records the ports freePort has returned in this test binary:
// the kernel may hand the same ephemeral port to two listen-and-close probes
// in a row, and a test asking for a DNS and an HTTP port must get two.
var handedOut sync.Map

// freePort returns a port that is free for both UDP and TCP on 127.0.0.1
// and that no earlier call returned. It is taken below the kernel's
// ephemeral range (32768 and up on Linux), never from it: dnsd binds its
// UDP sockets with SO_REUSEPORT, so a port the kernel handed to another
// test's server (bound to :0, also with SO_REUSEPORT) between this probe
// and dnsd's bind would be shared, silently, the two servers taking each
// other's queries.
func freePort(tb testing.TB) int {
	tb.Helper()
	for i := 0; i < 200; i++ {
		port := 20000 + rand.IntN(12000)
		if _, dup := handedOut.Load(port); dup {
			continue
		}
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue
		}
		u, err := net.ListenPacket("udp", fmt.Sprintf("127.0.0.1:%d", port))
		l.Close()
		if err != nil {
			continue
		}
		u.Close()
		if _, dup := handedOut.LoadOrStore(port, true); !dup {
			return port
		}
	}
	tb.Fatal("no free port")
	return 0
}

// proc is a running dnsd.
type proc struct {
	t      *testing.T
	cmd    *exec.Cmd
	stderr *syncBuffer
	done   chan error
}

type syncBuffer = logtest.Buffer

func startDnsd(t *testing.T, dir string, args ...string) *proc {
	t.Helper()
	return startBinary(t, dnsdBin, nil, dir, args...)
}

// startBinary starts bin (a dnsd build) in dir with env added to the
// environment.
func startBinary(t *testing.T, bin string, env []string, dir string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	p := &proc{t: t, cmd: cmd, stderr: &syncBuffer{}, done: make(chan error, 1)}
	cmd.Stderr = p.stderr
	cmd.Stdout = p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() {
		p.done <- cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		select {
		case <-exited:
		default:
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("dnsd output:\n%s", p.stderr.String())
		}
	})
	return p
}

func (p *proc) signal(sig os.Signal) {
	p.t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		p.t.Fatal(err)
	}
}

// waitExit waits for dnsd to exit and requires exit status 0.
func (p *proc) waitExit() {
	p.t.Helper()
	select {
	case err := <-p.done:
		if err != nil {
			p.t.Fatalf("dnsd exited with %v", err)
		}
	case <-time.After(15 * time.Second):
		p.t.Fatal("dnsd did not exit")
	}
}

// stop sends sig (SIGTERM, SIGINT) and requires a clean exit.
func (p *proc) stop(sig os.Signal) {
	p.t.Helper()
	p.signal(sig)
	p.waitExit()
}

// waitLog waits until dnsd's log contains s n times.
func (p *proc) waitLog(s string, n int) {
	p.t.Helper()
	dnstest.Eventually(p.t, fmt.Sprintf("dnsd to log %q (%d times)", s, n), 20*time.Second, func() bool {
		return strings.Count(p.stderr.String(), s) >= n
	})
}

// query asks addr over netw (see dnstest.Client) with a 2 s timeout, for
// tests that expect no answer as well as those that wait for one.
func query(t *testing.T, netw, addr, name string, qtype uint16) (*dns.Msg, error) {
	t.Helper()
	return dnstest.Client{Net: netw, Timeout: 2 * time.Second}.Exchange(dnstest.Query(name, qtype), addr)
}

// waitAnswer polls until name's answer set (as strings of rdata) is want.
func waitAnswer(t *testing.T, addr, name string, qtype uint16, want string) {
	t.Helper()
	waitAnswerWithin(t, 5*time.Second, addr, name, qtype, want)
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestVersion(t *testing.T) {
	out, err := exec.Command(dnsdBin, "version").CombinedOutput()
	if err != nil {
		t.Fatalf("dnsd version: %v\n%s", err, out)
	}
	if !strings.HasPrefix(string(out), "dnsd ") || !strings.Contains(string(out), "go1.") {
		t.Fatalf("dnsd version printed %q", out)
	}
}

func TestCheck(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a.hosts"), "10.1.1.1 a.example.internal\n")
	writeFile(t, filepath.Join(dir, "good.yaml"), "listen: [\"127.0.0.1:5353\"]\nzones:\n  example.internal:\n    - hosts: {files: [a.hosts]}\n")
	writeFile(t, filepath.Join(dir, "bad.yaml"), "listen: [\"127.0.0.1:5353\"]\nzones:\n  example.internal:\n    - hosts:\n        files: [a.hosts]\n        ttl: 5x\n")

	cmd := exec.Command(dnsdBin, "check", "-config", "good.yaml")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("check good.yaml: %v\n%s", err, out)
	}
	cmd = exec.Command(dnsdBin, "check", "-config", "bad.yaml")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("check bad.yaml: want exit 1, got %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "bad.yaml:6:14:") || !strings.Contains(string(out), "ttl") {
		t.Fatalf("check bad.yaml: want bad.yaml:6:14 and the key in the message, got:\n%s", out)
	}
}

// TestServeReloadStop is the README's story: serve a hosts file, see an
// edit at once, reload with a good and a broken file, stop with SIGTERM.
func TestServeReloadStop(t *testing.T) {
	dir := t.TempDir()
	port, hport := freePort(t), freePort(t)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	hosts := filepath.Join(dir, "example.hosts")
	writeFile(t, hosts, "10.0.0.10 db.example.internal\nfd00::10 db.example.internal\n")
	cfgText := func(extra string) string {
		return fmt.Sprintf(`listen: ["%s"]
http: "127.0.0.1:%d"
zones:
  example.internal 10.in-addr.arpa:
    - hosts:
        files: [example.hosts]
        entries: [%s]
        ttl: 30s
        fallthrough: false
`, addr, hport, extra)
	}
	cfg := filepath.Join(dir, "dnsd.yaml")
	writeFile(t, cfg, cfgText(`"10.0.0.99 inline"`))
	p := startDnsd(t, dir, "-config", "dnsd.yaml")
	p.waitLog("dnsd started", 1)

	for _, netw := range []string{"udp", "tcp"} {
		r, err := query(t, netw, addr, "db.example.internal", dns.TypeA)
		if err != nil {
			t.Fatalf("%s: %v", netw, err)
		}
		if got := dnstest.RData(r); got != "NOERROR:10.0.0.10" || !r.Authoritative {
			t.Fatalf("%s: db A = %q aa=%v", netw, got, r.Authoritative)
		}
	}
	waitAnswer(t, addr, "DB.Example.Internal.", dns.TypeAAAA, "NOERROR:fd00::10")
	waitAnswer(t, addr, "inline.example.internal", dns.TypeA, "NOERROR:10.0.0.99")
	waitAnswer(t, addr, "10.0.0.10.in-addr.arpa", dns.TypePTR, "NOERROR:db.example.internal.")
	r, err := query(t, "udp", addr, "nope.example.internal", dns.TypeA)
	if err != nil || r.Rcode != dns.RcodeNameError || len(r.Ns) != 1 || r.Ns[0].Header().Rrtype != dns.TypeSOA {
		t.Fatalf("nope: want NXDOMAIN with SOA, got %v %v", r, err)
	}
	r, err = query(t, "udp", addr, "db.example.org", dns.TypeA)
	if err != nil || r.Rcode != dns.RcodeRefused {
		t.Fatalf("out of zone: want REFUSED, got %v %v", r, err)
	}

	// An edit of the hosts file is served at once.
	writeFile(t, hosts, "10.0.0.11 db.example.internal\n")
	waitAnswer(t, addr, "db.example.internal", dns.TypeA, "NOERROR:10.0.0.11")

	// /health, /ready, /metrics.
	base := fmt.Sprintf("http://127.0.0.1:%d", hport)
	if code, _ := httpGet(t, base+"/health"); code != 200 {
		t.Fatalf("/health = %d", code)
	}
	if code, _ := httpGet(t, base+"/ready"); code != 200 {
		t.Fatalf("/ready = %d", code)
	}
	_, metrics := httpGet(t, base+"/metrics")
	for _, want := range []string{`dnsd_requests_total{proto="udp",qtype="A",view="default",zone="example.internal."}`, `dnsd_responses_total{rcode="NXDOMAIN"`, "dnsd_request_duration_seconds_bucket", "dnsd_build_info{", "dnsd_source_synced{"} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}

	// A good reload: the new inline entry is served, the old one is gone.
	writeFile(t, cfg, cfgText(`"10.0.0.98 inline2"`))
	p.signal(syscall.SIGHUP)
	p.waitLog("reloaded", 1)
	waitAnswer(t, addr, "inline2.example.internal", dns.TypeA, "NOERROR:10.0.0.98")
	waitAnswer(t, addr, "inline.example.internal", dns.TypeA, "NXDOMAIN:")
	if strings.Count(p.stderr.String(), "backend started") != 1 {
		t.Errorf("a reload with unchanged hosts files must reuse the backend; log:\n%s", p.stderr.String())
	}

	// A broken reload keeps the running configuration and says where.
	writeFile(t, cfg, cfgText(`"10.0.0.97 inline3"`)+"bogus: 1\n")
	p.signal(syscall.SIGHUP)
	p.waitLog("reload failed", 1)
	if !strings.Contains(p.stderr.String(), "dnsd.yaml:10:1") {
		t.Errorf("the reload error does not name dnsd.yaml:10:1; log:\n%s", p.stderr.String())
	}
	waitAnswer(t, addr, "inline2.example.internal", dns.TypeA, "NOERROR:10.0.0.98")
	_, metrics = httpGet(t, base+"/metrics")
	if !strings.Contains(metrics, `dnsd_reload_total{result="error"} 1`) || !strings.Contains(metrics, `dnsd_reload_total{result="success"} 1`) {
		t.Errorf("reload counters wrong:\n%s", grep(metrics, "dnsd_reload_total"))
	}

	p.stop(syscall.SIGTERM)
}

func grep(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestReloadUnderLoad: 8 goroutines query without pause while dnsd is
// reloaded repeatedly; every query must get the right answer.
func TestReloadUnderLoad(t *testing.T) {
	cfg := func(i int) config {
		return config{Zones: fmt.Sprintf(`  example.internal:
    - hosts:
        files: [a.hosts]
        entries: ["10.9.9.%d gen"]
`, i)}
	}
	p := start(t, cfg(0), map[string]string{"a.hosts": "10.0.0.1 a.example.internal\n"})
	addr := p.addr

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var ok, bad atomic.Int64
	var firstErr atomic.Value
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			netw := "udp"
			if g%2 == 1 {
				netw = "tcp"
			}
			c := &dns.Client{Net: netw, Timeout: 2 * time.Second}
			m := new(dns.Msg)
			m.SetQuestion("a.example.internal.", dns.TypeA)
			for ctx.Err() == nil {
				r, _, err := c.Exchange(m, addr)
				if err != nil || dnstest.RData(r) != "NOERROR:10.0.0.1" {
					bad.Add(1)
					firstErr.CompareAndSwap(nil, fmt.Sprintf("%s: %v %v", netw, err, r))
					continue
				}
				ok.Add(1)
			}
		}(g)
	}
	const reloads = 10
	for i := 1; i <= reloads; i++ {
		p.reload(t, cfg(i).yaml(), true, i)
		waitAnswer(t, addr, "gen.example.internal", dns.TypeA, fmt.Sprintf("NOERROR:10.9.9.%d", i))
		time.Sleep(100 * time.Millisecond) // let the load run on the new pipeline too
	}
	cancel()
	wg.Wait()
	if bad.Load() != 0 {
		t.Fatalf("%d of %d queries failed during reloads; first: %v", bad.Load(), bad.Load()+ok.Load(), firstErr.Load())
	}
	if ok.Load() < 100 {
		t.Fatalf("only %d queries answered: the load did not run", ok.Load())
	}
	t.Logf("%d queries answered across %d reloads", ok.Load(), reloads)
}

// TestTLSListener serves DNS over TLS with a certificate made here.
func TestTLSListener(t *testing.T) {
	certPEM, keyPEM := selfSigned(t)
	d := start(t, config{
		Listen: []string{"tls://LISTEN"},
		Extra:  "tls: {cert: tls.crt, key: tls.key}",
		Log:    "{format: json, queries: true}",
		Zones: `  example.internal:
    - hosts: {entries: ["10.0.0.7 dot"]}
`}, map[string]string{"tls.crt": string(certPEM), "tls.key": string(keyPEM)})
	if got := dnstest.RData(d.ask("tcp-tls", "dot.example.internal", dns.TypeA)); got != "NOERROR:10.0.0.7" {
		t.Fatalf("DoT answer %q", got)
	}
	// log.queries with format json: one JSON line for the query.
	d.waitLog(`"msg":"query"`, 1)
	line := grep(d.stderr.String(), `"msg":"query"`)
	for _, want := range []string{`"proto":"tls"`, `"name":"dot.example.internal."`, `"type":"A"`, `"rcode":"NOERROR"`, `"source":"hosts"`} {
		if !strings.Contains(line, want) {
			t.Errorf("query log line lacks %s: %s", want, line)
		}
	}
}

func selfSigned(t *testing.T) (certPEM, keyPEM []byte) {
	t.Helper()
	_, leaf := testpki.Server(t, "127.0.0.1")
	return leaf.CertPEM, leaf.KeyPEM
}

// TestSystemdNotify: with NOTIFY_SOCKET set dnsd says READY=1 when it
// serves, RELOADING=1 then READY=1 around a reload, STOPPING=1 on stop.
func TestSystemdNotify(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "notify.sock")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	msgs := make(chan string, 16)
	go func() {
		buf := make([]byte, 4096)
		for {
			n, _, err := conn.ReadFromUnix(buf)
			if err != nil {
				close(msgs)
				return
			}
			msgs <- string(buf[:n])
		}
	}()
	next := func(want string) {
		t.Helper()
		select {
		case m := <-msgs:
			if !strings.HasPrefix(m, want) {
				t.Fatalf("sd_notify: got %q, want %q", m, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("sd_notify: no %q", want)
		}
	}
	port := freePort(t)
	writeFile(t, filepath.Join(dir, "dnsd.yaml"), fmt.Sprintf("listen: [\"127.0.0.1:%d\"]\nzones:\n  example.internal:\n    - hosts: {entries: [\"10.0.0.1 a\"]}\n", port))
	cmd := exec.Command(dnsdBin)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "NOTIFY_SOCKET="+sock)
	var out syncBuffer
	cmd.Stderr = &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("dnsd output:\n%s", out.String())
		}
	}()
	next("READY=1")
	waitAnswer(t, fmt.Sprintf("127.0.0.1:%d", port), "a.example.internal", dns.TypeA, "NOERROR:10.0.0.1")
	_ = cmd.Process.Signal(syscall.SIGHUP)
	next("RELOADING=1\nMONOTONIC_USEC=")
	next("READY=1")
	_ = cmd.Process.Signal(syscall.SIGTERM)
	next("STOPPING=1")
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit after SIGTERM: %v", err)
	}
}

// TestReloadListen: a reload binds a new listen address, keeps the
// unchanged one, closes a removed one, and fails as a whole (keeping the
// old sockets) when a new address cannot be bound.
func TestReloadListen(t *testing.T) {
	dir := t.TempDir()
	p1, p2 := freePort(t), freePort(t)
	a1, a2 := fmt.Sprintf("127.0.0.1:%d", p1), fmt.Sprintf("127.0.0.1:%d", p2)
	cfg := func(listen string) string {
		return fmt.Sprintf("listen: [%s]\nzones:\n  example.internal:\n    - hosts: {entries: [\"10.0.0.1 a\"]}\n", listen)
	}
	writeFile(t, filepath.Join(dir, "dnsd.yaml"), cfg(`"`+a1+`"`))
	p := startDnsd(t, dir)
	p.waitLog("dnsd started", 1)
	waitAnswer(t, a1, "a.example.internal", dns.TypeA, "NOERROR:10.0.0.1")

	writeFile(t, filepath.Join(dir, "dnsd.yaml"), cfg(`"`+a1+`", "`+a2+`"`))
	p.signal(syscall.SIGHUP)
	p.waitLog("reloaded", 1)
	waitAnswer(t, a2, "a.example.internal", dns.TypeA, "NOERROR:10.0.0.1")
	waitAnswer(t, a1, "a.example.internal", dns.TypeA, "NOERROR:10.0.0.1")

	// A port held by someone else: the reload fails, a1 and a2 keep serving.
	busy, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	busyCfg := cfg(`"` + a1 + `", "` + a2 + `", "udp://` + busy.LocalAddr().String() + `"`)
	writeFile(t, filepath.Join(dir, "dnsd.yaml"), busyCfg)
	p.signal(syscall.SIGHUP)
	p.waitLog("reload failed", 1)
	// The log names the entry's place in the file.
	if at := fmt.Sprintf("dnsd.yaml:1:%d: listen udp://%s", strings.Index(busyCfg, `"udp://`)+1, busy.LocalAddr()); !strings.Contains(p.stderr.String(), at) {
		t.Errorf("the failed bind is not logged at %q:\n%s", at, grep(p.stderr.String(), "reload failed"))
	}
	waitAnswer(t, a1, "a.example.internal", dns.TypeA, "NOERROR:10.0.0.1")
	waitAnswer(t, a2, "a.example.internal", dns.TypeA, "NOERROR:10.0.0.1")

	// Removing a1 closes it.
	writeFile(t, filepath.Join(dir, "dnsd.yaml"), cfg(`"`+a2+`"`))
	p.signal(syscall.SIGHUP)
	p.waitLog("reloaded", 2)
	waitAnswer(t, a2, "a.example.internal", dns.TypeA, "NOERROR:10.0.0.1")
	if _, err := query(t, "tcp", a1, "a.example.internal", dns.TypeA); err == nil {
		t.Fatalf("%s still answers over TCP after it was removed from listen", a1)
	}
}

// dnsd whose log reader goes away (a pipe to a logger that exited) keeps
// serving: a write to the broken pipe does not kill it.
func TestLogReaderGone(t *testing.T) {
	dir := t.TempDir()
	port := freePort(t)
	writeFile(t, filepath.Join(dir, "dnsd.yaml"), fmt.Sprintf(`listen: ["127.0.0.1:%d"]
zones:
  example.internal:
    - hosts: {entries: ["10.0.0.7 web"]}
`, port))
	cmd := exec.Command(dnsdBin)
	cmd.Dir = dir
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr, cmd.Stdout = w, w
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-done })
	line, err := bufio.NewReader(r).ReadString('\n')
	if err != nil || !strings.Contains(line, "dnsd starting") {
		t.Fatalf("first log line %q, %v", line, err)
	}
	r.Close() // the reader is gone; the next log lines meet a broken pipe
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	waitAnswer(t, addr, "web.example.internal", dns.TypeA, "NOERROR:10.0.0.7")
	for range 3 {
		_ = cmd.Process.Signal(syscall.SIGHUP) // each logs a line or two
		time.Sleep(100 * time.Millisecond)
	}
	select {
	case err := <-done:
		t.Fatalf("dnsd exited with its log reader gone: %v", err)
	default:
	}
	if got := dnstest.RData(dnstest.Ask(t, addr, "web.example.internal.", dns.TypeA)); got != "NOERROR:10.0.0.7" {
		t.Errorf("after the log reader went away: %s", got)
	}
}

// An http address that cannot be bound stops the start with its place in
// dnsd.yaml, as a listen entry's does.
func TestHTTPBindErrorPositioned(t *testing.T) {
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "dnsd.yaml"), fmt.Sprintf(`listen: ["127.0.0.1:%d"]
http: "%s"
zones:
  example.internal:
    - hosts: {entries: ["10.0.0.7 web"]}
`, freePort(t), held.Addr()))
	cmd := exec.Command(dnsdBin)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("started with its http address taken:\n%s", out)
	}
	if want := "dnsd.yaml:2:7: http " + held.Addr().String() + ": "; !strings.Contains(string(out), want) {
		t.Errorf("no %q in the output:\n%s", want, out)
	}
}

// A reload that removes a zone removes its query series from /metrics,
// and one that removes a view removes the view's series, those of its
// queries that no zone matched (zone="none") included; the zones kept
// keep theirs, counts included.
func TestReloadDropsRemovedZonesSeries(t *testing.T) {
	dir := t.TempDir()
	port, port2, hport := freePort(t), freePort(t), freePort(t)
	conf := func(zones, view string) {
		writeFile(t, filepath.Join(dir, "dnsd.yaml"), fmt.Sprintf("listen: [\"127.0.0.1:%d\", \"127.0.0.1:%d\"]\nhttp: \"127.0.0.1:%d\"\nzones:\n%s%s", port, port2, hport, zones, view))
	}
	office := fmt.Sprintf("views:\n  - name: office\n    listen: [\"127.0.0.1:%d\"]\n    zones:\n      c.test:\n        - hosts: {entries: [\"10.0.0.3 x.c.test\"]}\n", port2)
	conf("  a.test:\n    - hosts: {entries: [\"10.0.0.1 x.a.test\"]}\n  b.test:\n    - hosts: {entries: [\"10.0.0.2 x.b.test\"]}\n", office)
	p := startDnsd(t, dir)
	p.waitLog("dnsd started", 1)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	base := fmt.Sprintf("http://127.0.0.1:%d", hport)
	for _, name := range []string{"x.a.test.", "x.b.test.", "nowhere.example."} {
		dnstest.Ask(t, addr, name, dns.TypeA)
	}
	dnstest.Ask(t, fmt.Sprintf("127.0.0.1:%d", port2), "nowhere.example.", dns.TypeA)
	if m := scrape(t, base); !strings.Contains(m, `zone="b.test."`) || !strings.Contains(m, `zone="a.test."`) || !strings.Contains(m, `view="office",zone="none"`) {
		t.Fatalf("before the reload, no series of both zones and of the view:\n%s", grep(m, "dnsd_requests_total"))
	}
	conf("  a.test:\n    - hosts: {entries: [\"10.0.0.1 x.a.test\"]}\n", "")
	p.signal(syscall.SIGHUP)
	p.waitLog("reloaded", 1)
	m := scrape(t, base)
	if strings.Contains(m, `zone="b.test."`) {
		t.Errorf("series of the removed zone b.test after the reload:\n%s", grep(m, `b.test`))
	}
	if strings.Contains(m, `view="office"`) {
		t.Errorf("series of the removed view office after the reload:\n%s", grep(m, `office`))
	}
	if !strings.Contains(m, `dnsd_requests_total{proto="udp",qtype="A",view="default",zone="none"} 1`) {
		t.Errorf("the default view's count of queries no zone matched:\n%s", grep(m, "dnsd_requests_total"))
	}
	if !strings.Contains(m, `dnsd_requests_total{proto="udp",qtype="A",view="default",zone="a.test."} 1`) {
		t.Errorf("the kept zone's count:\n%s", grep(m, "dnsd_requests_total"))
	}
}

// A reload that changes only a hosts source's ttl starts no backend: the
// log says a view of the running one was added (no "backend started"),
// and the new ttl is served.
func TestReloadTTLStartsNoBackend(t *testing.T) {
	conf := func(ttl string) config {
		return config{Zones: "  a.test:\n    - hosts: {files: [a.hosts], ttl: " + ttl + "}\n"}
	}
	p := start(t, conf("1h"), map[string]string{"a.hosts": "10.0.0.1 x.a.test\n"})
	started := strings.Count(p.stderr.String(), "backend started")
	p.reload(t, conf("30s").yaml(), true, 1)
	out := p.stderr.String()
	if n := strings.Count(out, "backend started"); n != started {
		t.Errorf("a ttl-only reload logged %d more \"backend started\":\n%s", n-started, out)
	}
	if !strings.Contains(out, "backend view added") || !strings.Contains(out, "backend view removed") {
		t.Errorf("no view added and removed in the log:\n%s", out)
	}
	if r := p.ask("udp", "x.a.test.", dns.TypeA); len(r.Answer) != 1 || r.Answer[0].Header().Ttl != 30 {
		t.Errorf("after the reload: %v, want TTL 30", r)
	}
}

// SIGTERM while a reload waits for the old pipeline's queries: a query
// the old pipeline is forwarding still gets its answer (the stop drains
// it with the rest), not a SERVFAIL because its backend was stopped.
func TestStopDuringReloadDrainAnswersInFlight(t *testing.T) {
	p, _, conf, answer := slowForwardInFlight(t, 2*time.Second)
	conf("  other.test:\n    - hosts: {entries: [\"10.0.0.1 x.other.test\"]}\n")
	p.signal(syscall.SIGHUP)
	time.Sleep(500 * time.Millisecond) // the reload waits for the query
	p.stop(syscall.SIGTERM)
	if got := <-answer; got != "NOERROR:192.0.2.9" {
		t.Errorf("the query in flight through the stop: %s, want the upstream's answer", got)
	}
}

// slowForwardInFlight starts dnsd with zone fwd.test forwarded to an
// upstream that answers 192.0.2.9 after delay, and asks x.fwd.test. in
// the background once dnsd serves; the answer (or the error) comes on
// answer, and the query is in flight when it returns. conf rewrites
// dnsd.yaml's zones (the listen address stays).
func slowForwardInFlight(t *testing.T, delay time.Duration) (p *proc, addr string, conf func(zones string), answer <-chan string) {
	t.Helper()
	up := dnstest.StartUpstream(t, func(w dns.ResponseWriter, r *dns.Msg) {
		time.Sleep(delay)
		m := new(dns.Msg)
		m.SetReply(r)
		m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: r.Question[0].Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60}, A: net.ParseIP("192.0.2.9")})
		_ = w.WriteMsg(m)
	})
	dir := t.TempDir()
	addr = fmt.Sprintf("127.0.0.1:%d", freePort(t))
	conf = func(zones string) {
		writeFile(t, filepath.Join(dir, "dnsd.yaml"), fmt.Sprintf("listen: [\"%s\"]\nzones:\n%s", addr, zones))
	}
	conf(fmt.Sprintf("  fwd.test:\n    - forward: {upstreams: [%q], timeout: 20s}\n", up.Addr))
	p = startDnsd(t, dir)
	p.waitLog("dnsd started", 1)
	got := make(chan string, 1)
	go func() {
		c := &dns.Client{Timeout: 15 * time.Second}
		m := new(dns.Msg)
		m.SetQuestion("x.fwd.test.", dns.TypeA)
		r, _, err := c.Exchange(m, addr)
		if err != nil {
			got <- err.Error()
			return
		}
		got <- dnstest.RData(r)
	}()
	time.Sleep(300 * time.Millisecond)
	return p, addr, conf, got
}

// A reload ends at the swap, not when the old pipeline's slowest query
// does: with a forward waiting for a slow upstream, "reloaded" (and
// READY=1, sent at the same moment) comes at once, a second reload too,
// and the old query still gets its upstream's answer before the old
// pipeline's backends stop.
func TestReloadDoesNotWaitForSlowQueries(t *testing.T) {
	p, addr, conf, answer := slowForwardInFlight(t, 3*time.Second)
	for i, zones := range []string{
		"  other.test:\n    - hosts: {entries: [\"10.0.0.1 x.other.test\"]}\n",
		"  other.test:\n    - hosts: {entries: [\"10.0.0.2 x.other.test\"]}\n",
	} {
		conf(zones)
		start := time.Now()
		p.signal(syscall.SIGHUP)
		p.waitLog("reloaded", i+1)
		if took := time.Since(start); took > 2*time.Second {
			t.Errorf("reload %d took %s with a 3 s query in flight: it waited for the query", i+1, took)
		}
	}
	waitAnswer(t, addr, "x.other.test", dns.TypeA, "NOERROR:10.0.0.2")
	select {
	case got := <-answer:
		if got != "NOERROR:192.0.2.9" {
			t.Errorf("the query in flight through the reloads: %s, want the upstream's answer", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the query in flight was never answered")
	}
	if !strings.Contains(p.stderr.String(), "its backends stop once they are answered") {
		t.Errorf("no log line for the drain left to run:\n%s", p.stderr.String())
	}
	// The old pipeline's forward backend stops once its query is answered.
	p.waitLog(`"backend stopped" kind=forward`, 1)
}

// log.queries writes its lines whatever log.level says: asking for them
// is asking to see them.
func TestQueryLogAtWarnLevel(t *testing.T) {
	dir := t.TempDir()
	port := freePort(t)
	writeFile(t, filepath.Join(dir, "dnsd.yaml"), fmt.Sprintf(`listen: ["127.0.0.1:%d"]
log: {level: warn, queries: true}
zones:
  example.internal:
    - hosts: {entries: ["10.0.0.7 web"]}
`, port))
	p := startDnsd(t, dir)
	waitAnswer(t, fmt.Sprintf("127.0.0.1:%d", port), "web.example.internal", dns.TypeA, "NOERROR:10.0.0.7")
	p.waitLog("msg=query", 1)
	if strings.Contains(p.stderr.String(), "dnsd started") {
		t.Errorf("an INFO line other than the queries at level warn:\n%s", p.stderr.String())
	}
	// A query no zone matches is logged with zone=none, as /metrics
	// counts it.
	waitAnswer(t, fmt.Sprintf("127.0.0.1:%d", port), "elsewhere.example", dns.TypeA, "REFUSED:")
	p.waitLog("msg=query", 2)
	if line := grep(p.stderr.String(), "elsewhere.example"); !strings.Contains(line, " zone=none ") {
		t.Errorf("the query of a name in no zone is logged %q, want zone=none", line)
	}
}
