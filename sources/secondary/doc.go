// Package secondary is dnsd's secondary source (docs/sources/secondary.md):
// a copy of a zone transferred from its primaries (BIND, Knot, another
// dnsd) by AXFR, then kept current by IXFR (AXFR when the primary cannot
// answer it) when the primary's SOA serial rises, polled every SOA
// refresh, retried every SOA retry and at once on a NOTIFY from a listed
// primary. The copy is kept in state_dir, so that a restart serves it at
// once; past the SOA expire without reaching any primary the zone answers
// SERVFAIL.
package secondary
