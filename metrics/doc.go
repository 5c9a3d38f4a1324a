// Package metrics defines dnsd's Prometheus metrics on a registry of its
// own; nothing is registered globally. Every label value is bounded by the
// configuration, never by what clients send: query types outside the set
// dnsd knows by name are "other", queries that matched no zone are "none",
// response codes without a name are "other".
package metrics
