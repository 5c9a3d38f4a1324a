package sources

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/dnsd/dnsd/config"
	"github.com/dnsd/dnsd/internal/fsutil"
	"github.com/dnsd/dnsd/pipeline"
	"github.com/dnsd/dnsd/sources/etcd"
)

// etcdState is the etcd kind's process-lifetime state: its metrics,
// registered once, the salt of the hash that tells credentials apart in
// backend keys without putting them in logs, and the connections (one
// client and one prefix watch each), shared by every source with the same
// connection settings whatever their ttl, across zones and reloads.
// Guarded by Registry.mu.
type etcdState struct {
	metrics *etcd.Metrics
	salt    []byte
	conns   map[string]*etcdConn
}

type etcdConn struct {
	key     string
	refs    int
	backend *etcd.Backend
}

func (st *etcdState) close() {}

// etcdView is the registry's backend value for an etcd source: a View
// with the source's ttl over a shared connection.
type etcdView struct {
	*etcd.View
	releaser
}

func (v *etcdView) Close() error { return v.closeThen(v.View) }

var _ pipeline.Syncer = (*etcdView)(nil)

// etcdConnRelease drops a reference on a connection and closes it when
// it was the last.
func (r *Registry) etcdConnRelease(c *etcdConn) {
	r.mu.Lock()
	c.refs--
	last := c.refs == 0 && r.etcd.conns[c.key] == c
	if last {
		delete(r.etcd.conns, c.key)
	}
	r.mu.Unlock()
	if last {
		_ = c.backend.Close()
		r.logger.Info("etcd connection closed", "key", c.key)
	}
}

// etcdSource builds an etcd source. Connections are keyed on every setting
// they depend on: endpoints (in any order), prefix, TLS files, username,
// password file, and a salted hash of the password's and TLS files'
// content (so a changed password or rotated certificate makes a new
// connection at the next reload). The registry backend is the connection
// plus the source's ttl: a reload that changes only ttl gets a new View of
// the same connection, built from the data it holds (no re-read of etcd,
// and it works during an etcd outage).
func (r *Registry) etcdSource(ctx context.Context, cfg *config.Config, z config.Zone, c *config.Etcd, set *Set) (pipeline.Source, error) {
	password, err := readPassword(c.PasswordFile)
	if err != nil {
		return nil, err
	}
	tlsCfg, err := etcdTLS(c)
	if err != nil {
		return nil, err
	}
	if r.dryRun {
		return etcd.NewSource(nil, z.Names, c.TTL), nil
	}
	r.mu.Lock()
	if r.etcd.salt == nil {
		r.etcd.salt = make([]byte, 32)
		_, _ = rand.Read(r.etcd.salt)
	}
	salt := r.etcd.salt
	r.mu.Unlock()
	connKey, err := etcdKey(c, salt, password)
	if err != nil {
		return nil, err
	}
	key := connKey + " ttl=" + c.TTL.String()
	name := strings.Join(c.Endpoints, ",") + " " + c.Prefix
	v, _, err := r.acquire(set, config.KindEtcd, key, func() (any, io.Closer, error) {
		// Under r.mu (acquire holds it).
		if r.etcd.metrics == nil {
			m := etcd.NewMetrics()
			for _, col := range m.Collectors() {
				if err := r.registerer.Register(col); err != nil {
					return nil, nil, fmt.Errorf("etcd metrics: %w", err)
				}
			}
			r.etcd.metrics = m
		}
		if conn := r.etcd.conns[connKey]; conn != nil {
			conn.refs++
			view := &etcdView{View: conn.backend.View(c.TTL), releaser: releaser{release: func() { r.etcdConnRelease(conn) }}}
			return view, view, nil
		}
		b, err := etcd.Open(etcd.Options{
			Serials:   &r.serials,
			Name:      name,
			Endpoints: c.Endpoints,
			Prefix:    c.Prefix,
			TLS:       tlsCfg,
			Username:  c.Username,
			Password:  password,
			TTL:       c.TTL,
			Logger:    r.logger,
			Metrics:   r.etcd.metrics,
		})
		if err != nil {
			return nil, nil, err
		}
		if r.etcd.conns == nil {
			r.etcd.conns = make(map[string]*etcdConn)
		}
		conn := &etcdConn{key: connKey, refs: 1, backend: b}
		r.etcd.conns[connKey] = conn
		view := &etcdView{View: b.View(c.TTL), releaser: releaser{release: func() { r.etcdConnRelease(conn) }}}
		return view, view, nil
	})
	if err != nil {
		return nil, err
	}
	return etcd.NewViewSource(v.(*etcdView).View, z.Names, c.TTL), nil
}

// readPassword reads password_file: its content less one trailing line
// break. The password is never logged.
func readPassword(path string) (string, error) {
	if path == "" {
		return "", nil
	}
	b, err := fsutil.ReadSmall(path)
	if err != nil {
		return "", fmt.Errorf("password_file: %w", err)
	}
	s := strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
	if s == "" {
		return "", fmt.Errorf("password_file %s is empty", path)
	}
	return s, nil
}

// etcdTLS builds the client TLS configuration: nil when no endpoint uses
// https://; system roots unless a CA is given.
func etcdTLS(c *config.Etcd) (*tls.Config, error) {
	https := false
	for _, ep := range c.Endpoints {
		https = https || strings.HasPrefix(ep, "https://")
	}
	if !https {
		return nil, nil
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: c.TLS.ServerName}
	if c.TLS.CA != "" {
		pem, err := fsutil.ReadSmall(c.TLS.CA)
		if err != nil {
			return nil, fmt.Errorf("tls.ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("tls.ca %s: no PEM certificate", c.TLS.CA)
		}
		tc.RootCAs = pool
	}
	if c.TLS.Cert != "" || c.TLS.Key != "" {
		pair, err := fsutil.LoadKeyPair(c.TLS.Cert, c.TLS.Key)
		if err != nil {
			return nil, fmt.Errorf("tls.cert/tls.key: %w", err)
		}
		tc.Certificates = []tls.Certificate{pair}
	}
	return tc, nil
}

// etcdKey identifies an etcd backend. Secrets enter it only through a
// salted hash (the salt lives as long as the process), since backend keys
// appear in logs and metrics.
func etcdKey(c *config.Etcd, salt []byte, password string) (string, error) {
	eps := append([]string(nil), c.Endpoints...)
	sort.Strings(eps)
	h := sha256.New()
	h.Write(salt)
	h.Write([]byte(password))
	for _, f := range []string{c.TLS.CA, c.TLS.Cert, c.TLS.Key} {
		h.Write([]byte{0})
		if f == "" {
			continue
		}
		b, err := fsutil.ReadSmall(f)
		if err != nil {
			return "", fmt.Errorf("tls: %w", err)
		}
		h.Write(b)
	}
	return fmt.Sprintf("endpoints=%s prefix=%s tls=%s|%s|%s|%s user=%s password_file=%s secrets=%s",
		strings.Join(eps, ","), c.Prefix, c.TLS.CA, c.TLS.Cert, c.TLS.Key, c.TLS.ServerName,
		c.Username, c.PasswordFile, hex.EncodeToString(h.Sum(nil))[:16]), nil
}
