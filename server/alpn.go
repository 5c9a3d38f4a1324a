package server

import (
	"crypto/tls"
	"slices"
)

// alpnDoT is the ALPN protocol of DNS over TLS (RFC 7858, RFC 9103):
// zone transfers over TLS (XoT) clients such as BIND's and Knot's offer it
// and fail the handshake when the server does not select it.
const alpnDoT = "dot"

// dotTLS returns the configuration the tls:// listeners hand to their
// handshakes: base, selecting ALPN "dot" for a client that offers it. A
// client that offers only other protocols still gets its handshake,
// without ALPN, as before: strict selection would turn away DoT clients
// that send a wrong or a generic list, for no gain in safety.
func dotTLS(base *tls.Config) *tls.Config {
	if base == nil {
		return nil
	}
	withALPN := base.Clone()
	withALPN.NextProtos = []string{alpnDoT}
	out := base.Clone()
	out.GetConfigForClient = func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
		if slices.Contains(hello.SupportedProtos, alpnDoT) {
			return withALPN, nil
		}
		return nil, nil
	}
	return out
}
