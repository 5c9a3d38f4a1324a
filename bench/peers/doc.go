// Command peers measures dnsd side by side with the servers people would
// otherwise run — unbound, CoreDNS, dnsmasq — and with bench/reference (a
// trivial fixed-answer server), all serving the same data in one run on
// this machine, and prints one Markdown table of ratios to the reference.
// bench/peers.sh builds everything and runs it; see docs/performance.md.
//
// Each server in turn runs pinned to CPU 0 while the load generators run on
// CPU 1; the servers' order rotates from run to run. For every server and
// scenario it measures, at saturation, the server's CPU time per answered
// query (utime+stime from /proc/PID/stat ÷ answers) and the answers per
// second, once under dnsperf and once under bench/loadgen (over TCP and
// DoT it writes the queries each read of answers releases together, where
// dnsperf writes each on its own); then, over UDP, the p50/p99
// latency at a fixed rate (bench/loadgen -rate) and the p99 at half the
// server's own loadgen peak and at one common rate for all — by default
// half of unbound's peak (a lost query ranks after every answer); its VmRSS
// idle after the warm-up (settled), the largest sampled under the
// saturating loads, and VmRSS/VmHWM at the end; and the kernel's receive
// drops on its UDP port (/proc/net/udp); and the time from its start to its
// first right answer (asked every 0.5 ms; for kubernetes and etcd that
// includes the first sync), the median of -starts starts.
// It only ever talks to loopback addresses.
//
// "peers etcd ..." is an internal subcommand: an embedded etcd server
// loaded with the etcd scenario's records.
package main
