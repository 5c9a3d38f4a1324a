package daemon

import (
	"slices"
	"strings"

	"github.com/dnsd/dnsd/pipeline"
)

// readiness is /ready's verdict on a pipeline's sources: ready when every
// source has synced. The reason names each source that has not, with its
// backend and the cause when one is known (one line each); a ready
// pipeline whose synced backends cannot reach their server right now
// (they serve their last data) lists them too.
func readiness(srcs []pipeline.Source) (bool, string) {
	var waiting, degraded []string
	for _, s := range srcs {
		sy, ok := s.(pipeline.Syncer)
		if !ok {
			continue
		}
		line := s.Kind()
		problem := ""
		if tr, ok := s.(pipeline.Troubled); ok {
			if ep := tr.Endpoint(); ep != "" {
				line += " " + ep
			}
			problem = tr.Problem()
		}
		switch {
		case !sy.Synced():
			if problem == "" {
				problem = "connecting"
			}
			waiting = appendNew(waiting, line+": "+problem)
		case problem != "":
			degraded = appendNew(degraded, line+": "+problem)
		}
	}
	if len(waiting) > 0 {
		return false, "not synced yet:\n" + strings.Join(waiting, "\n")
	}
	if len(degraded) > 0 {
		return true, "serving the last data, backend unreachable:\n" + strings.Join(degraded, "\n")
	}
	return true, ""
}

func appendNew(l []string, s string) []string {
	if slices.Contains(l, s) {
		return l
	}
	return append(l, s)
}
