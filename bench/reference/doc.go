// Command reference is the benchmark's yardstick: a trivial miekg/dns server
// that answers every query with one fixed A record and does no lookup.
// dnsd's benchmarks compare every server's cost per answer with this one's.
// It serves UDP on -addr, and optionally TCP (-tcp) and DNS over TLS (-tls
// with -cert and -key).
package main
