package main

import (
	"fmt"
	"strconv"
	"strings"
)

// parseLoadgen reads the key=value fields of one bench/loadgen result line.
func parseLoadgen(line string) (map[string]float64, error) {
	kv := map[string]float64{}
	for _, f := range strings.Fields(line) {
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			continue // the label
		}
		x, err := strconv.ParseFloat(strings.TrimSuffix(v, "s"), 64)
		if err != nil {
			return nil, fmt.Errorf("loadgen output: %s: %v", f, err)
		}
		kv[k] = x
	}
	if len(kv) == 0 {
		return nil, fmt.Errorf("loadgen output: no fields in %q", line)
	}
	return kv, nil
}
