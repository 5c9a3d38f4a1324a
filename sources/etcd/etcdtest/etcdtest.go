package etcdtest

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/dnsd/dnsd/internal/grpctls"
	"github.com/dnsd/dnsd/internal/testpki"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"google.golang.org/grpc"
)

// Options configure a Server.
type Options struct {
	// TLS serves the client URL over https with a generated CA and server
	// certificate; clients must present a certificate signed by the CA. False: plain http.
	TLS bool
	// Auth enables etcd authentication with user Username / Password
	// (role root) after start. False: no authentication.
	Auth     bool
	Username string // required with Auth, else unused
	Password string // required with Auth, else unused
	// ClientPort is the client URL's port on 127.0.0.1; 0 picks a free one.
	ClientPort int
	// NoFsync skips fsync (etcd's unsafe-no-fsync): for tests that write
	// many keys and do not restart the server. False: etcd fsyncs.
	NoFsync bool
	// MaxRequestBytes is etcd's request limit (0: its default, 1.5 MiB),
	// which is also the size of the pieces a fragmented watch response is
	// sent in.
	MaxRequestBytes uint
}

// Server is a running (or stopped) embedded etcd.
type Server struct {
	t       testing.TB
	opts    Options
	dir     string
	data    string // the data directory
	token   string // initial-cluster-token ("": etcd's default)
	client  url.URL
	peer    url.URL
	etcd    *embed.Etcd
	Certs   *Certs // set with Options.TLS; nil unless Options.TLS
	running bool
	c       *clientv3.Client
}

// Certs are the PEM files generated for a TLS server, in the test's
// temporary directory.
type Certs struct {
	CA, ServerCert, ServerKey, ClientCert, ClientKey string // PEM files; "" unless Options.TLS
	ServerName                                       string // "" unless Options.TLS
}

// Start starts an etcd server on free loopback ports; it is stopped when
// the test ends.
func Start(t testing.TB, opts Options) *Server {
	t.Helper()
	s := &Server{t: t, opts: opts, dir: t.TempDir()}
	s.data = filepath.Join(s.dir, "data")
	scheme := "http"
	if opts.TLS {
		scheme = "https"
		s.Certs = writeCerts(t, s.dir)
	}
	port := opts.ClientPort
	if port == 0 {
		port = FreePort(t)
	}
	s.client = url.URL{Scheme: scheme, Host: fmt.Sprintf("127.0.0.1:%d", port)}
	s.peer = url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", FreePort(t))}
	s.Restart()
	t.Cleanup(s.Stop)
	if opts.Auth {
		s.enableAuth()
	}
	return s
}

// Endpoint is the client URL, e.g. http://127.0.0.1:40123.
func (s *Server) Endpoint() string { return s.client.String() }

// Stop stops the server; its data stays for Restart. Idempotent.
func (s *Server) Stop() {
	if !s.running {
		return
	}
	s.etcd.Close()
	<-s.etcd.Server.StopNotify()
	s.running = false
}

// Restart starts the server again (or for the first time) on the same
// ports and data directory.
func (s *Server) Restart() {
	s.t.Helper()
	if s.running {
		return
	}
	cfg := embed.NewConfig()
	cfg.Name = "dnsd-test"
	cfg.Dir = s.data
	if s.token != "" {
		cfg.InitialClusterToken = s.token
	}
	cfg.ListenClientUrls = []url.URL{s.client}
	cfg.AdvertiseClientUrls = []url.URL{s.client}
	cfg.ListenPeerUrls = []url.URL{s.peer}
	cfg.AdvertisePeerUrls = []url.URL{s.peer}
	cfg.InitialCluster = cfg.Name + "=" + s.peer.String()
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	cfg.LogLevel = "error"
	cfg.EnableGRPCGateway = false
	cfg.BcryptCost = 4 // bcrypt.MinCost: auth in tests need not be slow
	cfg.TickMs = 10
	cfg.ElectionMs = 50
	cfg.UnsafeNoFsync = s.opts.NoFsync
	if s.opts.MaxRequestBytes > 0 {
		cfg.MaxRequestBytes = s.opts.MaxRequestBytes
	}
	if s.Certs != nil {
		cfg.ClientTLSInfo.CertFile = s.Certs.ServerCert
		cfg.ClientTLSInfo.KeyFile = s.Certs.ServerKey
		cfg.ClientTLSInfo.TrustedCAFile = s.Certs.CA
		cfg.ClientTLSInfo.ClientCertAuth = true
	}
	var err error
	for try := 0; ; try++ {
		s.etcd, err = embed.StartEtcd(cfg)
		if err == nil || try == 50 {
			break
		}
		time.Sleep(100 * time.Millisecond) // the old listener may not be released yet
	}
	if err != nil {
		s.t.Fatalf("etcdtest: start: %v", err)
	}
	select {
	case <-s.etcd.Server.ReadyNotify():
	case <-time.After(30 * time.Second):
		s.etcd.Close()
		s.t.Fatal("etcdtest: server not ready after 30s")
	}
	s.running = true
}

// Replace stops the server and starts another cluster in its place at the
// same client URL: a new data directory, none of the old data or history.
// fill writes the new cluster's data first, through a client on a port of
// its own, so that clients of the old server find the new one as fill
// left it. etcd derives the cluster ID from token (its
// initial-cluster-token) with the member's name and peer URL: "" (the
// default token) keeps the old cluster ID, as restoring a snapshot with
// the same flags does; another token gives a new one.
func (s *Server) Replace(token string, fill func(*clientv3.Client)) {
	s.t.Helper()
	s.Stop()
	s.data, s.token = filepath.Join(s.t.TempDir(), "data"), token
	public := s.client
	s.client.Host = fmt.Sprintf("127.0.0.1:%d", FreePort(s.t))
	s.Restart()
	if fill != nil {
		c := s.Client()
		fill(c)
		_ = c.Close()
	}
	s.Stop()
	s.client = public
	s.Restart()
}

// Client returns a client for the server (as the root user when auth is
// on); it is closed when the test ends.
func (s *Server) Client() *clientv3.Client {
	s.t.Helper()
	cfg := clientv3.Config{Endpoints: []string{s.Endpoint()}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()}
	if s.Certs != nil {
		cfg.TLS = s.Certs.ClientTLS(s.t)
		// The certificate names etcd.test, not the address dialled.
		cfg.DialOptions = []grpc.DialOption{grpc.WithTransportCredentials(grpctls.Named(cfg.TLS))}
	}
	if s.opts.Auth {
		cfg.Username, cfg.Password = s.opts.Username, s.opts.Password
	}
	c, err := clientv3.New(cfg)
	if err != nil {
		s.t.Fatalf("etcdtest: client: %v", err)
	}
	s.t.Cleanup(func() { _ = c.Close() })
	return c
}

// Put writes key=value, failing the test on error.
func (s *Server) Put(key, value string) int64 {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := s.cli().Put(ctx, key, value)
	if err != nil {
		s.t.Fatalf("etcdtest: put %s: %v", key, err)
	}
	return r.Header.Revision
}

// Delete deletes key, failing the test on error.
func (s *Server) Delete(key string) {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := s.cli().Delete(ctx, key); err != nil {
		s.t.Fatalf("etcdtest: delete %s: %v", key, err)
	}
}

// Compact compacts the history up to the current revision.
func (s *Server) Compact() int64 {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := s.cli().Get(ctx, "compact-probe")
	if err != nil {
		s.t.Fatalf("etcdtest: get: %v", err)
	}
	if _, err := s.cli().Compact(ctx, r.Header.Revision, clientv3.WithCompactPhysical()); err != nil {
		s.t.Fatalf("etcdtest: compact: %v", err)
	}
	return r.Header.Revision
}

// cli is the server's own client, created once; it reconnects after a
// restart.
func (s *Server) cli() *clientv3.Client {
	if s.c == nil {
		s.c = s.Client()
	}
	return s.c
}

func (s *Server) enableAuth() {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	opts := s.opts
	s.opts.Auth = false // the first client works without credentials
	c := s.Client()
	s.opts = opts
	if _, err := c.RoleAdd(ctx, "root"); err != nil {
		s.t.Fatalf("etcdtest: role add: %v", err)
	}
	users := []string{"root"}
	if opts.Username != "root" {
		users = append(users, opts.Username)
	}
	for _, u := range users {
		if _, err := c.UserAdd(ctx, u, opts.Password); err != nil {
			s.t.Fatalf("etcdtest: user add: %v", err)
		}
		if _, err := c.UserGrantRole(ctx, u, "root"); err != nil {
			s.t.Fatalf("etcdtest: grant: %v", err)
		}
	}
	if _, err := c.AuthEnable(ctx); err != nil {
		s.t.Fatalf("etcdtest: auth enable: %v", err)
	}
}

// FreePort returns a TCP port free on 127.0.0.1 at the time of the call.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// ClientTLS is a client TLS configuration trusting the CA and presenting
// the client certificate.
func (c *Certs) ClientTLS(t testing.TB) *tls.Config {
	t.Helper()
	ca, err := os.ReadFile(c.CA)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	pair, err := tls.LoadX509KeyPair(c.ClientCert, c.ClientKey)
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}, ServerName: c.ServerName, MinVersion: tls.VersionTLS12}
}

// writeCerts generates a CA, a server certificate for the name etcd.test
// only (not for 127.0.0.1, the address clients dial: they must verify
// the name, as dnsd's server_name says), and a client certificate, as
// PEM files in dir.
func writeCerts(t testing.TB, dir string) *Certs {
	t.Helper()
	c := &Certs{
		CA:         filepath.Join(dir, "ca.crt"),
		ServerCert: filepath.Join(dir, "server.crt"),
		ServerKey:  filepath.Join(dir, "server.key"),
		ClientCert: filepath.Join(dir, "client.crt"),
		ClientKey:  filepath.Join(dir, "client.key"),
		ServerName: "etcd.test",
	}
	ca := testpki.NewCA(t, "dnsd test CA")
	server := ca.Issue(t, c.ServerName, x509.ExtKeyUsageServerAuth, c.ServerName)
	client := ca.Issue(t, "dnsd", x509.ExtKeyUsageClientAuth)
	testpki.WriteFile(t, c.CA, ca.CertPEM)
	testpki.WriteFile(t, c.ServerCert, server.CertPEM)
	testpki.WriteFile(t, c.ServerKey, server.KeyPEM)
	testpki.WriteFile(t, c.ClientCert, client.CertPEM)
	testpki.WriteFile(t, c.ClientKey, client.KeyPEM)
	return c
}
