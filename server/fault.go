//go:build !dnsd_faultinject

package server

// faults is empty in every normal build: the fault-injection hooks exist
// only in binaries built with -tags dnsd_faultinject (tests that prove
// how dnsd survives faults that cannot be caused from outside).
type faults struct{}

func newFaults() faults { return faults{} }

func (faults) beforeResolve(string) {}
