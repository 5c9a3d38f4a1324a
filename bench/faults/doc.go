// Command faults is the load-with-faults scenario: it runs a dnsd binary
// against an etcd embedded in this process, a hosts file and an upstream
// resolver of its own, holds a steady query rate for a while, and
// meanwhile reloads dnsd (SIGHUP) again and again, rotates the hosts file
// (atomic rename and in-place rewrite, in turn), kills and restarts etcd,
// and black-holes the upstream for a period. It prints one result line:
//
//	answered=N failed=N (servfail=N timeout=N other=N) wrong=N
//
// and up to ten examples of each kind of failure. The goal is 0 / 0.
//
// An answer is *wrong* when it is not one the name held at some moment
// between freshness before the query was sent and the moment its answer
// arrived: changes are allowed to take that long to reach answers (hosts
// debounce, etcd reconnection after an outage), and an answer older than
// that is wrong, as is NXDOMAIN or NODATA for a name that always exists.
// Any SERVFAIL, REFUSED or a query unanswered within the client timeout is
// *failed*. bench/faults.sh builds dnsd and runs it; faults_test.go is a
// short smoke run.
package main
