package etcd

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"

	"github.com/dnsd/dnsd/internal/health"
)

// Saying why: the backend's current problem (a short cause), found out
// within moments of a failed attempt and logged once per change of state.

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

// trouble records cause as the backend's current problem: one WARN line
// when etcd becomes unusable and one when the cause changes.
func (b *Backend) trouble(cause string) {
	if cause == "" || b.ctx.Err() != nil {
		return
	}
	msg := "etcd unreachable before the first sync; retrying"
	if b.synced.Load() {
		msg = "etcd unreachable; serving the last data"
	}
	b.health.Fail(msg, cause, "records", b.records.Load())
}

// healthy clears the backend's problem, logging the recovery once.
func (b *Backend) healthy() {
	if b.health.Failing() {
		b.health.Recover("etcd reachable again", "records", b.records.Load())
	}
}

// diagnoseAfter is how long a connection attempt may stay silent before
// the backend dials the endpoints itself to find out why.
const diagnoseAfter = time.Second

// diagnose dials every endpoint (and does the TLS handshake when etcd is
// reached over TLS) and returns the first failure, or "" when all answer.
func (b *Backend) diagnose() string {
	ctx, cancel := context.WithTimeout(b.ctx, 2*time.Second)
	defer cancel()
	var causes []string
	for _, ep := range b.opts.Endpoints {
		if err := probeEndpoint(ctx, ep, b.opts.TLS); err != nil {
			causes = append(causes, health.Cause(err))
		}
	}
	if len(causes) < len(b.opts.Endpoints) {
		return "" // one answers: the client will get there
	}
	return strings.Join(causes, "; ")
}

// reprobeEvery is how often the cause is asked again while the
// connection stays in TRANSIENT_FAILURE.
const reprobeEvery = 2 * time.Second

// waitState waits for conn to leave state st (false when the backend is
// closed). An attempt that stays CONNECTING longer than diagnoseAfter (a
// server that drops packets makes gRPC wait up to DialTimeout) is
// diagnosed meanwhile, so its cause is known in a few seconds. gRPC keeps
// a failed connection in TRANSIENT_FAILURE while it retries, whatever
// each retry fails with (a reset connection, then refused ones): the
// cause is asked again every reprobeEvery, so that it follows.
func (b *Backend) waitState(conn *grpc.ClientConn, st connectivity.State) bool {
	for st == connectivity.TransientFailure {
		if changed, open := b.waitAtMost(conn, st, reprobeEvery); changed || !open {
			return changed
		}
		b.trouble(b.probe(conn))
	}
	if st == connectivity.Connecting {
		if changed, open := b.waitAtMost(conn, st, diagnoseAfter); changed || !open {
			return changed
		}
		b.trouble(b.diagnose())
	}
	return conn.WaitForStateChange(b.ctx, st)
}

// waitAtMost waits up to d for conn to leave state st; open is false when
// the backend was closed meanwhile.
func (b *Backend) waitAtMost(conn *grpc.ClientConn, st connectivity.State, d time.Duration) (changed, open bool) {
	ctx, cancel := context.WithTimeout(b.ctx, d)
	defer cancel()
	if conn.WaitForStateChange(ctx, st) {
		return true, true
	}
	return false, b.ctx.Err() == nil
}

// probe makes one call that does not wait for the connection, and returns
// the cause it fails with ("" if it does not fail for a connection
// reason).
func (b *Backend) probe(conn *grpc.ClientConn) string {
	ctx, cancel := context.WithTimeout(b.ctx, 2*time.Second)
	defer cancel()
	_, err := pb.NewMaintenanceClient(conn).Status(ctx, &pb.StatusRequest{}, grpc.WaitForReady(false))
	if err == nil || b.ctx.Err() != nil {
		return ""
	}
	c := health.Cause(err)
	if health.Vague(c) {
		return b.diagnose()
	}
	return c
}
