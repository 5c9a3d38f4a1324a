package main

import (
	"bufio"
	"fmt"
	"strconv"
	"strings"
)

// perfResult is what dnsperf printed at the end of a run.
type perfResult struct {
	Completed int64            // queries answered, whatever the rcode
	Lost      int64            // queries unanswered within the timeout
	QPS       float64          // completed queries per second
	Rcodes    map[string]int64 // responses by rcode name ("NOERROR", "NXDOMAIN", ...)
}

// parseDnsperf reads dnsperf's statistics block.
func parseDnsperf(out string) (perfResult, error) {
	r := perfResult{Rcodes: map[string]int64{}}
	var seen int
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), ":")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		if len(f) == 0 {
			continue
		}
		var err error
		switch k {
		case "Queries completed":
			r.Completed, err = strconv.ParseInt(f[0], 10, 64)
			seen++
		case "Queries lost":
			r.Lost, err = strconv.ParseInt(f[0], 10, 64)
		case "Queries per second":
			r.QPS, err = strconv.ParseFloat(f[0], 64)
			seen++
		case "Response codes":
			// NOERROR 8000 (80.00%), NXDOMAIN 2000 (20.00%)
			for _, part := range strings.Split(v, ",") {
				p := strings.Fields(part)
				if len(p) < 2 {
					continue
				}
				n, perr := strconv.ParseInt(p[1], 10, 64)
				if perr != nil {
					err = perr
					break
				}
				r.Rcodes[p[0]] = n
			}
		}
		if err != nil {
			return r, fmt.Errorf("dnsperf output: %s: %v", k, err)
		}
	}
	if seen < 2 {
		return r, fmt.Errorf("dnsperf output has no statistics:\n%s", out)
	}
	return r, nil
}
