package etcd

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/url"
)

// probeEndpoint dials an etcd endpoint (an http:// or https:// URL) and,
// with tlsCfg, completes a TLS handshake: it tells "connection refused"
// and certificate problems apart without etcd's client, which only says
// that its calls time out.
func probeEndpoint(ctx context.Context, endpoint string, tlsCfg *tls.Config) error {
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" {
		return fmt.Errorf("endpoint %q: not a URL", endpoint)
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", u.Host)
	if err != nil {
		return err
	}
	defer conn.Close()
	if u.Scheme != "https" || tlsCfg == nil {
		return nil
	}
	cfg := tlsCfg.Clone()
	if cfg.ServerName == "" {
		cfg.ServerName = u.Hostname()
	}
	return tls.Client(conn, cfg).HandshakeContext(ctx)
}
