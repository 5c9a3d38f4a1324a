package etcd

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/dnsd/dnsd/config"
)

// Defaults of the etcd block.
const (
	DefaultEndpoint    = "http://127.0.0.1:2379"
	DefaultPrefix      = "/skydns"
	DefaultTTL         = 5 * time.Minute
	DefaultSyncTimeout = 5 * time.Second
)

// Config is an etcd source's settings (its block in dnsd.yaml).
type Config struct {
	Endpoints    []string // default ["http://127.0.0.1:2379"]
	Prefix       string   // default "/skydns"; starts with "/", no trailing "/" (except "/" itself)
	TLS          TLSConfig
	Username     string
	PasswordFile string        // readable file; set together with Username
	TTL          time.Duration // default 5m, 0..7d, whole seconds
	SyncTimeout  time.Duration // default 5s
}

// TLSConfig is the client TLS of an etcd source. Files are resolved
// paths, checked readable (CA: at least one PEM certificate; Cert+Key: a
// matching pair); ServerName is lower case without a trailing dot.
type TLSConfig struct {
	CA         string
	Cert       string
	Key        string
	ServerName string
}

// ParseSettings reads an etcd block.
func (*Kind) ParseSettings(b *config.SourceBlock) any {
	e := &Config{Endpoints: []string{DefaultEndpoint}, Prefix: DefaultPrefix, TTL: DefaultTTL, SyncTimeout: DefaultSyncTimeout}
	m, path := b.Mapping, b.Path
	vals, nodes, epath, present := m.Strings("endpoints")
	if present {
		e.Endpoints = nil
		if len(vals) == 0 && len(nodes) == 0 {
			if en, _ := m.Get("endpoints"); en.Kind == yaml.SequenceNode && len(en.Content) == 0 {
				b.Errorf(en, epath, "no endpoints (omit endpoints for the default %q)", DefaultEndpoint)
			}
		}
	}
	https := false
	seen := map[string]bool{}
	for i, s := range vals {
		ipath := config.IndexPath(epath, i)
		if err := checkEndpoint(s); err != nil {
			b.Errorf(nodes[i], ipath, "bad endpoint %q: %v", s, err)
			continue
		}
		// http://h:2379/ is http://h:2379: one connection, one backend.
		s = strings.TrimSuffix(s, "/")
		if seen[s] {
			b.Errorf(nodes[i], ipath, "duplicate endpoint %q", s)
			continue
		}
		seen[s] = true
		https = https || strings.HasPrefix(s, "https://")
		e.Endpoints = append(e.Endpoints, s)
	}
	if pn := m.Str("prefix", &e.Prefix); pn != nil {
		if !strings.HasPrefix(e.Prefix, "/") {
			b.Errorf(pn, config.KeyPath(path, "prefix"), "prefix %q must start with \"/\"", e.Prefix)
		} else if e.Prefix != "/" {
			e.Prefix = strings.TrimRight(e.Prefix, "/")
			if e.Prefix == "" {
				e.Prefix = "/"
			}
		}
	}
	if m.Has("tls") {
		tn, tpath := m.Get("tls")
		if tm := b.Parser.Mapping(tn, tpath, "ca", "cert", "key", "server_name"); tm != nil {
			tm.OptFile("ca", &e.TLS.CA)
			cn := tm.OptFile("cert", &e.TLS.Cert)
			kn := tm.OptFile("key", &e.TLS.Key)
			if sn := tm.Str("server_name", &e.TLS.ServerName); sn != nil && e.TLS.ServerName != "" {
				if name, err := config.NormalizeName(e.TLS.ServerName); err != nil {
					b.Errorf(sn, config.KeyPath(tpath, "server_name"), "bad server name: %v", err)
				} else {
					e.TLS.ServerName = strings.TrimSuffix(name, ".")
				}
			}
			certSet, keySet := cn != nil && cn.Value != "", kn != nil && kn.Value != ""
			if certSet != keySet {
				b.Errorf(m.KeyNode("tls"), tpath, "cert and key go together: set both (client certificate authentication) or neither")
			}
			if e.TLS.Cert != "" && e.TLS.Key != "" {
				b.Parser.CheckKeyPair(m.KeyNode("tls"), tpath, e.TLS.Cert, e.TLS.Key)
			}
			if e.TLS.CA != "" {
				b.Parser.CheckCA(tm.KeyNode("ca"), config.KeyPath(tpath, "ca"), e.TLS.CA)
			}
			if (e.TLS != TLSConfig{}) && !https {
				b.Errorf(m.KeyNode("tls"), tpath, "tls is set but no endpoint uses https://")
			}
		}
	}
	if m.Has("password") {
		b.Errorf(m.KeyNode("password"), config.KeyPath(path, "password"), "passwords are never inline: use password_file")
	}
	un := m.Str("username", &e.Username)
	pn := m.OptFile("password_file", &e.PasswordFile)
	pwSet := pn != nil && pn.Value != ""
	switch {
	case e.Username != "" && !pwSet:
		b.Errorf(un, config.KeyPath(path, "username"), "username needs password_file")
	case e.Username == "" && pwSet:
		b.Errorf(pn, config.KeyPath(path, "password_file"), "password_file needs username")
	}
	m.Duration("ttl", &e.TTL, config.DurLimit{Max: config.MaxTTL, Seconds: true})
	m.Duration("sync_timeout", &e.SyncTimeout, config.Positive)
	return e
}

// checkEndpoint validates an etcd client URL: http(s)://host[:port].
func checkEndpoint(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("not a URL")
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("expected http://host:port or https://host:port")
	case u.User != nil:
		return fmt.Errorf("credentials in the URL: use username and password_file")
	case u.Hostname() == "":
		return fmt.Errorf("no host")
	case u.Path != "" && u.Path != "/", u.RawQuery != "", u.Fragment != "":
		return fmt.Errorf("a client URL has no path, query or fragment")
	}
	if port := u.Port(); port != "" {
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("port %q must be a number between 1 and 65535", port)
		}
	}
	return nil
}

// SyncWait implements config.SyncWaiter.
func (c *Config) SyncWait() time.Duration { return c.SyncTimeout }
