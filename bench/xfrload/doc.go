// Command xfrload measures queries during zone transfers: it runs a dnsd
// binary with a large transferred zone (a hosts file of -records names)
// and a small local zone, asks the small zone at a steady rate, first
// alone and then while -transfers clients AXFR the large zone over and
// over, and prints the probe's latency percentiles of both phases, dnsd's
// largest RSS during the transfers and how the transfers ended:
//
//	idle p50=… p99=… | transfers p50=… p99=… max=… lost=N | rss=… MiB | axfr ok=N servfail=N failed=N
//
// -max_transfers sets limits.max_transfers (0 leaves the key out, for a
// binary that does not know it). Figures go to docs/performance.md.
package main
