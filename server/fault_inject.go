//go:build dnsd_faultinject

package server

import (
	"os"
	"strings"
)

// faults are test hooks, compiled only with -tags dnsd_faultinject:
// DNSD_FAULT_PANIC_NAME=name. makes every query for that name panic
// inside the server's query path.
type faults struct {
	panicName string
}

func newFaults() faults {
	return faults{panicName: strings.ToLower(os.Getenv("DNSD_FAULT_PANIC_NAME"))}
}

func (f faults) beforeResolve(name string) {
	if f.panicName != "" && name == f.panicName {
		panic("injected fault: DNSD_FAULT_PANIC_NAME=" + name)
	}
}
