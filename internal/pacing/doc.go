// Package pacing lets a long piece of background work — a reload's read,
// parse and index build — take turns with the server when the process
// runs on one processor.
//
// With GOMAXPROCS 1 (a server pinned to one core, a one-CPU VM) such work
// holds the only processor for tens of milliseconds (a 100,000-line hosts
// file: ~30 ms), and the queries that arrive meanwhile wait: the network
// poller runs only when nothing else is runnable, or when the runtime's
// monitor polls (every 10 ms). runtime.Gosched does not help: it runs what
// else is runnable, then the work again, and never the poller. A sleep
// long enough to outlast the scheduler's next look for work does: the
// processor goes idle and the poller hands it the queries that came. With
// nothing to serve the sleep lasts up to a millisecond (the timer's
// resolution), so idle work takes up to twice as long; with two or more
// processors the queries have one of their own and nothing paces. A start
// is never paced: nothing is served yet.
package pacing
