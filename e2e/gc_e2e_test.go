package e2e

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/dnsd/dnsd/internal/gctune"
)

// The built binary ends start-up at gctune.Steady (the Go collector's
// go_gc_gogc_percent metric), and leaves a GOGC from the environment be.
func TestGCTargetOfBinary(t *testing.T) {
	for _, tc := range []struct {
		env  []string
		want int
	}{{nil, gctune.Steady}, {[]string{"GOGC=70"}, 70}} {
		d := start(t, config{HTTP: true, Env: tc.env, Zones: gcZones}, nil)
		d.waitMetric(fmt.Sprintf("go_gc_gogc_percent %d", tc.want), 10*time.Second)
		d.stop(os.Interrupt)
	}
}

const gcZones = `  example.internal:
    - hosts: {entries: ["10.0.0.1 a"]}
`

// A reload is a burst: while the built binary reloads (here it waits for
// a new etcd source that cannot sync, up to its sync_timeout) the
// collector's target is gctune.Bulk; afterwards gctune.Steady again.
func TestGCTargetDuringReload(t *testing.T) {
	c := config{HTTP: true, Zones: gcZones}
	d := start(t, c, nil)
	d.waitMetric(fmt.Sprintf("go_gc_gogc_percent %d", gctune.Steady), 10*time.Second)
	c.Zones += fmt.Sprintf(`  etcd.internal:
    - etcd: {endpoints: ["http://127.0.0.1:%d"], sync_timeout: 4s}
`, freePort(t))
	d.reload(t, c.yaml(), true, 0)
	d.waitMetric(fmt.Sprintf("go_gc_gogc_percent %d", gctune.Bulk), 3*time.Second)
	d.waitLog("reloaded", 1)
	d.waitMetric(fmt.Sprintf("go_gc_gogc_percent %d", gctune.Steady), 2*time.Second)
	d.stop(os.Interrupt)
}
