package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/dnsd/dnsd/bench/internal/proc"

	"github.com/dnsd/dnsd/sources/kubernetes/kubetest"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "etcd" {
		if err := runEtcd(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "peers etcd:", err)
			os.Exit(1)
		}
		return
	}
	var e env
	flag.StringVar(&e.bin, "bin", "", "directory holding dnsd, reference and loadgen (required)")
	flag.StringVar(&e.coredns, "coredns", "", "CoreDNS binary (empty: CoreDNS is left out)")
	flag.StringVar(&e.unbound, "unbound", "", "unbound binary (empty: left out)")
	flag.StringVar(&e.dnsmasq, "dnsmasq", "", "dnsmasq binary (empty: left out)")
	flag.StringVar(&e.dnsperf, "dnsperf", "", "dnsperf binary (empty: only bench/loadgen measures)")
	flag.StringVar(&e.kubeAPIServer, "kube-apiserver", "", "kube-apiserver binary (scripts/k8s-tools.sh): adds the kubernetes scenario")
	flag.DurationVar(&e.dur, "duration", 5*time.Second, "each measurement's length")
	runs := flag.Int("runs", 3, "runs; the servers' order rotates from one to the next")
	flag.IntVar(&e.rate, "rate", 20000, "queries per second of the latency measurement")
	flag.IntVar(&e.starts, "starts", 3, "starts of each server in each scenario and run whose start → first answer is measured (the median is kept; all but the last are stopped at once)")
	flag.IntVar(&e.common, "common-rate", 0, "queries per second of the p99 measured at the same rate for every server; 0 (default): half of unbound's loadgen peak in the same scenario and run (unbound is measured first; scenarios without unbound take the hosts scenario's), or 80,000 when unbound is left out; -1: not measured")
	only := flag.String("scenarios", "", "comma-separated scenarios to run (default: all; kubernetes only with -kube-apiserver): "+strings.Join(scenarioNames(), ","))
	servers := flag.String("servers", "", "comma-separated servers to run (default: all that are given)")
	flag.BoolVar(&e.strict, "strict", false, "exit 1 when a server answered wrong or a measurement failed (a smoke test)")
	flag.StringVar(&e.unboundRcvbuf, "unbound-rcvbuf", "", "unbound's so-rcvbuf, e.g. 4m as dnsd's default receive buffer, to compare latency with equal buffers (default: the kernel's)")
	flag.StringVar(&e.dir, "dir", "", "working directory for data, configs and logs (default: a new temporary one, removed at the end)")
	flag.Parse()
	if e.bin == "" {
		fmt.Fprintln(os.Stderr, "peers: -bin is required")
		os.Exit(2)
	}
	if err := e.main(*runs, *only, *servers); err != nil {
		fmt.Fprintln(os.Stderr, "peers:", err)
		os.Exit(1)
	}
}

// env is one benchmark: the tools, the working directory and the live
// processes (all stopped on exit or on a signal).
type env struct {
	bin, coredns, unbound, dnsmasq, dnsperf, kubeAPIServer string
	dur                                                    time.Duration
	rate                                                   int
	starts                                                 int
	common                                                 int
	unboundRcvbuf                                          string
	dir                                                    string
	pin                                                    bool
	strict                                                 bool

	cluster *kubetest.ControlPlane // the kubernetes scenario's, started once

	cert, key string // the DoT certificate

	mu   sync.Mutex
	live map[*exec.Cmd]bool
}

func (e *env) main(runs int, only, serverList string) error {
	if e.dir == "" {
		d, err := os.MkdirTemp("", "dnsd-peers-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		e.dir = d
	} else if err := os.MkdirAll(e.dir, 0o755); err != nil {
		return err
	}
	e.live = map[*exec.Cmd]bool{}
	defer e.stopAll()
	defer func() {
		if e.cluster != nil {
			e.cluster.Close()
		}
	}()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sig
		e.stopAll()
		if e.cluster != nil {
			e.cluster.Close()
		}
		os.Exit(130)
	}()

	e.pin = canPin && numCPU() >= 2
	if !e.pin {
		fmt.Fprintln(os.Stderr, "peers: warning: not Linux or fewer than 2 CPUs; servers and load are not pinned")
	}
	servers := []string{"reference", "dnsd"}
	for _, s := range []struct{ name, path string }{{"unbound", e.unbound}, {"coredns", e.coredns}, {"dnsmasq", e.dnsmasq}} {
		if s.path != "" {
			servers = append(servers, s.name)
		}
	}
	if serverList != "" {
		var keep []string
		for _, s := range strings.Split(serverList, ",") {
			if !contains(servers, s) {
				return fmt.Errorf("server %q is not available (have %s)", s, strings.Join(servers, ","))
			}
			keep = append(keep, s)
		}
		if !contains(keep, "reference") {
			keep = append([]string{"reference"}, keep...) // the yardstick
		}
		servers = keep
	}
	scs, err := pickScenarios(only, e.kubeAPIServer != "")
	if err != nil {
		return err
	}
	if err := e.writeData(); err != nil {
		return err
	}
	for i := range scs {
		scs[i].queries = filepath.Join(e.dir, scs[i].queryFile)
	}

	byUnbound := e.common == 0 && contains(servers, "unbound")
	if e.common == 0 && !byUnbound {
		e.common = 80000
	}
	res := results{}
	for run := 0; run < runs; run++ {
		hostsRate := -1 // half unbound's peak in this run's hosts scenario; -1: none
		for si := range scs {
			sc := &scs[si]
			stop, err := e.startBackends(sc)
			if err != nil {
				return fmt.Errorf("%s: %v", sc.name, err)
			}
			order := runOrder(sc, servers, run, byUnbound)
			common := e.common
			if byUnbound {
				// Unbound, first, sets the rate the others are measured at
				// with its peak (0: its own half peak); with no unbound
				// here, the hosts scenario's.
				common = hostsRate
				if sc.supports("unbound") {
					common = 0
				}
			}
			for _, srv := range order {
				if !sc.supports(srv) {
					continue
				}
				fmt.Fprintf(os.Stderr, "peers: run %d/%d, %s, %s\n", run+1, runs, sc.name, srv)
				s := e.measure(sc, srv, common)
				if byUnbound && srv == "unbound" {
					common = -1 // its peak was not measured
					if s.CommonRate > 0 {
						common = s.CommonRate
					}
					if sc.name == "hosts" {
						hostsRate = common
					}
				}
				for _, p := range s.Problems {
					fmt.Fprintf(os.Stderr, "peers:   problem: %s\n", p)
				}
				for _, n := range s.Notes {
					fmt.Fprintf(os.Stderr, "peers:   note: %s\n", n)
				}
				res.add(sc.name, srv, run, s)
			}
			stop()
		}
	}
	host, _ := os.Hostname()
	fmt.Printf("%s, %s, %d CPUs (%s), %d run(s) of %s per measurement, latency at %d queries/s\n\n",
		time.Now().Format("2006-01-02 15:04"), host, numCPU(), cpuModel(), runs, e.dur, e.rate)
	if e.unboundRcvbuf != "" {
		fmt.Printf("unbound ran with so-rcvbuf: %s\n\n", e.unboundRcvbuf)
	}
	render(os.Stdout, res, scs, servers, e.rate, e.common)
	if byUnbound {
		fmt.Println("\nThe common rate of each row is half of unbound's loadgen peak in the same scenario and run (etcd, kubernetes: in the hosts scenario).")
	}
	if e.strict {
		for _, byServer := range res {
			for srv, runs := range byServer {
				for _, s := range runs {
					if len(s.Problems) > 0 {
						return fmt.Errorf("%s: %s", srv, s.Problems[0])
					}
				}
			}
		}
	}
	return nil
}

// runOrder is the order of the servers in sc in one run: rotated from run
// to run, with unbound first when unboundFirst (its peak sets the common
// rate).
func runOrder(sc *scenario, servers []string, run int, unboundFirst bool) []string {
	order := rotate(servers, run)
	if unboundFirst && sc.supports("unbound") && contains(order, "unbound") {
		order = append([]string{"unbound"}, slices.DeleteFunc(order, func(s string) bool { return s == "unbound" })...)
	}
	return order
}

// measure starts srv for sc, checks its answers, runs the load and stops
// it. common is the rate of the p99 every server is measured at (0: half
// of this server's own peak, as for unbound when it sets the rate; -1: no
// such measurement).
func (e *env) measure(sc *scenario, srv string, common int) sample {
	s := sample{Drops: -1}
	// The start is measured e.starts times (the server stopped after all
	// but the last) and the median kept: one start reads the machine's
	// moment as much as the server.
	var starts []time.Duration
	var p *exec.Cmd
	var port, target int
	for len(starts) < max(1, e.starts) {
		var took time.Duration
		var err error
		p, port, target, took, err = e.startServer(sc, srv)
		if err != nil {
			s.Problems = append(s.Problems, err.Error())
			return s
		}
		starts = append(starts, took)
		if len(starts) < e.starts {
			e.stop(p)
		}
	}
	defer e.stop(p)
	slices.Sort(starts)
	s.Start = starts[len(starts)/2]
	pid := p.Process.Pid
	if err := checkAnswers(sc, srv, target); err != nil {
		s.Problems = append(s.Problems, err.Error())
	}
	// Warm-up: every query answered twice or more (fills a forward cache,
	// and dnsd keeps a packed answer for a question asked again). A
	// second of saturation usually asks each name many times, but not
	// when a cold forward cache meets a slow moment of the machine.
	if sc.transport == "udp" {
		if _, err := e.loadgen(sc, target, 0, "-duration", "0s", "-conns", "4", "-warm-passes", "2"); err != nil {
			s.Problems = append(s.Problems, err.Error())
			return s
		}
	} else if err := warmStream(sc, target); err != nil {
		s.Problems = append(s.Problems, err.Error())
		return s
	}
	// Settled memory: idle a second after the warm-up.
	time.Sleep(time.Second)
	if m, err := proc.ReadMemory(pid); err == nil {
		s.Settled = m.RSS
	}
	stopWatch := proc.WatchRSS(pid, 100*time.Millisecond)
	if e.dnsperf != "" {
		if err := e.runDnsperf(sc, srv, pid, target, &s); err != nil {
			s.Problems = append(s.Problems, err.Error())
		}
	}
	// bench/loadgen at saturation: over TCP and DoT with dnsperf's four
	// connections of 25 queries in flight, but writing the queries an
	// answer read releases together (dnsperf writes each on its own).
	var gen []string
	switch sc.transport {
	case "tcp":
		gen = []string{"-proto", "tcp", "-conns", "4", "-window", "25"}
	case "dot":
		gen = []string{"-proto", "tls", "-conns", "4", "-window", "25"}
	}
	if kv, err := e.loadgen(sc, target, pid, gen...); err != nil {
		s.Problems = append(s.Problems, err.Error())
	} else {
		s.GenQPS, s.GenCPU = kv["qps"], kv["cpu_per_answer_us"]
		if bad := kv["bad"]; bad > 0.001*kv["answers"] {
			s.Problems = append(s.Problems, fmt.Sprintf("loadgen: %.0f failed answers (SERVFAIL, REFUSED, ...) of %.0f", bad, kv["answers"]+bad))
		}
	}
	s.Loaded = stopWatch()
	if sc.transport == "udp" {
		// Latency at half the peak this server just sustained, and at
		// the same rate for every server (half of one server's peak is
		// a higher rate for a faster server).
		if s.GenQPS > 0 {
			s.HalfRate = int(s.GenQPS / 2)
			s.HalfP99 = e.p99At(sc, target, s.HalfRate, " (half its peak)", &s)
		}
		switch {
		case common == 0: // this server's half peak sets the rate
			s.CommonP99, s.CommonRate = s.HalfP99, s.HalfRate
		case common > 0:
			s.CommonP99, s.CommonRate = e.p99At(sc, target, common, "", &s), common
		}
		if kv, err := e.fixedRate(sc, target, e.rate, "", &s); err != nil {
			s.Problems = append(s.Problems, err.Error())
		} else {
			s.P50, s.P99 = kv["p50_us"], kv["p99_us"]
		}
		if d, err := proc.UDPDrops(port); err == nil {
			s.Drops = d
		}
	}
	if m, err := proc.ReadMemory(pid); err == nil {
		s.RSS, s.HWM = m.RSS, m.HWM
	} else {
		s.Problems = append(s.Problems, err.Error())
	}
	return s
}

// startServer starts srv for sc on new ports and waits for its first
// right answer: the process, its UDP/TCP port, the port the scenario
// queries (the TLS one for DoT) and the time from the start to that
// answer. On an error the process is stopped.
func (e *env) startServer(sc *scenario, srv string) (p *exec.Cmd, port, target int, took time.Duration, err error) {
	port, tlsPort := proc.FreePort(), proc.FreePort()
	argv, err := e.command(srv, sc, port, tlsPort)
	if err != nil {
		return nil, 0, 0, 0, err
	}
	started := time.Now()
	if p, err = e.spawn(0, fmt.Sprintf("%s-%s", sc.name, srv), argv...); err != nil {
		return nil, 0, 0, 0, err
	}
	target = port
	if sc.transport == "dot" {
		target = tlsPort
	}
	if err := waitReady(sc, srv, target, 60*time.Second); err != nil {
		e.stop(p)
		return nil, 0, 0, 0, err
	}
	return p, port, target, time.Since(started), nil
}

// p99At runs bench/loadgen at rate against target and returns the p99 in
// µs (0 when the run failed, noted in s, as are lost queries over 0.1 %).
func (e *env) p99At(sc *scenario, target, rate int, what string, s *sample) float64 {
	kv, err := e.fixedRate(sc, target, rate, what, s)
	if err != nil {
		s.Problems = append(s.Problems, err.Error())
		return 0
	}
	return kv["p99_us"]
}

// fixedRateTries: a fixed-rate run in which the generator stalled itself
// (stalled) measured the machine more than the server; it is run again,
// up to this many runs in all, and the one with the fewest queries skipped
// is kept (noted in the sample).
const fixedRateTries = 3

// fixedRate runs bench/loadgen at rate against target (see fixedRateTries)
// and notes in s what noteRate notes of the run kept.
func (e *env) fixedRate(sc *scenario, target, rate int, what string, s *sample) (map[string]float64, error) {
	var best map[string]float64
	tries := 0
	for tries < fixedRateTries && (best == nil || stalled(best)) {
		kv, err := e.loadgen(sc, target, 0, "-rate", strconv.Itoa(rate))
		if err != nil {
			return nil, err
		}
		tries++
		if best == nil || kv["skipped"] < best["skipped"] {
			best = kv
		}
	}
	if tries > 1 {
		s.Notes = append(s.Notes, fmt.Sprintf("run %d times at %d/s%s: the load generator stalled itself (the run with the fewest skipped queries kept)", tries, rate, what))
	}
	noteRate(best, rate, what, s)
	return best, nil
}

// stalled reports whether the generator skipped more than 1 % of a
// fixed-rate run's queries after stalls of its own.
func stalled(kv map[string]float64) bool { return kv["skipped"] > 0.01*kv["sent"] }

// noteRate notes in s the queries of a fixed-rate run left unanswered and
// the ones the generator skipped after stalls of its own (it sends at most
// 2 ms of missed queries at once), each when over 0.1 % of those sent.
func noteRate(kv map[string]float64, rate int, what string, s *sample) {
	if lost := kv["lost"]; lost > 0.001*kv["sent"] {
		s.Notes = append(s.Notes, fmt.Sprintf("%.0f of %.0f queries unanswered at %d/s%s", lost, kv["sent"], rate, what))
	}
	if skipped := kv["skipped"]; skipped > 0.001*kv["sent"] {
		s.Notes = append(s.Notes, fmt.Sprintf("the load generator skipped %.0f queries at %d/s%s (stalled itself)", skipped, rate, what))
	}
}

func (e *env) runDnsperf(sc *scenario, srv string, pid, port int, s *sample) error {
	secs := max(1, int(e.dur.Round(time.Second)/time.Second))
	args := []string{e.dnsperf, "-s", "127.0.0.1", "-p", strconv.Itoa(port), "-m", sc.transport,
		"-d", sc.queries, "-l", strconv.Itoa(secs), "-t", "2", "-e"}
	if sc.transport == "udp" {
		args = append(args, "-c", "8", "-q", "128")
	} else {
		// Pipelined: 100 queries in flight over 4 connections.
		args = append(args, "-c", "4", "-q", "100")
	}
	cpu0, err := proc.CPUTicks(pid)
	if err != nil {
		return err
	}
	out, err := e.output(1, args...)
	cpu1, _ := proc.CPUTicks(pid)
	if err != nil {
		return fmt.Errorf("dnsperf: %v\n%s", err, out)
	}
	r, err := parseDnsperf(out)
	if err != nil {
		return err
	}
	if r.Completed == 0 {
		return fmt.Errorf("dnsperf: no query answered")
	}
	s.PerfQPS = r.QPS
	s.PerfCPU = float64(cpu1-cpu0) / 100 / float64(r.Completed) * 1e6
	if err := sc.checkRcodes(srv, r); err != nil {
		return err
	}
	return nil
}

// loadgen runs bench/loadgen on CPU 1 against port with sc's queries and
// returns its figures.
func (e *env) loadgen(sc *scenario, port, pid int, extra ...string) (map[string]float64, error) {
	args := []string{filepath.Join(e.bin, "loadgen"), "-addr", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
		"-queries", sc.queries, "-duration", e.dur.String(), "-label", sc.name}
	if pid > 0 {
		args = append(args, "-pid", strconv.Itoa(pid))
	}
	args = append(args, extra...) // later flags win
	out, err := e.output(1, args...)
	if err != nil {
		return nil, fmt.Errorf("loadgen: %v: %s", err, out)
	}
	return parseLoadgen(strings.TrimSpace(out))
}

// spawn starts argv on cpu (when pinning) with its output in a log file of
// the working directory; the process's pid is the server's.
func (e *env) spawn(cpu int, name string, argv ...string) (*exec.Cmd, error) {
	log, err := os.Create(filepath.Join(e.dir, name+".log"))
	if err != nil {
		return nil, err
	}
	defer log.Close()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.start(cmd, cpu); err != nil {
		return nil, err
	}
	e.live[cmd] = true
	return cmd, nil
}

// start starts cmd, on cpu alone when pinning.
func (e *env) start(cmd *exec.Cmd, cpu int) error {
	if e.pin {
		return startOn(cmd, cpu)
	}
	return cmd.Start()
}

// output runs argv on cpu (when pinning) to its end and returns its
// standard output (and standard error).
func (e *env) output(cpu int, argv ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*e.dur+time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := e.start(cmd, cpu); err != nil {
		return "", err
	}
	err := cmd.Wait()
	return out.String(), err
}

// stop ends a process: SIGTERM, then SIGKILL after 5 s.
func (e *env) stop(cmd *exec.Cmd) {
	e.mu.Lock()
	delete(e.live, cmd)
	e.mu.Unlock()
	proc.Stop(cmd)
}

func (e *env) stopAll() {
	e.mu.Lock()
	cmds := make([]*exec.Cmd, 0, len(e.live))
	for c := range e.live {
		cmds = append(cmds, c)
	}
	e.mu.Unlock()
	for _, c := range cmds {
		e.stop(c)
	}
}

// startBackends starts what sc's servers talk to (the forward upstream,
// etcd, the kube-apiserver) and returns the function that stops them (the
// kube-apiserver stays for the next run).
func (e *env) startBackends(sc *scenario) (func(), error) {
	var started []*exec.Cmd
	stop := func() {
		for _, c := range started {
			e.stop(c)
		}
	}
	switch sc.name {
	case "kubernetes":
		if err := e.startCluster(); err != nil {
			return stop, fmt.Errorf("kube-apiserver: %v", err)
		}
		sc.kubeconfig = e.cluster.Kubeconfig
	case "forward":
		// The upstream: a second reference server, on the load's CPU.
		sc.upstream = proc.FreePort()
		c, err := e.spawn(1, "upstream", filepath.Join(e.bin, "reference"), "-addr", fmt.Sprintf("127.0.0.1:%d", sc.upstream))
		if err != nil {
			return stop, err
		}
		started = append(started, c)
	case "etcd":
		sc.etcd = proc.FreePort()
		self, err := os.Executable()
		if err != nil {
			return stop, err
		}
		ready := filepath.Join(e.dir, "etcd.ready")
		os.Remove(ready)
		c, err := e.spawn(1, "etcd", self, "etcd", "-port", strconv.Itoa(sc.etcd), "-peer-port", strconv.Itoa(proc.FreePort()),
			"-dir", filepath.Join(e.dir, fmt.Sprintf("etcd-%d", sc.etcd)), "-load", filepath.Join(e.dir, "etcd.records"), "-ready", ready)
		if err != nil {
			return stop, err
		}
		started = append(started, c)
		if err := waitFile(ready, 2*time.Minute); err != nil {
			stop()
			return func() {}, fmt.Errorf("etcd: %v (log: %s)", err, filepath.Join(e.dir, "etcd.log"))
		}
	}
	return stop, nil
}

func waitFile(path string, timeout time.Duration) error {
	for end := time.Now().Add(timeout); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if _, err := os.Stat(path); err == nil {
			return nil
		}
	}
	return errors.New("not ready in time")
}

// rotate returns xs started at its (run mod len)-th element.
func rotate(xs []string, run int) []string {
	k := run % len(xs)
	return append(append([]string(nil), xs[k:]...), xs[:k]...)
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

func numCPU() int {
	n := 0
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "processor") {
			n++
		}
	}
	return n
}

func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "?"
	}
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "?"
}
