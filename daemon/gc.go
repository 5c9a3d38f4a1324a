package daemon

import (
	"log/slog"
	"os"
)

// servingGCPercent is the garbage collector's target once dnsd serves: the
// heap may grow by a quarter of what is live between collections instead
// of Go's default of doubling. An answer allocates nothing, so
// collections stay rare at any query rate; the garbage there is (a forward
// cache re-rendering its TTLs every second, cache misses, reloads, metrics
// scrapes) no longer lets the resident memory of a busy server climb to
// twice that of an idle one. The start — first loads and syncs, which
// allocate heavily and want to be fast — runs with the default. GOGC in
// the environment, when set, is left alone (as is GOMEMLIMIT always).
const servingGCPercent = 25

// tightenGC applies servingGCPercent unless GOGC is set; setGC is
// debug.SetGCPercent (a test passes its own).
func tightenGC(log *slog.Logger, setGC func(int) int) {
	if os.Getenv("GOGC") != "" {
		return
	}
	old := setGC(servingGCPercent)
	log.Debug("serving: garbage collector target tightened", "gc_percent", servingGCPercent, "was", old)
}
