package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/dnsd/dnsd/bench/internal/proc"

	"github.com/miekg/dns"
	"k8s.io/client-go/kubernetes"

	"github.com/dnsd/dnsd/sources/kubernetes/kubetest"
)

const namespaces = kubetest.ScaleNamespaces

type config struct {
	dnsd, coredns, apiserver, loadgen string
	services, endpoints, runs         int
	zones                             string
	settle, load                      time.Duration
	dir                               string
	servers                           []string
	kubeconfig                        string // a cluster already running (-kubeconfig)
	hold                              bool
}

func main() {
	var c config
	flag.StringVar(&c.dnsd, "dnsd", "", "dnsd binary (required)")
	flag.StringVar(&c.coredns, "coredns", "", "CoreDNS binary (empty: dnsd only)")
	flag.StringVar(&c.apiserver, "kube-apiserver", "", "kube-apiserver binary (required)")
	flag.StringVar(&c.loadgen, "loadgen", "", "bench/loadgen binary (empty: no load)")
	flag.IntVar(&c.services, "services", 10000, "services in the cluster")
	flag.IntVar(&c.endpoints, "endpoints", 0, "ready endpoints per service (0: no EndpointSlices)")
	flag.IntVar(&c.runs, "runs", 3, "runs; the servers' order alternates")
	flag.StringVar(&c.zones, "zones", "cluster.local", "the zones both servers serve from the cluster (e.g. \"cluster.local 10.in-addr.arpa\")")
	flag.DurationVar(&c.settle, "settle", 3*time.Second, "wait after the first answer before reading the settled RSS")
	flag.DurationVar(&c.load, "load", 10*time.Second, "length of the load")
	flag.StringVar(&c.dir, "dir", "", "working directory (default: a new temporary one, removed at the end)")
	flag.BoolVar(&c.hold, "hold", false, "only create the cluster, print its kubeconfig and keep it until interrupted (to measure against it with -kubeconfig)")
	flag.StringVar(&c.kubeconfig, "kubeconfig", "", "measure against this cluster (one -hold created, with the same -services) instead of creating one")
	flag.Parse()
	if (c.dnsd == "" && !c.hold) || (c.apiserver == "" && c.kubeconfig == "") {
		fmt.Fprintln(os.Stderr, "kubepeers: -dnsd and -kube-apiserver (or -kubeconfig) are required")
		os.Exit(2)
	}
	c.servers = []string{"dnsd"}
	if c.coredns != "" {
		c.servers = append(c.servers, "coredns")
	}
	if err := run(&c); err != nil {
		fmt.Fprintln(os.Stderr, "kubepeers:", err)
		os.Exit(1)
	}
}

// sample is one server's turn.
type sample struct {
	first                    time.Duration // process start to the first right answer
	firstCPU                 time.Duration // the server's CPU time (user+system) until then
	settled, peak            int64         // KiB: VmRSS after settling, VmHWM then
	loadMax, loadEnd, hwmEnd int64         // KiB: VmRSS at most during the load, VmRSS and VmHWM after it
	qps                      float64
}

func run(c *config) error {
	if c.dir == "" {
		d, err := os.MkdirTemp("", "dnsd-kubepeers-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		c.dir = d
	}
	kubeconfig := c.kubeconfig
	if kubeconfig == "" {
		cp, err := startCluster(c)
		if err != nil {
			return err
		}
		defer cp.Close()
		kubeconfig = cp.Kubeconfig
		if c.hold {
			fmt.Println(kubeconfig)
			select {} // until the signal handler of startCluster stops it
		}
	}
	queries := filepath.Join(c.dir, "k8s.queries")
	var q strings.Builder
	for i := range c.services {
		fmt.Fprintf(&q, "%s A\n", serviceName(i))
	}
	if err := os.WriteFile(queries, []byte(q.String()), 0o644); err != nil {
		return err
	}

	res := map[string][]sample{}
	for r := range c.runs {
		order := slices.Clone(c.servers)
		if r%2 == 1 {
			slices.Reverse(order)
		}
		for _, srv := range order {
			fmt.Fprintf(os.Stderr, "kubepeers: run %d/%d, %s\n", r+1, c.runs, srv)
			s, err := c.measure(srv, kubeconfig, queries)
			if err != nil {
				return fmt.Errorf("%s: %w", srv, err)
			}
			fmt.Fprintf(os.Stderr, "kubepeers:   first answer %s (CPU %s), settled %s (peak %s), under load %s, after %s (peak %s), %.0f answers/s\n",
				s.first.Round(time.Millisecond), s.firstCPU, mib(s.settled), mib(s.peak), mib(s.loadMax), mib(s.loadEnd), mib(s.hwmEnd), s.qps)
			res[srv] = append(res[srv], s)
		}
	}
	host, _ := os.Hostname()
	fmt.Printf("%s, %s, %d services, %d endpoints each, zones %q, %d run(s), %s of load\n\n",
		time.Now().UTC().Format("2006-01-02 15:04 UTC"), host, c.services, c.endpoints, c.zones, c.runs, c.load)
	fmt.Println("| server | first answer | CPU until then | RSS settled | peak (VmHWM) | RSS under load (max) | RSS after load | peak after load | answers/s |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|")
	for _, srv := range c.servers {
		ss := res[srv]
		fmt.Printf("| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", srv,
			spread(ss, func(s sample) float64 { return s.first.Seconds() }, 2, " s"),
			spread(ss, func(s sample) float64 { return s.firstCPU.Seconds() }, 2, " s"),
			spread(ss, func(s sample) float64 { return float64(s.settled) / 1024 }, 0, " MiB"),
			spread(ss, func(s sample) float64 { return float64(s.peak) / 1024 }, 0, " MiB"),
			spread(ss, func(s sample) float64 { return float64(s.loadMax) / 1024 }, 0, " MiB"),
			spread(ss, func(s sample) float64 { return float64(s.loadEnd) / 1024 }, 0, " MiB"),
			spread(ss, func(s sample) float64 { return float64(s.hwmEnd) / 1024 }, 0, " MiB"),
			spread(ss, func(s sample) float64 { return s.qps / 1000 }, 0, "k"))
	}
	return nil
}

// spread prints the median of f over ss and, with several, its range,
// with prec decimals and unit.
func spread(ss []sample, f func(sample) float64, prec int, unit string) string {
	var xs []float64
	for _, s := range ss {
		if v := f(s); v > 0 {
			xs = append(xs, v)
		}
	}
	if len(xs) == 0 {
		return "—"
	}
	slices.Sort(xs)
	med := xs[len(xs)/2]
	if len(xs)%2 == 0 {
		med = (xs[len(xs)/2-1] + xs[len(xs)/2]) / 2
	}
	out := strconv.FormatFloat(med, 'f', prec, 64) + unit
	if len(xs) > 1 {
		out += " (" + strconv.FormatFloat(xs[0], 'f', prec, 64) + "–" + strconv.FormatFloat(xs[len(xs)-1], 'f', prec, 64) + ")"
	}
	return out
}

func mib(kib int64) string { return fmt.Sprintf("%.0f MiB", float64(kib)/1024) }

// startCluster starts a control plane and creates the cluster in it.
func startCluster(c *config) (*kubetest.ControlPlane, error) {
	fmt.Fprintf(os.Stderr, "kubepeers: starting kube-apiserver, creating %d services with %d endpoints each\n", c.services, c.endpoints)
	start := time.Now()
	cp, err := kubetest.Start(c.apiserver, filepath.Join(c.dir, "k8s"))
	if err != nil {
		return nil, fmt.Errorf("control plane: %w", err)
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sig
		cp.Close()
		os.Exit(130)
	}()
	fast := *cp.Config
	fast.QPS, fast.Burst = -1, 0
	k, err := kubernetes.NewForConfig(&fast)
	if err == nil {
		err = kubetest.CreateScale(context.Background(), k, c.services, c.endpoints)
	}
	if err != nil {
		cp.Close()
		return nil, fmt.Errorf("creating the cluster: %w", err)
	}
	fmt.Fprintf(os.Stderr, "kubepeers: cluster ready in %s\n", time.Since(start).Round(time.Second))
	return cp, nil
}

func serviceName(i int) string {
	return fmt.Sprintf("svc-%d.ns-%d.svc.cluster.local.", i, i%namespaces)
}

// measure starts srv, waits for its first right answer, lets it settle,
// loads it and stops it.
func (c *config) measure(srv, kubeconfig, queries string) (sample, error) {
	var s sample
	port := proc.FreePort()
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	conf := filepath.Join(c.dir, srv+".conf")
	var argv []string
	var text string
	switch srv {
	case "dnsd":
		text = fmt.Sprintf("listen: [%q]\nlog: {level: warn}\nzones:\n  %s:\n    - kubernetes: {kubeconfig: %s, context: test, sync_timeout: 60s}\n", addr, c.zones, kubeconfig)
		argv = []string{c.dnsd, "-config", conf}
	case "coredns":
		text = fmt.Sprintf("%s:%d {\n    bind 127.0.0.1\n    kubernetes %s {\n        kubeconfig %s test\n    }\n}\n", strings.ReplaceAll(c.zones, " ", ":"+strconv.Itoa(port)+" "), port, c.zones, kubeconfig)
		argv = []string{c.coredns, "-quiet", "-conf", conf}
	}
	if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
		return s, err
	}
	// The binary's pages in the page cache decide how many of them map
	// into the process (the kernel maps the cached pages around each one
	// touched): the same dnsd measured 7 MiB apart, fresh or cached. Read
	// each binary whole first, so both start from a cached binary.
	if f, err := os.Open(argv[0]); err == nil {
		_, _ = io.Copy(io.Discard, f)
		f.Close()
	}
	log, err := os.Create(filepath.Join(c.dir, srv+".log"))
	if err != nil {
		return s, err
	}
	defer log.Close()
	cmd := exec.Command("taskset", append([]string{"-c", "0"}, argv...)...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return s, err
	}
	defer proc.Stop(cmd)
	pid := cmd.Process.Pid

	// The first right answer: svc-0 has a cluster IP.
	cl := &dns.Client{Timeout: 50 * time.Millisecond}
	m := new(dns.Msg).SetQuestion(serviceName(0), dns.TypeA)
	for {
		r, _, err := cl.Exchange(m, addr)
		if err == nil && r.Rcode == dns.RcodeSuccess && len(r.Answer) == 1 {
			if _, ok := r.Answer[0].(*dns.A); ok {
				s.first = time.Since(start)
				ticks, _ := proc.CPUTicks(pid)
				s.firstCPU = time.Duration(ticks) * 10 * time.Millisecond // USER_HZ
				break
			}
		}
		if time.Since(start) > 2*time.Minute {
			return s, errors.New("no right answer in 2 minutes (log: " + log.Name() + ")")
		}
		time.Sleep(2 * time.Millisecond)
	}
	time.Sleep(c.settle)
	mem, err := proc.ReadMemory(pid)
	if err != nil {
		return s, err
	}
	s.settled, s.peak = mem.RSS, mem.HWM
	if c.loadgen == "" {
		return s, nil
	}

	// The load, with the RSS sampled every 50 ms.
	stopWatch := proc.WatchRSS(pid, 50*time.Millisecond)
	out, err := exec.Command("taskset", "-c", "1", c.loadgen, "-addr", addr, "-queries", queries,
		"-duration", c.load.String(), "-pid", strconv.Itoa(pid)).CombinedOutput()
	s.loadMax = stopWatch()
	if err != nil {
		return s, fmt.Errorf("loadgen: %w: %s", err, out)
	}
	for _, f := range strings.Fields(string(out)) {
		if v, ok := strings.CutPrefix(f, "qps="); ok {
			s.qps, _ = strconv.ParseFloat(v, 64)
		}
	}
	if mem, err = proc.ReadMemory(pid); err != nil {
		return s, err
	}
	s.loadEnd, s.hwmEnd = mem.RSS, mem.HWM
	return s, nil
}
