// Package server is dnsd's DNS front end: it owns the UDP, TCP and
// DNS-over-TLS sockets, speaks the wire protocol (parsing, the FORMERR,
// NOTIMP, REFUSED and BADVERS rules, EDNS0, truncation), protects the
// daemon (ACL, per-client UDP rate limit, TCP connection limits and
// timeouts) and hands every valid query to a pipeline.Resolver, every
// zone transfer and signed query to an authority.Transferer. It knows
// nothing about zones or sources.
package server
