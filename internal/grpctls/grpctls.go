package grpctls

import (
	"context"
	"crypto/tls"
	"net"

	"google.golang.org/grpc/credentials"
)

// Named returns TLS credentials that verify every endpoint's certificate
// against tc.ServerName. gRPC's own TLS credentials overwrite ServerName
// with the host of the address they dial (an etcd client sets that for
// each endpoint), so a server reached by IP with a certificate for its
// DNS name could never be verified, and a wrong name went unnoticed.
func Named(tc *tls.Config) credentials.TransportCredentials {
	return named{credentials.NewTLS(tc), tc.ServerName}
}

type named struct {
	credentials.TransportCredentials
	name string
}

func (n named) ClientHandshake(ctx context.Context, _ string, c net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return n.TransportCredentials.ClientHandshake(ctx, n.name, c)
}

func (n named) Clone() credentials.TransportCredentials {
	return named{n.TransportCredentials.Clone(), n.name}
}
