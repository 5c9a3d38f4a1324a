package forward

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/miekg/dns"
)

// DNS over HTTPS upstreams (RFC 8484): https://IP[:port]/path@servername.
// Queries are POSTed over HTTP/2 (net/http, HTTP/2 only), on one
// connection per upstream that carries every concurrent query and is
// reused until the server closes it; the certificate is verified against
// tls_ca (or the system roots) and servername (or the IP). Timeouts,
// failover, health checks and max_fails work as for the other transports.

// dohClient is an https upstream's HTTP/2 client.
type dohClient struct {
	url       string
	transport *http.Transport
	client    *http.Client
}

func newDoHClient(u *upstream) *dohClient {
	cfg := u.tls.Clone()
	cfg.NextProtos = []string{"h2"}
	var protos http.Protocols
	protos.SetHTTP2(true)
	t := &http.Transport{
		// The upstream is an IP: dial it, whatever the URL's host says.
		DialTLSContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			d := &tls.Dialer{NetDialer: &net.Dialer{}, Config: cfg}
			return d.DialContext(ctx, network, u.Addr)
		},
		Protocols: &protos,
		HTTP2: &http.HTTP2Config{
			SendPingTimeout: 30 * time.Second, // ping an idle connection, drop it if dead
			PingTimeout:     5 * time.Second,
		},
	}
	return &dohClient{
		url:       "https://" + u.Addr + u.Path,
		transport: t,
		client:    &http.Client{Transport: t},
	}
}

// exchange POSTs wire with ID 0 (RFC 8484 §4.1: HTTP pairs the response
// with its request, and ID 0 lets HTTP caches share answers) and returns
// the matching response, by the deadline dl.
func (c *dohClient) exchange(ctx context.Context, wire []byte, k Key, dl time.Time) (*dns.Msg, error) {
	ctx, cancel := context.WithDeadline(ctx, dl)
	defer cancel()
	// The body is a copy: the HTTP/2 transport may still be reading it
	// after Do returns (a timeout, a failover), while the caller reuses
	// wire for its next attempt.
	body := bytes.Clone(wire)
	const id = 0
	body[0], body[1] = 0, 0
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/dns-message")
	req.Header.Set("Accept", "application/dns-message")
	resp, err := c.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
		return nil, fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, dns.MaxMsgSize+1))
	if err != nil {
		return nil, err
	}
	m := match(b, id, k)
	if m == nil {
		return nil, errMalformed
	}
	return m, nil
}
