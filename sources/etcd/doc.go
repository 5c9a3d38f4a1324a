// Package etcd is dnsd's etcd source (docs/sources/etcd.md): it
// serves SkyDNS-format records from one etcd prefix, kept in memory by a
// single prefix watch, so a query never reads etcd.
//
// A Backend is one etcd client and one watch: it lists the prefix at a
// revision R, then watches from R+1 (no gap, no duplicate), applying each
// event to an in-memory index in O(records of the touched name). A
// compacted watch re-lists; a lost connection is retried with backoff by
// the client, and the watch resumes where it stopped; meanwhile the last
// data keeps being served. At every reconnection and every CheckEvery the
// backend checks that etcd is still the one it read (cluster ID, a
// revision not below its own, the last key put as it applied it): an etcd
// that came back as another (a new cluster, a restored snapshot) is read
// into new indexes, swapped in whole. Until the first list has been applied the
// Backend is not synced and its Sources answer Failed (SERVFAIL). A
// Backend is shared by every Source with the same settings (zones,
// reloads); a Source is one zone's view of it.
package etcd
