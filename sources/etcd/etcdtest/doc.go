// Package etcdtest runs a real single-member etcd server inside a test
// process (go.etcd.io/etcd/server/v3/embed) on loopback ports and a
// temporary data directory, for the etcd source's tests and the
// end-to-end tests. It is imported by tests only.
package etcdtest
