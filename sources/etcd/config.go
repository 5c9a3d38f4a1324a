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

// DefaultEndpoint is the endpoint of an etcd source that names none.
const DefaultEndpoint = "http://127.0.0.1:2379"

// Config is an etcd source's settings (its block in dnsd.yaml).
type Config struct {
	// Endpoints are the client URLs; default ["http://127.0.0.1:2379"].
	Endpoints []string `dnsd:"endpoints" default:"http://127.0.0.1:2379" minitems:"1" doc:"etcd client URLs." item:"http://host:port or https://host:port." pattern:"^https?://[^/@?#\\s]+/?$"`
	// Prefix is the key prefix: default "/skydns"; it starts with "/",
	// no trailing "/" (except "/" itself).
	Prefix string `dnsd:"prefix" default:"/skydns" pattern:"^/" doc:"Key prefix."`
	// TLS is the client TLS of https:// endpoints; default none.
	TLS TLSConfig `dnsd:"tls" doc:"TLS for https:// endpoints."`
	// Username is the user name; default "": no authentication.
	Username string `dnsd:"username" doc:"User name; needs password_file."`
	// PasswordFile is a readable file, set together with Username;
	// default "".
	PasswordFile string `dnsd:"password_file,file" doc:"File holding the password (never inline)."`
	// TTL of records without their own: default 5m, 0..7d, whole seconds.
	TTL time.Duration `dnsd:"ttl" default:"5m" dur:"ttl" doc:"TTL of records without their own (whole seconds)."`
	// SyncTimeout is how long readiness and a reload wait for the first
	// sync: default 5s, > 0.
	SyncTimeout time.Duration `dnsd:"sync_timeout" default:"5s" dur:"positive" doc:"How long start-up readiness and a reload wait for the first sync."`
	// Updates makes the source the zone's writable source: dynamic
	// updates write SkyDNS keys under the prefix. Default false.
	Updates bool `dnsd:"updates" doc:"Dynamic updates (RFC 2136) of the zone write SkyDNS keys here, one etcd transaction each."`
}

// TLSConfig is the client TLS of an etcd source. Files are resolved
// paths, checked readable (CA: at least one PEM certificate; Cert+Key: a
// matching pair); ServerName is lower case without a trailing dot.
type TLSConfig struct {
	// CA is the PEM CA bundle; default "": the system roots.
	CA string `dnsd:"ca,file" doc:"PEM CA bundle (default: system roots)."`
	// Cert is the client certificate (with Key); default "": none.
	Cert string `dnsd:"cert,file" doc:"Client certificate (with key)."`
	// Key is the client key (with Cert); default "": none.
	Key string `dnsd:"key,file" doc:"Client key (with cert)."`
	// ServerName is the name verified in the server's certificate;
	// default "": the endpoint's host.
	ServerName string `dnsd:"server_name" doc:"Name to verify in the server's certificate."`
}

// describe describes the etcd block. "password" is known only to say
// "use password_file".
func describe() *config.Settings {
	return config.NewSettings(config.Description[Config]{
		Schema: config.Schema{
			Description: "SkyDNS records under an etcd prefix.", Type: config.TObject,
			DependentRequired: map[string][]string{"username": {"password_file"}, "password_file": {"username"}},
		},
		Fields: map[string]func(*config.Block, *Config){"endpoints": parseEndpoints, "prefix": parsePrefix},
		Unlisted: map[string]func(*config.Block, *Config){"password": func(b *config.Block, _ *Config) {
			b.Errorf(b.KeyNode("password"), config.KeyPath(b.Path, "password"), "passwords are never inline: use password_file")
		}},
		Check: check,
	})
}

// parseEndpoints reads endpoints: http(s)://host[:port] URLs, no
// duplicates.
func parseEndpoints(b *config.Block, e *Config) {
	vals, nodes, epath, present := b.Strings("endpoints")
	if present {
		e.Endpoints = nil
		if len(vals) == 0 && len(nodes) == 0 {
			if en, _ := b.Get("endpoints"); en.Kind == yaml.SequenceNode && len(en.Content) == 0 {
				b.Errorf(en, epath, "no endpoints (omit endpoints for the default %q)", DefaultEndpoint)
			}
		}
	}
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
		e.Endpoints = append(e.Endpoints, s)
	}
}

// parsePrefix reads prefix: it starts with "/"; trailing ones are cut.
func parsePrefix(b *config.Block, e *Config) {
	if pn := b.Str("prefix", &e.Prefix); pn != nil {
		if !strings.HasPrefix(e.Prefix, "/") {
			b.Errorf(pn, config.KeyPath(b.Path, "prefix"), "prefix %q must start with \"/\"", e.Prefix)
		} else if e.Prefix != "/" {
			e.Prefix = strings.TrimRight(e.Prefix, "/")
			if e.Prefix == "" {
				e.Prefix = "/"
			}
		}
	}
}

// check checks tls (a server name, a key pair, a CA, an https://
// endpoint to use them) and that username and password_file go together.
func check(b *config.Block, e *Config) {
	path := b.Path
	if tm := b.Sub("tls"); tm != nil {
		_, tpath := b.Get("tls")
		if sn, spath := tm.Get("server_name"); sn != nil && e.TLS.ServerName != "" {
			if name, err := config.NormalizeName(e.TLS.ServerName); err != nil {
				b.Errorf(sn, spath, "bad server name: %v", err)
			} else {
				e.TLS.ServerName = strings.TrimSuffix(name, ".")
			}
		}
		cn, _ := tm.Get("cert")
		kn, _ := tm.Get("key")
		certSet, keySet := cn != nil && cn.Value != "", kn != nil && kn.Value != ""
		if certSet != keySet {
			b.Errorf(b.KeyNode("tls"), tpath, "cert and key go together: set both (client certificate authentication) or neither")
		}
		if e.TLS.Cert != "" && e.TLS.Key != "" {
			b.Parser.CheckKeyPair(b.KeyNode("tls"), tpath, e.TLS.Cert, e.TLS.Key)
		}
		if e.TLS.CA != "" {
			b.Parser.CheckCA(tm.KeyNode("ca"), config.KeyPath(tpath, "ca"), e.TLS.CA)
		}
		https := false
		for _, s := range e.Endpoints {
			https = https || strings.HasPrefix(s, "https://")
		}
		if (e.TLS != TLSConfig{}) && !https {
			b.Errorf(b.KeyNode("tls"), tpath, "tls is set but no endpoint uses https://")
		}
	}
	un, _ := b.Get("username")
	pn, _ := b.Get("password_file")
	pwSet := pn != nil && pn.Value != ""
	switch {
	case e.Username != "" && !pwSet:
		b.Errorf(un, config.KeyPath(path, "username"), "username needs password_file")
	case e.Username == "" && pwSet:
		b.Errorf(pn, config.KeyPath(path, "password_file"), "password_file needs username")
	}
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
