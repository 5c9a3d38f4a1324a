// Package gctune moves the garbage collector's target through dnsd's
// start-up when GOGC is not set in the environment.
//
// dnsd's heap is mostly long-lived source data and answering a query
// allocates next to nothing, so Go's default of 100 (the heap may grow to
// twice the live data) spends memory for little CPU. The phases:
//
//   - First until the first collection, so the in-memory sources load
//     without one (Go's first target is 4 MB times GOGC/100).
//   - Startup (Go's default) until every source has synced: the first sync
//     races the clock and its garbage is short-lived.
//   - Steady, SteadyAfter once every source has synced: the heap stays
//     within a fifth above the live data. Not at once, so the collection a
//     lower target starts does not run beside the first queries.
//   - While a burst of background work is under way (kind.Bulk: a reload,
//     a file read again, an etcd prefix read) the target leaves BulkRoom
//     above the live heap (within [Steady, Bulk]): at the steady target
//     new data would start a collection every few megabytes that every
//     allocation, the queries' too, has to help.
package gctune
