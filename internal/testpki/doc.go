// Package testpki makes throwaway certificate authorities and certificates
// for tests (DNS over TLS listeners, TLS upstreams, etcd with TLS). Keys are
// ECDSA P-256; certificates are valid from an hour ago for a day.
package testpki
