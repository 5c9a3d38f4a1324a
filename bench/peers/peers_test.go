package main

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParseDnsperf(t *testing.T) {
	out := `DNS Performance Testing Tool
Version 2.10.0

[Status] Command line: dnsperf -s 127.0.0.1 -p 5300 -d q -l 5
[Status] Sending queries (to 127.0.0.1:5300)
[Status] Testing complete (time limit)

Statistics:

  Queries sent:         1000010
  Queries completed:    1000000 (100.00%)
  Queries lost:         10 (0.00%)

  Response codes:       NOERROR 800000 (80.00%), NXDOMAIN 200000 (20.00%)
  Average packet size:  request 40, response 56
  Run time (s):         5.000000
  Queries per second:   199999.500000

  Average Latency (s):  0.000587 (min 0.000029, max 0.004085)
  Latency StdDev (s):   0.000648
`
	r, err := parseDnsperf(out)
	if err != nil {
		t.Fatal(err)
	}
	if r.Completed != 1000000 || r.Lost != 10 || r.QPS != 199999.5 || r.Rcodes["NOERROR"] != 800000 || r.Rcodes["NXDOMAIN"] != 200000 {
		t.Errorf("parseDnsperf = %+v", r)
	}
	sc := scenario{nxShare: 0.2}
	if err := sc.checkRcodes("dnsd", r); err != nil {
		t.Errorf("checkRcodes of a right mix: %v", err)
	}
	if err := sc.checkRcodes("reference", r); err == nil {
		t.Error("checkRcodes: the reference answering NXDOMAIN passed")
	}
	r.Rcodes = map[string]int64{"NOERROR": 800000, "SERVFAIL": 200000}
	if err := sc.checkRcodes("dnsd", r); err == nil {
		t.Error("checkRcodes: SERVFAIL instead of NXDOMAIN passed")
	}
	if _, err := parseDnsperf("[Fatal] unable to connect\n"); err == nil {
		t.Error("parseDnsperf of a failed run succeeded")
	}
}

func TestParseLoadgen(t *testing.T) {
	kv, err := parseLoadgen("hosts            qps=181234 answers=906170 nodata=0 nxdomain=0 bad=0 server_cpu=4.99s cpu_per_answer_us=5.51")
	if err != nil || kv["qps"] != 181234 || kv["server_cpu"] != 4.99 || kv["cpu_per_answer_us"] != 5.51 {
		t.Errorf("parseLoadgen = %v, %v", kv, err)
	}
	if _, err := parseLoadgen("loadgen: connection refused"); err == nil {
		t.Error("parseLoadgen of an error succeeded")
	}
}

// TestStalled: a fixed-rate run is run again when the generator skipped
// over 1 % of its queries, read from loadgen's own output line.
func TestStalled(t *testing.T) {
	for _, tc := range []struct {
		line string
		want bool
	}{
		{"                 rate=80000 sent=400000 skipped=0 answers=400000 lost=0 p50_us=12.1 p99_us=300.5", false},
		{"                 rate=80000 sent=396000 skipped=3960 answers=396000 lost=0 p50_us=12.1 p99_us=300.5", false},
		{"                 rate=80000 sent=390000 skipped=10000 answers=390000 lost=0 p50_us=12.1 p99_us=900.5", true},
	} {
		kv, err := parseLoadgen(tc.line)
		if err != nil {
			t.Fatal(err)
		}
		if got := stalled(kv); got != tc.want {
			t.Errorf("stalled(%q) = %v, want %v", tc.line, got, tc.want)
		}
	}
}

func TestRotate(t *testing.T) {
	xs := []string{"a", "b", "c"}
	if got := strings.Join(rotate(xs, 4), ""); got != "bca" {
		t.Errorf("rotate(abc, 4) = %s", got)
	}
	if xs[0] != "a" {
		t.Error("rotate changed its input")
	}
}

func TestPickScenarios(t *testing.T) {
	all, err := pickScenarios("", true)
	if err != nil || len(all) != len(allScenarios) {
		t.Fatalf("all scenarios: %d, %v", len(all), err)
	}
	two, err := pickScenarios("dot,hosts", false)
	if err != nil || len(two) != 2 || two[0].name != "hosts" || two[1].name != "dot" {
		t.Errorf("pickScenarios(dot,hosts) = %v, %v", two, err)
	}
	if _, err := pickScenarios("hosts,nope", false); err == nil {
		t.Error("an unknown scenario was accepted")
	}
	if _, err := pickScenarios("kubernetes", false); err == nil {
		t.Error("kubernetes was accepted without a kube-apiserver")
	}
	if noK8s, _ := pickScenarios("", false); len(noK8s) != len(allScenarios)-1 {
		t.Errorf("without a kube-apiserver: %d scenarios, want all but kubernetes", len(noK8s))
	}
}

// TestRunOrder checks the servers' order: rotated from run to run, unbound
// first when its peak sets the common rate (and it serves the scenario).
func TestRunOrder(t *testing.T) {
	servers := []string{"reference", "dnsd", "unbound", "coredns"}
	scs, _ := pickScenarios("hosts,etcd", false)
	hosts, etcd := &scs[0], &scs[1]
	for _, c := range []struct {
		sc    *scenario
		run   int
		first bool
		want  string
	}{
		{hosts, 0, false, "reference,dnsd,unbound,coredns"},
		{hosts, 1, false, "dnsd,unbound,coredns,reference"},
		{hosts, 0, true, "unbound,reference,dnsd,coredns"},
		{hosts, 1, true, "unbound,dnsd,coredns,reference"},
		{hosts, 2, true, "unbound,coredns,reference,dnsd"},
		{etcd, 1, true, "dnsd,unbound,coredns,reference"}, // no unbound in etcd: as rotated
	} {
		if got := strings.Join(runOrder(c.sc, servers, c.run, c.first), ","); got != c.want {
			t.Errorf("%s run %d unbound first %v: %s, want %s", c.sc.name, c.run, c.first, got, c.want)
		}
	}
}

// TestRender checks the ratios: per run against the reference of the same
// run, medians over runs, "—" where a server cannot serve a scenario.
func TestRender(t *testing.T) {
	r := results{}
	ref := []float64{5, 6, 4}
	dnsd := []float64{4, 6, 3.6} // ratios 0.8, 1.0, 0.9
	for run := range ref {
		r.add("hosts", "reference", run, sample{PerfCPU: ref[run], PerfQPS: 100000, HalfP99: 100, HalfRate: 50000, CommonP99: 200, RSS: 10240, HWM: 12288, Drops: 2})
		r.add("hosts", "dnsd", run, sample{PerfCPU: dnsd[run], PerfQPS: 150000, P50: 50, HalfP99: 50, HalfRate: 75000 + 2000*run, CommonP99: 300, Settled: 40960, Loaded: 46080, RSS: 51200, HWM: 61440, Drops: 0, Start: time.Duration(30+run) * time.Millisecond})
		r.add("etcd", "reference", run, sample{PerfCPU: 5, Drops: -1})
		// Over 1 % of its queries lost at half its peak: that p99 is lost.
		r.add("hosts", "coredns", run, sample{PerfCPU: 10, HalfP99: math.Inf(1), HalfRate: 40000, CommonP99: math.Inf(1)})
	}
	r.add("etcd", "dnsd", 1, sample{PerfCPU: 2.5, Drops: -1, Problems: []string{"slow start"}, Notes: []string{"3 lost"}})
	scs, _ := pickScenarios("hosts,etcd", false)
	var b bytes.Buffer
	render(&b, r, scs, []string{"reference", "dnsd", "unbound", "coredns"}, 20000, 80000)
	out := b.String()
	for _, want := range []string{
		"| hosts hits | reference | 1.00 (5.00 µs) | 1.00 (100k/s) |",
		"| hosts hits | dnsd | 0.90 (0.80–1.00) | 1.50 | — | — | — | — | 50.0 µs at 77k/s | 300 µs | 40 / 45 / 50 / 60 | 0 | 31 ms |",
		"| hosts hits | reference |", "— / — / 10 / 12 | 6 |",
		"| etcd hits | dnsd | 0.50 |",
		"| hosts hits | coredns (hosts) | 2.00 (1.67–2.50) | — | — | — | — | — | lost at 40k/s | lost |",
		"| 100 µs at 50k/s | 200 µs |", // the reference's own p99s, not ratios
		"| etcd hits | unbound | — |",
		"- etcd hits, dnsd, run 1: not run",
		"- etcd hits, dnsd, run 2: slow start",
		"- etcd hits, dnsd, run 2: 3 lost",
		"p50 at 20k/s",
		"| p99 at 80k/s |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	// The common rate set by unbound's peak: each row's own rate.
	r.add("hosts", "dnsd", 0, sample{PerfCPU: 4, CommonP99: 300, CommonRate: 60000})
	b.Reset()
	render(&b, r, scs, []string{"reference", "dnsd"}, 20000, 0)
	if out := b.String(); !strings.Contains(out, "| p99 at ½ unbound's peak |") || !strings.Contains(out, "| 300 µs at 60k/s |") {
		t.Errorf("common rate by unbound's peak:\n%s", out)
	}
	// unbound can serve hosts but was not run: no row.
	if strings.Contains(out, "| hosts hits | unbound") {
		t.Errorf("a server that was not run has a row:\n%s", out)
	}
}

// TestWriteData checks the data every server is given agrees: the same
// names and addresses, a fifth of the NXDOMAIN queries missing.
func TestWriteData(t *testing.T) {
	e := &env{dir: t.TempDir()}
	if err := e.writeData(); err != nil {
		t.Fatal(err)
	}
	read := func(f string) []string {
		b, err := os.ReadFile(filepath.Join(e.dir, f))
		if err != nil {
			t.Fatal(err)
		}
		return strings.Split(strings.TrimSpace(string(b)), "\n")
	}
	hosts, hits, nx := read("hosts"), read("hits.queries"), read("nx.queries")
	if len(hosts) != names || len(hits) != names || len(nx) != names {
		t.Fatalf("%d hosts, %d hit queries, %d nx queries; want %d each", len(hosts), len(hits), len(nx), names)
	}
	if hosts[1234] != "10.1.4.210 host1234.example.internal" || hits[1234] != "host1234.example.internal. A" {
		t.Errorf("line 1234: %q, %q", hosts[1234], hits[1234])
	}
	missing := 0
	for _, q := range nx {
		if strings.HasPrefix(q, "missing") {
			missing++
		}
	}
	if missing != names/5 {
		t.Errorf("%d missing names in the NXDOMAIN mix, want %d", missing, names/5)
	}
	if recs := read("etcd.records"); recs[1234] != "/skydns/internal/example/host1234\t{\"host\":\"10.1.4.210\",\"ttl\":3600}" {
		t.Errorf("etcd record 1234: %q", recs[1234])
	}
	if local := read("unbound-local.conf"); len(local) != names+2 || !strings.Contains(local[1236], `"host1234.example.internal. 3600 IN A 10.1.4.210"`) {
		t.Errorf("unbound local data: %d lines, line 1236 %q", len(local), local[1236])
	}
}
