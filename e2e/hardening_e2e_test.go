package e2e

// End-to-end tests of the production-hardening rules: what clients, files,
// signals and backend outages cannot do to a running dnsd. Each drives the
// built binary as an attacker or an unlucky operator would.

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/dnsd/dnsd/internal/dnstest"
	"github.com/dnsd/dnsd/sources/etcd/etcdtest"
)

// metricValue returns the value of the series `name{labels}` (labels as
// they appear in the exposition, e.g. `reason="acl"`), or -1 when absent.
func metricValue(metrics, name, labels string) float64 {
	for _, line := range strings.Split(metrics, "\n") {
		if !strings.HasPrefix(line, name) {
			continue
		}
		rest := line[len(name):]
		if labels == "" {
			if !strings.HasPrefix(rest, " ") {
				continue
			}
		} else if !strings.HasPrefix(rest, "{") || !strings.Contains(rest[:strings.IndexByte(rest, '}')+1], labels) {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err == nil {
			return v
		}
	}
	return -1
}

func scrape(t *testing.T, base string) string {
	t.Helper()
	code, body := httpGet(t, base+"/metrics")
	if code != 200 {
		t.Fatalf("/metrics: %d", code)
	}
	return body
}

// Label values never come from the wire: a sweep of unknown qtypes and of
// names in no zone adds no series.
func TestHardeningMetricLabelsBounded(t *testing.T) {
	s := startYAML(t, "listen: [\"LISTEN\"]\nhttp: \"HTTP\"\nzones:\n  example.internal:\n    - hosts: {entries: [\"10.0.0.1 db\"]}\n", nil)
	c := &dns.Client{Timeout: 2 * time.Second}
	for qt := 1000; qt < 1300; qt++ {
		m := new(dns.Msg)
		m.SetQuestion("db.example.internal.", uint16(qt))
		if _, _, err := c.Exchange(m, s.addr); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 50; i++ {
		r := dnstest.Ask(t, s.addr, fmt.Sprintf("n%d.elsewhere.test.", i), dns.TypeA)
		if r.Rcode != dns.RcodeRefused {
			t.Fatalf("name in no zone: %v", r)
		}
	}
	metrics := scrape(t, s.base)
	if strings.Contains(metrics, `qtype="TYPE`) {
		t.Fatalf("qtype label made from the wire: %s", grep(metrics, "TYPE1"))
	}
	if v := metricValue(metrics, "dnsd_requests_total", `qtype="other"`); v != 300 {
		t.Errorf(`dnsd_requests_total{qtype="other"} = %v, want 300`, v)
	}
	if v := metricValue(metrics, "dnsd_requests_total", `zone="none"`); v != 50 {
		t.Errorf(`dnsd_requests_total{zone="none"} = %v, want 50`, v)
	}
	if n := strings.Count(metrics, "\ndnsd_requests_total{"); n > 4 {
		t.Errorf("%d dnsd_requests_total series after the sweep, want a handful:\n%s", n, grep(metrics, "dnsd_requests_total{"))
	}
}

// Meta query types, garbage, and a refused client over the rate: each
// gets what the rules say and is counted under its reason.
func TestHardeningMetaTypesAndDrops(t *testing.T) {
	s := startYAML(t, `listen: ["LISTEN"]
http: "HTTP"
acl: {allow: [127.0.1.0/24]}
limits: {rate_per_client: 5}
zones:
  example.internal:
    - hosts: {entries: ["10.0.0.1 db"]}
`, nil)
	from := func(ip string) *dns.Client {
		return &dns.Client{Timeout: 2 * time.Second, Dialer: &net.Dialer{LocalAddr: &net.UDPAddr{IP: net.ParseIP(ip)}}}
	}
	// Over TCP (never rate-limited) from an allowed client.
	allowed := &dns.Client{Net: "tcp", Timeout: 2 * time.Second, Dialer: &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.1.1")}}}
	for qt, want := range map[uint16]int{0: dns.RcodeFormatError, dns.TypeOPT: dns.RcodeFormatError, dns.TypeTKEY: dns.RcodeFormatError,
		dns.TypeTSIG: dns.RcodeFormatError, dns.TypeMAILA: dns.RcodeNotImplemented, dns.TypeMAILB: dns.RcodeNotImplemented, dns.TypeA: dns.RcodeSuccess} {
		m := new(dns.Msg)
		m.SetQuestion("db.example.internal.", qt)
		r, _, err := allowed.Exchange(m, s.addr)
		if err != nil {
			t.Fatalf("qtype %d: %v", qt, err)
		}
		if r.Rcode != want {
			t.Errorf("qtype %s: %s, want %s", dns.Type(qt), dns.RcodeToString[r.Rcode], dns.RcodeToString[want])
		}
	}

	// A refused client (127.0.0.1) is rate-limited like any other.
	refused, tc := 0, 0
	for i := 0; i < 30; i++ {
		m := new(dns.Msg)
		m.SetQuestion("db.example.internal.", dns.TypeA)
		r, _, err := from("127.0.0.1").Exchange(m, s.addr)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case r.Truncated:
			tc++
		case r.Rcode == dns.RcodeRefused:
			refused++
		}
	}
	if refused > 7 || refused+tc != 30 {
		t.Errorf("30 queries of a refused client at 5/s: %d REFUSED, %d TC; want at most ~6 REFUSED, the rest TC=1", refused, tc)
	}

	// Garbage and responses are never answered, counted as malformed.
	conn, err := net.Dial("udp", s.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	resp := new(dns.Msg)
	resp.SetQuestion("db.example.internal.", dns.TypeA)
	resp.Response = true
	rb, _ := resp.Pack()
	junk := make([]byte, 40)
	for i := range junk {
		junk[i] = 0xff
	}
	// A header alone that claims a question, and a query whose header
	// claims an answer record it does not hold: shorter than they say.
	headerOnly := []byte{0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0}
	q := new(dns.Msg)
	q.SetQuestion("db.example.internal.", dns.TypeA)
	qb, _ := q.Pack()
	qb[7] = 1 // ANCOUNT 1, no answer record
	for _, b := range [][]byte{{0xde, 0xad}, rb, junk, headerOnly, qb} {
		if _, err := conn.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	_ = conn.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if n, err := conn.Read(make([]byte, 512)); err == nil {
		t.Errorf("a malformed packet was answered (%d bytes)", n)
	}
	metrics := scrape(t, s.base)
	if v := metricValue(metrics, "dnsd_dropped_total", `reason="malformed"`); v != 5 {
		t.Errorf(`dnsd_dropped_total{reason="malformed"} = %v, want 5`, v)
	}
	if strings.Contains(metrics, `reason="policy"`) {
		t.Errorf("old drop reason still exported")
	}
}

// A flood of one name at a black-holed upstream: waiting clients are
// bounded by max_concurrent (the rest get REFUSED at once), every query is
// answered, goroutines stay bounded, and the local zone keeps answering.
func TestHardeningForwardFloodOneName(t *testing.T) {
	hole, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
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
	const maxConcurrent = 50
	s := startYAML(t, fmt.Sprintf(`listen: ["LISTEN"]
http: "HTTP"
zones:
  example.internal:
    - hosts: {entries: ["10.0.0.1 db"]}
  .:
    - forward: {upstreams: ["%s"], timeout: 1s, max_concurrent: %d}
`, hole.LocalAddr(), maxConcurrent), nil)
	baseline := metricValue(scrape(t, s.base), "go_goroutines", "")

	// Four sockets, each sending the same question at about 500 per
	// second without waiting, and counting the answers as they come.
	var sent, answered, refused atomic.Int64
	var peak atomic.Int64
	stop := make(chan struct{})
	var wg, readers sync.WaitGroup
	for w := 0; w < 4; w++ {
		conn, err := net.Dial("udp", s.addr)
		if err != nil {
			t.Fatal(err)
		}
		readers.Add(1)
		go func() {
			defer readers.Done()
			buf := make([]byte, 1500)
			for {
				n, err := conn.Read(buf)
				if err != nil {
					return
				}
				r := new(dns.Msg)
				if r.Unpack(buf[:n]) == nil {
					answered.Add(1)
					if r.Rcode == dns.RcodeRefused {
						refused.Add(1)
					}
				}
			}
		}()
		wg.Add(1)
		go func() {
			defer wg.Done()
			tick := time.NewTicker(10 * time.Millisecond)
			defer tick.Stop()
			for id := uint16(0); ; {
				select {
				case <-stop:
					return
				case <-tick.C:
				}
				for i := 0; i < 5; i++ {
					id++
					m := new(dns.Msg)
					m.SetQuestion("flood.example.com.", dns.TypeA)
					m.Id = id
					b, _ := m.Pack()
					if _, err := conn.Write(b); err == nil {
						sent.Add(1)
					}
				}
			}
		}()
		t.Cleanup(func() { conn.Close() })
	}
	var local []time.Duration
	end := time.Now().Add(4 * time.Second)
	for time.Now().Before(end) {
		start := time.Now()
		r, err := query(t, "udp", s.addr, "db.example.internal", dns.TypeA)
		if err != nil || dnstest.RData(r) != "NOERROR:10.0.0.1" {
			t.Errorf("local name during the flood: %v %v", r, err)
		}
		local = append(local, time.Since(start))
		if g := metricValue(scrape(t, s.base), "go_goroutines", ""); int64(g) > peak.Load() {
			peak.Store(int64(g))
		}
		time.Sleep(100 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	// The last waiters get their SERVFAIL within the upstream timeout.
	deadline := time.Now().Add(5 * time.Second)
	for answered.Load() < sent.Load() && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	lost := sent.Load() - answered.Load()
	t.Logf("flood: %d sent, %d answered (%d REFUSED), %d lost; goroutines %v at rest, peak %d; local answers %v",
		sent.Load(), answered.Load(), refused.Load(), lost, baseline, peak.Load(), local)
	if refused.Load() == 0 {
		t.Errorf("no REFUSED over max_concurrent")
	}
	// Before the fix 10-15 % went unanswered; a few may still be lost to
	// the kernel's socket buffers on a loaded test machine (race build).
	if lost*20 > sent.Load() {
		t.Errorf("%d of %d flood queries got no answer", lost, sent.Load())
	}
	// The waiting clients hold max_concurrent slots; allow generously for
	// the server's own goroutines besides them.
	if limit := int64(baseline) + maxConcurrent + 150; peak.Load() > limit {
		t.Errorf("goroutines peaked at %d during the flood, want at most %d", peak.Load(), limit)
	}
	for _, d := range local {
		if d > time.Second {
			t.Errorf("a local answer took %v during the flood", d)
		}
	}
	if v := metricValue(scrape(t, s.base), "dnsd_forward_busy_total", ""); v <= 0 {
		t.Errorf("dnsd_forward_busy_total = %v, want > 0", v)
	}
}

// A hosts file rewritten in place in pieces is never served half-written;
// a file that turns empty keeps its data for a second, then (still empty)
// is applied.
func TestHardeningHostsRewrittenInPlace(t *testing.T) {
	var content strings.Builder
	for i := 0; i < 300; i++ {
		fmt.Fprintf(&content, "10.1.%d.%d host%d.example.internal\n", i/200, i%200+1, i)
	}
	content.WriteString("10.0.0.1 db.example.internal\n")
	s := startYAML(t, "listen: [\"LISTEN\"]\nzones:\n  example.internal:\n    - hosts: {files: [example.hosts], fallthrough: false}\n",
		map[string]string{"example.hosts": content.String()})
	path := filepath.Join(s.dir, "example.hosts")
	waitAnswer(t, s.addr, "db.example.internal", dns.TypeA, "NOERROR:10.0.0.1")

	var bad atomic.Value
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			r, err := query(t, "udp", s.addr, "db.example.internal", dns.TypeA)
			if err == nil && dnstest.RData(r) != "NOERROR:10.0.0.1" {
				bad.Store(dnstest.RData(r))
			}
		}
	}()
	for round := 0; round < 3; round++ {
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
		if err != nil {
			t.Fatal(err)
		}
		rest := content.String()
		for len(rest) > 0 {
			n := min(len(rest), (content.Len()+3)/4) // in four pieces
			if _, err := f.WriteString(rest[:n]); err != nil {
				t.Fatal(err)
			}
			rest = rest[n:]
			time.Sleep(10 * time.Millisecond) // well inside the 50 ms quiet window
		}
		f.Close()
		time.Sleep(150 * time.Millisecond)
	}
	// Truncated and refilled half a second later: never lost.
	if err := os.Truncate(path, 0); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	writeFile(t, path, content.String())
	time.Sleep(200 * time.Millisecond)
	close(stop)
	<-done
	if v := bad.Load(); v != nil {
		t.Fatalf("during in-place rewrites db.example.internal was answered %v", v)
	}
	// Emptied for good: NXDOMAIN about a second later, not at once.
	start := time.Now()
	if err := os.Truncate(path, 0); err != nil {
		t.Fatal(err)
	}
	waitAnswer(t, s.addr, "db.example.internal", dns.TypeA, "NXDOMAIN:")
	if d := time.Since(start); d < 800*time.Millisecond {
		t.Fatalf("an emptied file was applied after %v, want about 1s", d)
	}
}

// FIFOs where files should be: a config error at start and at reload, never
// a hang; a hosts file replaced by one keeps its data; SIGTERM still works.
func TestHardeningFIFOs(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.yaml")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"check", "-config", fifo}, {"-config", fifo}} {
		cmd := exec.Command(dnsdBin, args...)
		done := make(chan error, 1)
		var out []byte
		go func() {
			var err error
			out, err = cmd.CombinedOutput()
			done <- err
		}()
		select {
		case err := <-done:
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(string(out), "FIFO") {
				t.Errorf("dnsd %v on a FIFO: %v %s", args, err, out)
			}
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			t.Fatalf("dnsd %v blocked on a FIFO", args)
		}
	}

	s := startYAML(t, "listen: [\"LISTEN\"]\nzones:\n  example.internal:\n    - hosts: {files: [example.hosts]}\n",
		map[string]string{"example.hosts": "10.0.0.1 db.example.internal\n"})
	hosts := filepath.Join(s.dir, "example.hosts")
	if err := os.Remove(hosts); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(hosts, 0o644); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	waitAnswer(t, s.addr, "db.example.internal", dns.TypeA, "NOERROR:10.0.0.1")

	// dnsd.yaml becomes a FIFO: the reload fails at once, the old
	// configuration stays.
	if err := os.Remove(s.cfg); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(s.cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	s.signal(syscall.SIGHUP)
	s.waitLog("reload failed", 1)
	if !strings.Contains(s.stderr.String(), "FIFO") {
		t.Errorf("the reload error does not say FIFO")
	}
	waitAnswer(t, s.addr, "db.example.internal", dns.TypeA, "NOERROR:10.0.0.1")
	s.stop(syscall.SIGTERM)
}

// A reload during an etcd outage never turns the zone's names into
// SERVFAIL: a ttl change is served at once from the data held; a changed
// endpoint list makes a new connection, and the old one answers until
// the new one has synced.
func TestHardeningReloadDuringEtcdOutage(t *testing.T) {
	srv := etcdtest.Start(t, etcdtest.Options{})
	srv.Put("/skydns/internal/example/db", `{"host":"10.0.0.1"}`)
	conf := func(endpoint, ttl string) string {
		return fmt.Sprintf("listen: [\"LISTEN\"]\nhttp: \"HTTP\"\nzones:\n  example.internal:\n    - etcd: {endpoints: [%q], ttl: %s, sync_timeout: 500ms}\n", endpoint, ttl)
	}
	s := startYAML(t, conf(srv.Endpoint(), "30s"), nil)
	waitReady(t, s.base, 200)
	waitAnswer(t, s.addr, "db.example.internal", dns.TypeA, "NOERROR:10.0.0.1")
	answers := func(what string, ttl uint32) {
		t.Helper()
		for i := 0; i < 10; i++ { // 1 s of answers
			r, err := query(t, "udp", s.addr, "db.example.internal", dns.TypeA)
			if err != nil || dnstest.RData(r) != "NOERROR:10.0.0.1" || r.Answer[0].Header().Ttl != ttl {
				t.Fatalf("%s: %v %v, want 10.0.0.1 with ttl %d", what, r, err, ttl)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	srv.Stop()
	s.reload(t, conf(srv.Endpoint(), "45s"), true, 1)
	answers("after a ttl change during the outage", 45)
	if code, body := httpGet(t, s.base+"/ready"); code != 200 {
		t.Errorf("/ready after a ttl change during the outage: %d %s", code, body)
	}
	localhost := strings.Replace(srv.Endpoint(), "127.0.0.1", "localhost", 1)
	s.reload(t, conf(localhost, "45s"), true, 2)
	answers("after an endpoint change during the outage", 45)

	srv.Restart()
	srv.Put("/skydns/internal/example/db", `{"host":"10.0.0.2"}`)
	waitAnswer(t, s.addr, "db.example.internal", dns.TypeA, "NOERROR:10.0.0.2")
	s.waitLog("replacement backend synced; releasing the previous one", 1)
	s.stop(syscall.SIGTERM)
}

// SIGTERM during a reload that waits for a backend abandons the reload and
// stops within the 10 s bound; a second SIGTERM during a slow graceful stop
// exits at once.
func TestHardeningSignals(t *testing.T) {
	dead := freePort(t)
	base := "listen: [\"LISTEN\"]\nzones:\n  example.internal:\n    - hosts: {entries: [\"10.0.0.1 db\"]}\n"
	s := startYAML(t, base, nil)
	writeFile(t, s.cfg, s.expand(base+fmt.Sprintf("  other.internal:\n    - etcd: {endpoints: [\"http://127.0.0.1:%d\"], sync_timeout: 1m}\n", dead)))
	s.signal(syscall.SIGHUP)
	s.waitLog("SIGHUP: reloading", 1)
	time.Sleep(300 * time.Millisecond)
	start := time.Now()
	s.stop(syscall.SIGTERM) // requires exit status 0
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("SIGTERM during a reload took %v", d)
	}
	if !strings.Contains(s.stderr.String(), "abandoning the reload") {
		t.Errorf("the log does not say the reload was abandoned")
	}

	// A query held by a black-holed upstream keeps the graceful stop
	// waiting; the second SIGTERM ends it at once.
	hole, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer hole.Close()
	s2 := startYAML(t, fmt.Sprintf("listen: [\"LISTEN\"]\nzones:\n  .:\n    - forward: {upstreams: [\"%s\"], timeout: 8s}\n", hole.LocalAddr()), nil)
	go func() { _, _ = query(t, "udp", s2.addr, "slow.example.com", dns.TypeA) }()
	time.Sleep(300 * time.Millisecond)
	s2.signal(syscall.SIGTERM)
	time.Sleep(300 * time.Millisecond)
	start = time.Now()
	s2.signal(syscall.SIGTERM)
	select {
	case err := <-s2.done:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 {
			t.Errorf("after a second SIGTERM: %v, want exit status 1", err)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("a second SIGTERM did not exit at once")
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("second SIGTERM took %v", d)
	}
}

// One client network cannot hold every TCP slot.
func TestHardeningTCPPerClient(t *testing.T) {
	s := startYAML(t, "listen: [\"LISTEN\"]\nhttp: \"HTTP\"\nlimits: {max_tcp_per_client: 2}\nzones:\n  example.internal:\n    - hosts: {entries: [\"10.0.0.1 db\"]}\n", nil)
	dial := func(from string) *dns.Conn {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 2 * time.Second}
		c, err := d.Dial("tcp", s.addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return &dns.Conn{Conn: c}
	}
	ask := func(c *dns.Conn) error {
		_ = c.SetDeadline(time.Now().Add(2 * time.Second))
		m := new(dns.Msg)
		m.SetQuestion("db.example.internal.", dns.TypeA)
		if err := c.WriteMsg(m); err != nil {
			return err
		}
		_, err := c.ReadMsg()
		return err
	}
	for i := 0; i < 2; i++ {
		if err := ask(dial("127.0.0.1")); err != nil {
			t.Fatal(err)
		}
	}
	if err := ask(dial("127.0.0.9")); err == nil {
		t.Fatal("a third connection from one /24 was served")
	}
	if err := ask(dial("127.0.5.1")); err != nil {
		t.Fatalf("another client network: %v", err)
	}
	metrics := scrape(t, s.base)
	if v := metricValue(metrics, "dnsd_tcp_connections_rejected_total", `reason="client"`); v != 1 {
		t.Errorf(`dnsd_tcp_connections_rejected_total{reason="client"} = %v, want 1`, v)
	}
	if v := metricValue(metrics, "dnsd_tcp_connections_rejected_total", `reason="total"`); v != 0 {
		t.Errorf(`dnsd_tcp_connections_rejected_total{reason="total"} = %v, want 0`, v)
	}
}

var faultBin = sync.OnceValues(func() (string, error) {
	bin := filepath.Join(filepath.Dir(dnsdBin), "dnsd-faultinject")
	out, err := exec.Command("go", "build", "-race", "-tags", "dnsd_faultinject", "-o", bin, ".").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("%v\n%s", err, out)
	}
	return bin, nil
})

// A panic while answering (injected: a fault-injection build makes one
// name panic) answers SERVFAIL, is counted, logged at ERROR with its stack
// once a minute per call site, and the server goes on.
func TestHardeningPanic(t *testing.T) {
	bin, err := faultBin()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	hport := freePort(t)
	writeFile(t, filepath.Join(dir, "dnsd.yaml"), fmt.Sprintf("listen: [%q]\nhttp: \"127.0.0.1:%d\"\nzones:\n  example.internal:\n    - hosts: {entries: [\"10.0.0.1 db\"]}\n", addr, hport))
	p := startBinary(t, bin, []string{"DNSD_FAULT_PANIC_NAME=boom.example.internal."}, dir, "-config", "dnsd.yaml")
	p.waitLog("dnsd started", 1)
	for i := 0; i < 3; i++ {
		for _, netw := range []string{"udp", "tcp"} {
			r, err := query(t, netw, addr, "boom.example.internal", dns.TypeA)
			if err != nil || r.Rcode != dns.RcodeServerFailure {
				t.Fatalf("%s query that panics: %v %v, want SERVFAIL", netw, r, err)
			}
		}
	}
	waitAnswer(t, addr, "db.example.internal", dns.TypeA, "NOERROR:10.0.0.1")
	if v := metricValue(scrape(t, fmt.Sprintf("http://127.0.0.1:%d", hport)), "dnsd_panics_total", ""); v != 6 {
		t.Errorf("dnsd_panics_total = %v, want 6", v)
	}
	logs := p.stderr.String()
	if n := strings.Count(logs, "level=ERROR msg=\"panic while answering"); n != 1 {
		t.Errorf("%d panic log lines for 6 panics at one site within a minute, want 1:\n%s", n, logs)
	}
	if !regexp.MustCompile(`stack=".*goroutine`).MatchString(logs) {
		t.Errorf("the panic log line has no stack")
	}
	p.stop(syscall.SIGTERM)
}
