// Package daemon runs dnsd: it loads dnsd.yaml, wires the sources, the
// pipeline, the transferred zones (authority), the DNS server and the
// HTTP endpoints together, and applies reloads (SIGHUP) and graceful
// stops (SIGTERM/SIGINT) as docs/operations.md describes.
package daemon
