//go:build linux

// Command loadgen sends DNS queries to one server and reports what it
// measured on one line. It is the load side of bench/run.sh and
// bench/peers.sh; it only ever targets the address it is given (loopback).
//
// Two modes:
//   - saturation (default): several sockets each keep a window of queries in
//     flight for a fixed time; it reports answers per second and, given the
//     server's pid, the server's CPU time per answer (from /proc/PID/stat).
//     Over UDP (the default) or, with -proto tcp or tls, over TCP or DNS
//     over TLS connections with pipelined queries: the answers of each read
//     release as many new queries, written together (one TLS record), as
//     a forwarder sends the queries its clients asked meanwhile;
//   - fixed rate (-rate N, UDP): N queries per second from one socket,
//     whatever the answers do (an open loop), and the latency percentiles
//     of the answers; queries unanswered after a second count as lost.
//
// The queries are one name (-name, -type) or a file of "name type" lines
// (-queries, the format of dnsperf's data files), sent in turn.
package main
