// Package authority moves dnsd's zone data between dnsd and other name
// servers: zone transfers out (who may transfer which zone, TSIG, the
// per-version listing, the IXFR journal, splitting a listing into signed
// messages, limits.max_transfers) and NOTIFY to secondaries. UPDATE,
// transfers in from primaries and online signing belong here too. It
// reads zones through the pipeline (their SOA and content) and never
// touches a socket: the server hands it requests and writes what it
// returns; the daemon builds one Zones per generation and passes it on.
package authority
