// Command flood measures what a flood of forwarded queries at a dead
// upstream costs a running dnsd: it starts the given dnsd binary with a
// local zone and a forward source whose only upstream is a black hole (a
// UDP socket of this process that never answers), sends one name (or
// random names with -random) at a fixed rate for a fixed time, and reports
// dnsd's peak RSS, how many flood queries were answered (REFUSED over
// max_concurrent, SERVFAIL after the upstream timeout) and the latency of
// a local name asked meanwhile. It only ever talks to loopback.
//
//	go run ./bench/flood -dnsd ./dnsd -rate 5000 -duration 60s
package main
