package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/miekg/dns"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	grpcbackoff "google.golang.org/grpc/backoff"
)

func main() {
	var o Options
	flag.StringVar(&o.Dnsd, "dnsd", "", "dnsd binary to run (required)")
	flag.DurationVar(&o.Duration, "duration", 60*time.Second, "how long the load and the faults last")
	flag.IntVar(&o.QPS, "qps", 5000, "queries per second")
	flag.IntVar(&o.Reloads, "reloads", 100, "SIGHUPs spread over the run")
	flag.StringVar(&o.Dir, "dir", "", "working directory (default: a temporary one, removed afterwards)")
	flag.Parse()
	if o.Dnsd == "" {
		fmt.Fprintln(os.Stderr, "faults: -dnsd is required")
		os.Exit(2)
	}
	res, err := Run(context.Background(), o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "faults:", err)
		os.Exit(1)
	}
	fmt.Print(res.Report())
	if res.Failed() > 0 || res.Wrong > 0 {
		os.Exit(1)
	}
}

// Options configure a run.
type Options struct {
	Dnsd     string        // the dnsd binary
	Duration time.Duration // default 60s
	QPS      int           // default 5000
	Reloads  int           // default 100
	Dir      string        // default: a temporary directory
	// Timeout is the client's wait for an answer (default 3s; a stub
	// resolver waits 5s).
	Timeout time.Duration
	// Freshness is how long after a change the previous answer still
	// counts as correct (default 10s).
	Freshness time.Duration
}

// Result is what the clients saw.
type Result struct {
	Answered, ServFail, Timeout, Other, Wrong int64
	Reloads, Rotations, EtcdKills, Changes    int
	Blackhole                                 time.Duration
	Elapsed                                   time.Duration
	Samples                                   []string
}

// Failed counts the queries that got no usable answer.
func (r *Result) Failed() int64 { return r.ServFail + r.Timeout + r.Other }

// Report is the result as printed.
func (r *Result) Report() string {
	var b strings.Builder
	fmt.Fprintf(&b, "faults: %s at %.0f qps: reloads=%d hosts_rotations=%d etcd_kills=%d changes=%d upstream_blackhole=%s\n",
		r.Elapsed.Round(time.Second), float64(r.Answered+r.Failed())/r.Elapsed.Seconds(), r.Reloads, r.Rotations, r.EtcdKills, r.Changes, r.Blackhole)
	fmt.Fprintf(&b, "answered=%d failed=%d (servfail=%d timeout=%d other=%d) wrong=%d\n",
		r.Answered, r.Failed(), r.ServFail, r.Timeout, r.Other, r.Wrong)
	for _, s := range r.Samples {
		fmt.Fprintln(&b, "  ", s)
	}
	return b.String()
}

// truth is the history of the answers of the names that change: for each
// name, the answers it has had and when each stopped being current.
type truth struct {
	mu    sync.Mutex
	hist  map[string][]held
	fresh time.Duration
}

type held struct {
	answer     string
	from, till time.Time // till zero: current
}

func (tr *truth) set(name, answer string) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	now := time.Now()
	h := tr.hist[name]
	if n := len(h); n > 0 {
		if h[n-1].answer == answer {
			return
		}
		h[n-1].till = now
	}
	tr.hist[name] = append(h, held{answer: answer, from: now})
}

// ok reports whether answer was the name's answer at some moment in
// [sent-fresh, now].
func (tr *truth) ok(name, answer string, sent time.Time) bool {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	early := sent.Add(-tr.fresh)
	for _, h := range tr.hist[name] {
		if h.answer == answer && (h.till.IsZero() || h.till.After(early)) {
			return true
		}
	}
	return false
}

// Run performs the scenario.
func Run(ctx context.Context, o Options) (*Result, error) {
	if o.Duration <= 0 {
		o.Duration = 60 * time.Second
	}
	if o.QPS <= 0 {
		o.QPS = 5000
	}
	if o.Reloads <= 0 {
		o.Reloads = 100
	}
	if o.Timeout <= 0 {
		o.Timeout = 3 * time.Second
	}
	if o.Freshness <= 0 {
		o.Freshness = 10 * time.Second
	}
	if o.Dir == "" {
		d, err := os.MkdirTemp("", "dnsd-faults-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(d)
		o.Dir = d
	}
	ports, err := freePorts(4)
	if err != nil {
		return nil, err
	}
	dnsAddr := fmt.Sprintf("127.0.0.1:%d", ports[0])
	tr := &truth{hist: map[string][]held{}, fresh: o.Freshness}
	res := &Result{}

	// etcd, in this process.
	et := &etcdServer{dir: filepath.Join(o.Dir, "etcd"), client: fmt.Sprintf("http://127.0.0.1:%d", ports[1]), peer: fmt.Sprintf("http://127.0.0.1:%d", ports[2])}
	if err := et.start(); err != nil {
		return nil, err
	}
	defer et.stop()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{et.client}, DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
		// Reconnect within a second of etcd's return, to go on changing.
		DialOptions: []grpc.DialOption{grpc.WithConnectParams(grpc.ConnectParams{Backoff: grpcbackoff.Config{
			BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second}})}})
	if err != nil {
		return nil, err
	}
	defer cli.Close()
	put := func(name, ip string) error {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		labels := strings.Split(name, ".")
		key := "/skydns"
		for i := len(labels) - 1; i >= 0; i-- {
			key += "/" + labels[i]
		}
		tr.set(name+".", "NOERROR:"+ip) // acceptable from the moment it is written
		_, err := cli.Put(ctx, key, `{"host":"`+ip+`"}`)
		return err
	}
	for i := range 10 {
		if err := put(fmt.Sprintf("e%d.etcd.internal", i), fmt.Sprintf("10.2.0.%d", i+1)); err != nil {
			return nil, err
		}
	}
	if err := put("chg.etcd.internal", "10.2.1.0"); err != nil {
		return nil, err
	}

	// The upstream: A for any name, TTL 2 s, unless black-holed.
	var dark atomic.Bool
	up := &dns.Server{Addr: fmt.Sprintf("127.0.0.1:%d", ports[3]), Net: "udp", Handler: dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		if dark.Load() {
			return
		}
		m := new(dns.Msg)
		m.SetReply(r)
		m.RecursionAvailable = true
		if q := r.Question[0]; q.Qtype == dns.TypeA {
			m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 2}, A: net.IPv4(192, 0, 2, 1)})
		}
		_ = w.WriteMsg(m)
	})}
	started := make(chan struct{})
	up.NotifyStartedFunc = func() { close(started) }
	upDone := make(chan error, 1)
	go func() { upDone <- up.ListenAndServe() }()
	select {
	case <-started:
	case err := <-upDone:
		return nil, fmt.Errorf("upstream: %w", err)
	}
	defer func() { _ = up.Shutdown(); <-upDone }()
	for i := range 20 {
		tr.set(fmt.Sprintf("f%d.example.com.", i), "NOERROR:192.0.2.1")
	}

	// The hosts file and two configurations that differ in an inline
	// entry and the hosts TTL (a new hosts backend at every reload).
	hostsPath := filepath.Join(o.Dir, "hosts")
	rot := 0
	hostsContent := func() string {
		var b strings.Builder
		for i := range 10 {
			fmt.Fprintf(&b, "10.1.0.%d h%d.hosts.internal\n", i+1, i)
		}
		fmt.Fprintf(&b, "10.1.1.%d rot.hosts.internal\n", rot%2)
		return b.String()
	}
	for i := range 10 {
		tr.set(fmt.Sprintf("h%d.hosts.internal.", i), fmt.Sprintf("NOERROR:10.1.0.%d", i+1))
	}
	tr.set("rot.hosts.internal.", "NOERROR:10.1.1.0")
	if err := os.WriteFile(hostsPath, []byte(hostsContent()), 0o644); err != nil {
		return nil, err
	}
	cfgPath := filepath.Join(o.Dir, "dnsd.yaml")
	writeConfig := func(n int) error {
		ip := fmt.Sprintf("10.1.2.%d", n%2)
		tr.set("rl.hosts.internal.", "NOERROR:"+ip)
		cfg := fmt.Sprintf(`listen: ["%s"]
log: {level: warn}
cache: {serve_stale: 1h}
zones:
  hosts.internal:
    - hosts: {files: [%s], entries: ["%s rl"], ttl: %ds}
  etcd.internal:
    - etcd: {endpoints: ["%s"], sync_timeout: 5s}
  .:
    - forward: {upstreams: ["%s"], timeout: 500ms, health_check: 200ms}
`, dnsAddr, hostsPath, ip, 60+n%2, et.client, up.Addr)
		tmp := cfgPath + ".tmp"
		if err := os.WriteFile(tmp, []byte(cfg), 0o644); err != nil {
			return err
		}
		return os.Rename(tmp, cfgPath)
	}
	if err := writeConfig(0); err != nil {
		return nil, err
	}

	// dnsd.
	logf, err := os.Create(filepath.Join(o.Dir, "dnsd.log"))
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd := exec.Command(o.Dnsd, "-config", cfgPath)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	}()
	names := make([]string, 0, 50)
	for name := range tr.hist {
		names = append(names, name)
	}
	if err := warmUp(ctx, dnsAddr, names, 20*time.Second); err != nil {
		b, _ := os.ReadFile(filepath.Join(o.Dir, "dnsd.log"))
		return nil, fmt.Errorf("%w\ndnsd log:\n%s", err, b)
	}

	// The load.
	runCtx, stop := context.WithTimeout(ctx, o.Duration)
	defer stop()
	var wg sync.WaitGroup
	var mu sync.Mutex
	sample := func(s string) {
		mu.Lock()
		if len(res.Samples) < 20 {
			res.Samples = append(res.Samples, s)
		}
		mu.Unlock()
	}
	const clients = 100
	start := time.Now()
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			client(runCtx, c, dnsAddr, names, time.Duration(clients)*time.Second/time.Duration(o.QPS), o.Timeout, tr, res, sample)
		}()
	}

	// The faults, each on its own schedule, all owned by wg.
	every := func(d time.Duration, f func(i int)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := time.NewTicker(d)
			defer t.Stop()
			for i := 1; ; i++ {
				select {
				case <-runCtx.Done():
					return
				case <-t.C:
					f(i)
				}
			}
		}()
	}
	var faultErr atomic.Pointer[error]
	fail := func(err error) {
		if err != nil {
			faultErr.CompareAndSwap(nil, &err)
		}
	}
	every(o.Duration/time.Duration(o.Reloads+1), func(i int) {
		if i > o.Reloads {
			return
		}
		fail(writeConfig(i))
		fail(cmd.Process.Signal(syscall.SIGHUP))
		res.Reloads++
	})
	every(time.Second, func(i int) { // hosts rotations
		rot = i
		tr.set("rot.hosts.internal.", fmt.Sprintf("NOERROR:10.1.1.%d", rot%2))
		if i%2 == 0 {
			tmp := hostsPath + ".new"
			fail(os.WriteFile(tmp, []byte(hostsContent()), 0o644))
			fail(os.Rename(tmp, hostsPath))
		} else {
			fail(os.WriteFile(hostsPath, []byte(hostsContent()), 0o644)) // in place
		}
		res.Rotations++
	})
	var etcdUp atomic.Bool
	etcdUp.Store(true)
	every(2*time.Second, func(i int) { // a change, when etcd is up
		// A put that fails (etcd just went down, or this client has not
		// reconnected yet) only widened the set of correct answers.
		if etcdUp.Load() && put("chg.etcd.internal", fmt.Sprintf("10.2.1.%d", i%250)) == nil {
			res.Changes++
		}
	})
	wg.Add(1)
	go func() { // etcd killed twice for up to 5 s; the upstream black-holed for a tenth of the run
		defer wg.Done()
		at := func(frac float64) bool {
			select {
			case <-runCtx.Done():
				return false
			case <-time.After(time.Until(start.Add(time.Duration(frac * float64(o.Duration))))):
				return true
			}
		}
		outage := min(5*time.Second, o.Duration/10)
		kill := func() {
			etcdUp.Store(false)
			et.stop()
			res.EtcdKills++
			select {
			case <-runCtx.Done():
			case <-time.After(outage):
			}
			fail(et.start())
			etcdUp.Store(true)
		}
		if !at(0.2) {
			return
		}
		kill()
		if !at(0.4) {
			return
		}
		dark.Store(true)
		b0 := time.Now()
		select {
		case <-runCtx.Done():
		case <-time.After(max(o.Duration/10, time.Second)):
		}
		dark.Store(false)
		res.Blackhole = time.Since(b0).Round(time.Millisecond)
		if !at(0.6) {
			return
		}
		kill()
	}()
	wg.Wait()
	res.Elapsed = time.Since(start)
	if p := faultErr.Load(); p != nil {
		return res, fmt.Errorf("injecting a fault: %w", *p)
	}
	select {
	case <-exited:
		return res, errors.New("dnsd exited during the run")
	default:
	}
	return res, nil
}

// client sends one query every interval (names in turn) until ctx ends.
func client(ctx context.Context, id int, addr string, names []string, interval, timeout time.Duration, tr *truth, res *Result, sample func(string)) {
	conn, err := net.Dial("udp", addr)
	if err != nil {
		sample("dial: " + err.Error())
		return
	}
	defer conn.Close()
	dc := &dns.Conn{Conn: conn}
	t := time.NewTicker(interval)
	defer t.Stop()
	buf := make([]byte, 1500)
	for i := id; ; i++ {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		name := names[i%len(names)]
		m := new(dns.Msg)
		m.SetQuestion(name, dns.TypeA)
		sent := time.Now()
		if err := dc.WriteMsg(m); err != nil {
			atomic.AddInt64(&res.Other, 1)
			sample(fmt.Sprintf("%s %s: send: %v", sent.Format("15:04:05.000"), name, err))
			continue
		}
		r, err := readReply(conn, buf, m.Id, sent.Add(timeout))
		switch {
		case err != nil:
			atomic.AddInt64(&res.Timeout, 1)
			sample(fmt.Sprintf("%s %s: %v", sent.Format("15:04:05.000"), name, err))
		case r.Rcode == dns.RcodeServerFailure:
			atomic.AddInt64(&res.ServFail, 1)
			sample(fmt.Sprintf("%s %s: SERVFAIL", sent.Format("15:04:05.000"), name))
		case r.Rcode != dns.RcodeSuccess && r.Rcode != dns.RcodeNameError:
			atomic.AddInt64(&res.Other, 1)
			sample(fmt.Sprintf("%s %s: %s", sent.Format("15:04:05.000"), name, dns.RcodeToString[r.Rcode]))
		default:
			got := render(r)
			if !tr.ok(name, got, sent) {
				atomic.AddInt64(&res.Wrong, 1)
				sample(fmt.Sprintf("%s %s: wrong answer %s", sent.Format("15:04:05.000"), name, got))
			} else {
				atomic.AddInt64(&res.Answered, 1)
			}
		}
	}
}

// readReply reads until the reply with id arrives (late replies to earlier
// queries are skipped) or the deadline passes.
func readReply(conn net.Conn, buf []byte, id uint16, deadline time.Time) (*dns.Msg, error) {
	_ = conn.SetReadDeadline(deadline)
	for {
		n, err := conn.Read(buf)
		if err != nil {
			return nil, err
		}
		r := new(dns.Msg)
		if r.Unpack(buf[:n]) == nil && r.Id == id {
			return r, nil
		}
	}
}

// render is "RCODE:a,b" of an answer's A records.
func render(r *dns.Msg) string {
	var ips []string
	for _, rr := range r.Answer {
		if a, ok := rr.(*dns.A); ok {
			ips = append(ips, a.A.String())
		}
	}
	return dns.RcodeToString[r.Rcode] + ":" + strings.Join(ips, ",")
}

// warmUp waits until every name is answered as expected (etcd synced,
// forward cache filled).
func warmUp(ctx context.Context, addr string, names []string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	c := &dns.Client{Timeout: time.Second}
	for _, name := range names {
		for {
			m := new(dns.Msg)
			m.SetQuestion(name, dns.TypeA)
			r, _, err := c.ExchangeContext(ctx, m, addr)
			if err == nil && r.Rcode == dns.RcodeSuccess && len(r.Answer) > 0 {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("warm-up: %s not answered (%v %v)", name, r, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return nil
}

// etcdServer is a single-member etcd embedded in this process that can be
// stopped and started again on the same ports and data.
type etcdServer struct {
	dir, client, peer string
	e                 *embed.Etcd
}

func (s *etcdServer) start() error {
	cu, err := url.Parse(s.client)
	if err != nil {
		return err
	}
	pu, err := url.Parse(s.peer)
	if err != nil {
		return err
	}
	cfg := embed.NewConfig()
	cfg.Name = "faults"
	cfg.Dir = s.dir
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*cu}, []url.URL{*cu}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*pu}, []url.URL{*pu}
	cfg.InitialCluster = cfg.Name + "=" + pu.String()
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	cfg.LogLevel = "error"
	cfg.TickMs, cfg.ElectionMs = 10, 50
	for try := 0; ; try++ {
		s.e, err = embed.StartEtcd(cfg)
		if err == nil || try == 50 {
			break
		}
		time.Sleep(100 * time.Millisecond) // the old listener may not be released yet
	}
	if err != nil {
		return fmt.Errorf("etcd: %w", err)
	}
	select {
	case <-s.e.Server.ReadyNotify():
		return nil
	case <-time.After(30 * time.Second):
		s.e.Close()
		s.e = nil
		return errors.New("etcd: not ready after 30s")
	}
}

func (s *etcdServer) stop() {
	if s.e == nil {
		return
	}
	s.e.Close()
	<-s.e.Server.StopNotify()
	s.e = nil
}

func freePorts(n int) ([]int, error) {
	var ports []int
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		p := l.Addr().(*net.TCPAddr).Port
		u, err := net.ListenPacket("udp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			return nil, err
		}
		u.Close()
		ports = append(ports, p)
	}
	return ports, nil
}
