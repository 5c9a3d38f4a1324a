// Package forward is dnsd's forward source (docs/sources/forward.md): a pool of
// upstream resolvers (UDP with TCP retry, TCP, DNS over TLS) with
// policies, failover, health checks and connection reuse, and the
// process-wide response cache (TTL bounds, negative caching, serve-stale,
// prefetch, coalescing of identical misses).
package forward
