// Package pipeline compiles dnsd's zones into a lookup table and answers
// queries from each zone's ordered sources. It owns all DNS logic that is
// common to every source: type selection, CNAME chasing, NODATA versus
// NXDOMAIN, SOA in negative answers, apex SOA/NS, SRV additional records,
// minimal ANY answers, wildcards and fallthrough (docs/configuration.md,
// zones and wildcards).
package pipeline
