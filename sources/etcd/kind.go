package etcd

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"

	"github.com/dnsd/dnsd/config"
	"github.com/dnsd/dnsd/internal/fsutil"
	"github.com/dnsd/dnsd/pipeline"
	"github.com/dnsd/dnsd/sources/kind"
)

// Kind is the etcd source kind. It holds the kind's process-lifetime
// state: its metrics (registered once), the salt of the hash that tells
// credentials apart in backend keys without putting them in logs, and the
// connections (one client and one prefix watch each), shared by every
// source with the same connection settings whatever their ttl, across
// zones and reloads.
type Kind struct {
	settings *config.Settings
	mu       sync.Mutex
	metrics  *Metrics
	salt     []byte
	conns    kind.Shared[*Backend]
}

var (
	_ kind.Kind           = (*Kind)(nil)
	_ config.WritableKind = (*Kind)(nil)
)

// NewKind returns the etcd kind.
func NewKind() *Kind { return &Kind{settings: describe()} }

// Name implements config.KindParser.
func (*Kind) Name() string { return "etcd" }

// DefaultFallthrough implements config.KindParser.
func (*Kind) DefaultFallthrough() bool { return true }

// Settings implements config.KindParser.
func (k *Kind) Settings() *config.Settings { return k.settings }

// Writable implements config.WritableKind: a source with updates: true.
func (*Kind) Writable(settings any) bool { return settings.(*Config).Updates }

// Build implements kind.Kind. Connections are keyed on every setting they
// depend on: endpoints (in any order), prefix, TLS files, username,
// password file, and a salted hash of the password's and TLS files'
// content (so a changed password or rotated certificate makes a new
// connection at the next reload). The registry backend is the connection
// plus the source's ttl: a reload that changes only ttl gets a new View of
// the same connection, built from the data it holds (no re-read of etcd,
// and it works during an etcd outage).
func (k *Kind) Build(_ context.Context, env *kind.Env, z config.Zone, settings any) (pipeline.Source, error) {
	c := settings.(*Config)
	password, err := readPassword(c.PasswordFile)
	if err != nil {
		return nil, err
	}
	tlsCfg, err := clientTLS(c)
	if err != nil {
		return nil, err
	}
	if env.DryRun {
		return writable(c, NewSource(nil, z.Names, c.TTL)), nil
	}
	k.mu.Lock()
	if k.salt == nil {
		k.salt = make([]byte, 32)
		_, _ = rand.Read(k.salt)
	}
	salt := k.salt
	k.mu.Unlock()
	connKey, err := backendKey(c, salt, password)
	if err != nil {
		return nil, err
	}
	name := strings.Join(c.Endpoints, ",") + " " + c.Prefix
	v, _, err := env.Acquire(connKey+" ttl="+c.TTL.String(), func() (any, io.Closer, error) {
		met, err := k.registerMetrics(env)
		if err != nil {
			return nil, nil, err
		}
		b, release, opened, err := k.conns.Acquire(connKey, func() (*Backend, error) {
			return Open(Options{
				Serials:   env.Serials,
				Bulk:      env.Bulk,
				Paced:     env.Serving,
				Name:      name,
				Endpoints: c.Endpoints,
				Prefix:    c.Prefix,
				TLS:       tlsCfg,
				Username:  c.Username,
				Password:  password,
				TTL:       c.TTL,
				Logger:    env.Logger,
				Metrics:   met,
			})
		})
		if err != nil {
			return nil, nil, err
		}
		view := b.View(c.TTL)
		return view, &kind.View[*View]{Value: view, Release: release, Opened: opened}, nil
	})
	if err != nil {
		return nil, err
	}
	return writable(c, NewViewSource(v.(*View), z.Names, c.TTL)), nil
}

// writable returns s, as a Writer when c says updates: true.
func writable(c *Config, s *Source) pipeline.Source {
	if c.Updates {
		return NewWriter(s)
	}
	return s
}

var _ pipeline.Syncer = (*View)(nil)

// Close closes every connection still open (process exit).
func (k *Kind) Close() error {
	k.conns.CloseAll()
	return nil
}

// registerMetrics creates and registers the kind's metrics on first use.
func (k *Kind) registerMetrics(env *kind.Env) (*Metrics, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.metrics == nil {
		m := NewMetrics()
		for _, col := range m.Collectors() {
			if err := env.Registerer.Register(col); err != nil {
				return nil, fmt.Errorf("etcd metrics: %w", err)
			}
		}
		k.metrics = m
	}
	return k.metrics, nil
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

// clientTLS builds the client TLS configuration: nil when no endpoint
// uses https://; system roots unless a CA is given.
func clientTLS(c *Config) (*tls.Config, error) {
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

// backendKey identifies an etcd connection. Secrets enter it only through
// a salted hash (the salt lives as long as the process), since backend
// keys appear in logs and metrics.
func backendKey(c *Config, salt []byte, password string) (string, error) {
	eps := slices.Clone(c.Endpoints)
	slices.Sort(eps)
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

// Connections reports how many etcd connections are open.
func (k *Kind) Connections() int { return k.conns.Len() }
