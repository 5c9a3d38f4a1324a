package forward

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/dnsd/dnsd/config"
)

// Defaults of the forward block.
const (
	DefaultTimeout       = 2 * time.Second
	DefaultHealthCheck   = 500 * time.Millisecond
	DefaultMaxFails      = 2
	DefaultMaxConcurrent = 1000
)

// Config is a forward source's settings (its block in dnsd.yaml).
type Config struct {
	Upstreams     []UpstreamConfig
	TLSCA         string        // PEM bundle for tls:// upstreams ("" = system roots)
	Policy        string        // random (default) | round_robin | sequential
	Timeout       time.Duration // default 2s
	HealthCheck   time.Duration // default 500ms
	MaxFails      int           // default 2
	MaxConcurrent int           // default 1000
	Except        []string      // lower-case FQDNs
}

// UpstreamConfig is one upstream as written. ResolvConf marks the
// "resolv.conf" form, expanded when the source is built.
type UpstreamConfig struct {
	Proto      string // "udp" (plain or udp://: UDP with TCP retry), "tcp", "tls", "https"; "" for resolv.conf
	Addr       string // ip:port, normalised; default port 53, 853 for tls, 443 for https
	Path       string // https: the URL path, default /dns-query
	ServerName string // tls:// or https:// ...@name, lower case, no trailing dot; "" = verify the IP
	ResolvConf bool
	Raw        string
	Pos        config.Pos
}

// ParseSettings reads a forward block.
func (*Kind) ParseSettings(b *config.SourceBlock) any {
	f := &Config{Policy: "random", Timeout: DefaultTimeout, HealthCheck: DefaultHealthCheck, MaxFails: DefaultMaxFails, MaxConcurrent: DefaultMaxConcurrent}
	m, path := b.Mapping, b.Path
	vals, nodes, upath, present := m.Strings("upstreams")
	if !present {
		b.Errorf(nil, path, "upstreams is required (e.g. [\"1.1.1.1\", \"resolv.conf\"])")
	} else if un, _ := m.Get("upstreams"); un.Kind == yaml.SequenceNode && len(un.Content) == 0 {
		b.Errorf(un, upath, "no upstreams")
	}
	seen := map[string]int{}
	useTLS := false
	for i, s := range vals {
		ipath := config.IndexPath(upath, i)
		u, err := parseUpstream(s)
		if err != nil {
			b.Errorf(nodes[i], ipath, "bad upstream %q: %v", s, err)
			continue
		}
		u.Pos = b.Parser.Pos(nodes[i])
		id := u.Proto + "://" + u.Addr + u.Path + "@" + u.ServerName
		if u.ResolvConf {
			id = "resolv.conf"
		}
		if first, dup := seen[id]; dup {
			b.Errorf(nodes[i], ipath, "duplicate upstream %q (same as %q)", s, vals[first])
			continue
		}
		seen[id] = i
		useTLS = useTLS || u.Proto == "tls" || u.Proto == "https"
		f.Upstreams = append(f.Upstreams, u)
	}
	if cn := m.OptFile("tls_ca", &f.TLSCA); cn != nil && cn.Value != "" {
		if !useTLS && len(vals) > 0 {
			b.Errorf(cn, config.KeyPath(path, "tls_ca"), "tls_ca is set but no upstream uses tls:// or https://")
		}
		if f.TLSCA != "" {
			b.Parser.CheckCA(cn, config.KeyPath(path, "tls_ca"), f.TLSCA)
		}
	}
	m.Enum("policy", &f.Policy, "random", "round_robin", "sequential")
	m.Duration("timeout", &f.Timeout, config.Positive)
	m.Duration("health_check", &f.HealthCheck, config.Positive)
	m.Int("max_fails", &f.MaxFails, 1, config.MaxInt)
	m.Int("max_concurrent", &f.MaxConcurrent, 1, config.MaxInt)
	evals, enodes, epath, _ := m.Strings("except")
	for i, s := range evals {
		name, err := config.NormalizeName(s)
		if err != nil {
			b.Errorf(enodes[i], config.IndexPath(epath, i), "bad name: %v", err)
			continue
		}
		f.Except = append(f.Except, name)
	}
	return f
}

// parseUpstream parses "IP", "IP:port", "[v6]:port", "udp://...",
// "tcp://...", "tls://IP[:port][@servername]",
// "https://IP[:port][/path][@servername]" and "resolv.conf". The port
// defaults to 853 for tls://, 443 for https://, else 53; the https path
// to /dns-query.
func parseUpstream(s string) (UpstreamConfig, error) {
	u := UpstreamConfig{Raw: s, Proto: "udp"}
	if s == "resolv.conf" {
		u.ResolvConf = true
		u.Proto = ""
		return u, nil
	}
	rest := s
	if scheme, after, ok := strings.Cut(s, "://"); ok {
		switch scheme {
		case "udp", "tcp", "tls", "https":
			u.Proto, rest = scheme, after
		default:
			return u, fmt.Errorf("unknown scheme %q (known: udp://, tcp://, tls://, https://, none)", scheme+"://")
		}
	}
	if i := strings.LastIndexByte(rest, '@'); i >= 0 {
		if u.Proto != "tls" && u.Proto != "https" {
			return u, fmt.Errorf("@servername is only for tls:// and https:// upstreams")
		}
		name, err := config.NormalizeName(rest[i+1:])
		if err != nil {
			return u, fmt.Errorf("bad server name: %v", err)
		}
		u.ServerName = strings.TrimSuffix(name, ".")
		rest = rest[:i]
	}
	port := "53"
	switch u.Proto {
	case "tls":
		port = "853"
	case "https":
		port = "443"
		u.Path = "/dns-query"
		if i := strings.IndexByte(rest, '/'); i >= 0 {
			u.Path, rest = rest[i:], rest[:i]
			if strings.ContainsAny(u.Path, "?# \t") || strings.Contains(u.Path, "//") {
				return u, fmt.Errorf("bad URL path %q", u.Path)
			}
		}
	}
	var host string
	bracketed := strings.HasPrefix(rest, "[") && strings.HasSuffix(rest, "]")
	if ip, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(rest, "["), "]")); err == nil && (bracketed || !strings.HasPrefix(rest, "[")) {
		host = ip.String() // bare IP (a bare IPv6 address takes no port: use [v6]:port)
	} else {
		h, pt, err := net.SplitHostPort(rest)
		if err != nil {
			if !strings.Contains(rest, ":") {
				return u, fmt.Errorf("%q is not an IP address (upstreams are IP addresses: dnsd cannot resolve its own resolvers)", rest)
			}
			return u, fmt.Errorf("expected IP, IP:port or [IPv6]:port")
		}
		n, err := strconv.Atoi(pt)
		if err != nil || n < 1 || n > 65535 {
			return u, fmt.Errorf("port %q must be a number between 1 and 65535", pt)
		}
		ip, err := netip.ParseAddr(h)
		if err != nil {
			return u, fmt.Errorf("%q is not an IP address (upstreams are IP addresses: dnsd cannot resolve its own resolvers)", h)
		}
		host, port = ip.String(), strconv.Itoa(n)
	}
	u.Addr = net.JoinHostPort(host, port)
	return u, nil
}
