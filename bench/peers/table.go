package main

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"
)

// sample is one server measured in one scenario in one run. A zero figure
// is "not measured" (the scenario's transport or a missing tool).
type sample struct {
	PerfCPU, PerfQPS float64       // dnsperf at saturation: server CPU µs per answer, answers/s
	GenCPU, GenQPS   float64       // bench/loadgen at saturation, the same
	P50, P99         float64       // µs, bench/loadgen at the fixed rate
	HalfP99          float64       // µs, bench/loadgen at half the server's own loadgen QPS
	HalfRate         int           // that rate, queries/s
	CommonP99        float64       // µs, bench/loadgen at the common rate (the same for every server)
	CommonRate       int           // that rate, queries/s
	RSS, HWM         int64         // KiB at the end of the run: VmRSS, VmHWM
	Settled, Loaded  int64         // KiB: VmRSS idle after the warm-up; the largest VmRSS sampled under the saturating loads
	Drops            int64         // kernel receive drops on the server's UDP port; -1: not UDP
	Start            time.Duration // process start → first right answer
	Problems         []string      // wrong answers, failed measurements
	Notes            []string      // worth knowing, not wrong (queries lost at the fixed rate)
}

// column is one figure of the table: a ratio to the reference's figure in
// the same run, or (absolute) the figure itself.
type column struct {
	title    string
	get      func(sample) float64
	absolute func(float64) string // the reference row's figure
	spread   bool                 // print min–max of the runs' ratios too
	// raw: every row prints its own figure (median over runs), not a
	// ratio, for a figure the reference may not reach (at the common
	// rate the reference itself can lose queries; at half of each
	// server's own peak the reference's figure is at another rate).
	raw bool
	// rate, when set, is the rate a raw figure was measured at, which
	// differs by server (half of each one's own peak); printed beside it.
	rate func(sample) float64
}

var columns = []column{
	{"CPU/answer, dnsperf", func(s sample) float64 { return s.PerfCPU }, micro, true, false, nil},
	{"QPS, dnsperf", func(s sample) float64 { return s.PerfQPS }, kilo, false, false, nil},
	{"CPU/answer, loadgen", func(s sample) float64 { return s.GenCPU }, micro, true, false, nil},
	{"QPS, loadgen", func(s sample) float64 { return s.GenQPS }, kilo, false, false, nil},
	{"p50", func(s sample) float64 { return s.P50 }, micro, false, false, nil},
	{"p99", func(s sample) float64 { return s.P99 }, micro, false, false, nil},
	{"p99 at ½ peak", func(s sample) float64 { return s.HalfP99 }, micro, false, true, func(s sample) float64 { return float64(s.HalfRate) }},
	{"p99 common", func(s sample) float64 { return s.CommonP99 }, micro, false, true, func(s sample) float64 { return float64(s.CommonRate) }},
}

func micro(v float64) string {
	switch {
	case math.IsInf(v, 1):
		return "lost" // the percentile falls among unanswered queries
	case v < 10:
		return fmt.Sprintf("%.2f µs", v)
	case v < 100:
		return fmt.Sprintf("%.1f µs", v)
	}
	return fmt.Sprintf("%.0f µs", v)
}
func kilo(v float64) string { return fmt.Sprintf("%.0fk/s", v/1000) }

// results holds the samples of a whole benchmark: scenario → server → runs
// (one per run, in run order; a failed run is missing).
type results map[string]map[string][]sample

func (r results) add(scenario, server string, run int, s sample) {
	if r[scenario] == nil {
		r[scenario] = map[string][]sample{}
	}
	runs := r[scenario][server]
	for len(runs) <= run {
		runs = append(runs, sample{Drops: -1, Problems: []string{"not run"}})
	}
	runs[run] = s
	r[scenario][server] = runs
}

// ratios returns, for each run where both the server and the reference
// have figure c, the server's figure divided by the reference's.
func ratios(c column, srv, ref []sample) []float64 {
	var out []float64
	for i := range srv {
		if i >= len(ref) {
			break
		}
		a, b := c.get(srv[i]), c.get(ref[i])
		if a > 0 && b > 0 && !math.IsInf(b, 1) {
			out = append(out, a/b)
		}
	}
	return out
}

// median of xs (which it sorts); 0 for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	slices.Sort(xs)
	n := len(xs)
	if n%2 == 1 {
		return xs[n/2]
	}
	return (xs[n/2-1] + xs[n/2]) / 2
}

// render writes the table in Markdown: per scenario, the reference's own
// figures first, then every other server's ratios to them (medians over
// the runs), memory in MiB and the drops summed over the runs. Servers
// missing from a scenario show "—".
func render(w io.Writer, r results, scenarios []scenario, servers []string, rate, common int) {
	fmt.Fprintf(w, "| scenario | server |")
	for _, c := range columns {
		t := c.title
		switch c.title {
		case "p50", "p99":
			t = fmt.Sprintf("%s at %dk/s", c.title, rate/1000)
		case "p99 common":
			t = fmt.Sprintf("p99 at %dk/s", common/1000)
			switch {
			case common == 0:
				t = "p99 at ½ unbound's peak"
			case common < 0:
				t = "p99 at a common rate"
			}
		}
		fmt.Fprintf(w, " %s |", t)
	}
	fmt.Fprintf(w, " RSS settled / under load / end / peak MiB | UDP drops | start → answer |\n|---|---|")
	for range columns {
		fmt.Fprintf(w, "---|")
	}
	fmt.Fprintf(w, "---|---|---|\n")
	var notes []string
	for _, sc := range scenarios {
		byServer := r[sc.name]
		if byServer == nil {
			continue
		}
		ref := byServer["reference"]
		for _, srv := range servers {
			runs, ok := byServer[srv]
			name := srv
			if !ok {
				if sc.supports(srv) {
					continue // not selected
				}
				fmt.Fprintf(w, "| %s | %s |%s — | — | — |\n", sc.title, name, strings.Repeat(" — |", len(columns)))
				continue
			}
			for i, s := range runs {
				for _, p := range append(s.Problems, s.Notes...) {
					notes = append(notes, fmt.Sprintf("%s, %s, run %d: %s", sc.title, srv, i+1, p))
				}
			}
			if label := sc.labels[srv]; label != "" {
				name += " (" + label + ")"
			}
			fmt.Fprintf(w, "| %s | %s |", sc.title, name)
			for _, c := range columns {
				fmt.Fprintf(w, " %s |", cell(c, runs, ref, srv == "reference"))
			}
			fmt.Fprintf(w, " %s | %s | %s |\n", memCell(runs), dropsCell(runs), startCell(runs))
		}
	}
	for _, n := range notes {
		fmt.Fprintf(w, "\n- %s", n)
	}
	if len(notes) > 0 {
		fmt.Fprintln(w)
	}
}

// measured is get of every run that has the figure (above zero); none
// when get is nil.
func measured(runs []sample, get func(sample) float64) []float64 {
	if get == nil {
		return nil
	}
	var xs []float64
	for _, s := range runs {
		if v := get(s); v > 0 {
			xs = append(xs, v)
		}
	}
	return xs
}

func cell(c column, runs, ref []sample, isRef bool) string {
	if c.raw || isRef { // the row's own figure: the median of its runs'
		xs := measured(runs, c.get)
		if len(xs) == 0 {
			return "—"
		}
		v := c.absolute(median(xs))
		if !c.raw {
			return "1.00 (" + v + ")"
		}
		if rs := measured(runs, c.rate); len(rs) > 0 {
			v += " at " + kilo(median(rs))
		}
		return v
	}
	xs := ratios(c, runs, ref)
	if len(xs) == 0 {
		return "—"
	}
	m := median(xs) // sorts xs
	if math.IsInf(m, 1) {
		return "lost"
	}
	if c.spread && len(xs) > 1 && xs[len(xs)-1]-xs[0] >= 0.005 {
		return fmt.Sprintf("%.2f (%.2f–%.2f)", m, xs[0], xs[len(xs)-1])
	}
	return fmt.Sprintf("%.2f", m)
}

func memCell(runs []sample) string {
	var settled, loaded, rss, hwm []float64
	for _, s := range runs {
		if s.RSS > 0 {
			rss = append(rss, float64(s.RSS)/1024)
			hwm = append(hwm, float64(s.HWM)/1024)
		}
		if s.Settled > 0 && s.Loaded > 0 {
			settled = append(settled, float64(s.Settled)/1024)
			loaded = append(loaded, float64(s.Loaded)/1024)
		}
	}
	if len(rss) == 0 {
		return "—"
	}
	if len(settled) == 0 {
		return fmt.Sprintf("— / — / %.0f / %.0f", median(rss), median(hwm))
	}
	return fmt.Sprintf("%.0f / %.0f / %.0f / %.0f", median(settled), median(loaded), median(rss), median(hwm))
}

func dropsCell(runs []sample) string {
	var total int64
	measured := false
	for _, s := range runs {
		if s.Drops >= 0 {
			total += s.Drops
			measured = true
		}
	}
	if !measured {
		return "—"
	}
	return fmt.Sprint(total)
}

// startCell is the median time from start to the first right answer, in
// milliseconds.
func startCell(runs []sample) string {
	var ms []float64
	for _, s := range runs {
		if s.Start > 0 {
			ms = append(ms, float64(s.Start)/float64(time.Millisecond))
		}
	}
	if len(ms) == 0 {
		return "—"
	}
	return fmt.Sprintf("%.0f ms", median(ms))
}
