// Package dynamic is dnsd's dynamic source kind (docs/sources/dynamic.md):
// a zone's records written by dynamic updates (RFC 2136), kept durably in
// one bbolt file per zone key under state_dir.
//
// A Backend owns one store file: it loads every record into an immutable
// index at open and serves lookups from it without a lock. An update holds
// the backend's update lock from BeginUpdate to Commit or Abort; Commit
// writes one fsync'd bbolt transaction, then publishes a new index with
// one atomic store and a higher serial: durable, then visible. The index
// is sharded by name, so a commit copies only the shards it touches.
//
// A Source is one zone entry's view over a Backend with its own ttl and
// record bound; the same zone key in two views, or across reloads, shares
// the backend.
package dynamic
