// Package proc reads what the benchmarks measure of a server process from
// /proc (CPU time, resident memory, the kernel's UDP receive drops) and
// starts and stops the processes they measure.
package proc
