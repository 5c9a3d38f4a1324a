// Package dnstest is the DNS test vocabulary every package of dnsd shares:
// real upstream servers on loopback, queries, the one-line rendering of an
// answer that tests compare, and waiting for a condition. Nothing here is
// a fake: Upstream is a miekg/dns server on real sockets.
package dnstest
