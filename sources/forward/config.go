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

// Config is a forward source's settings (its block in dnsd.yaml).
type Config struct {
	// Upstreams are the resolvers asked, in the order written; required.
	Upstreams []UpstreamConfig `dnsd:"upstreams,required" minitems:"1" doc:"Upstream resolvers: IP, IP:port, [IPv6]:port, udp://, tcp://, tls://IP[:port][@servername], https://IP[:port][/path][@servername], or resolv.conf."`
	// TLSCA is the PEM bundle for tls:// and https:// upstreams; default
	// "": the system roots.
	TLSCA string `dnsd:"tls_ca,file" doc:"PEM CA bundle for tls:// and https:// upstreams (default: system roots)."`
	// Policy picks an upstream: random (default) | round_robin |
	// sequential.
	Policy string `dnsd:"policy" default:"random" enum:"random,round_robin,sequential" doc:"How an upstream is picked."`
	// Timeout is per attempt: default 2s.
	Timeout time.Duration `dnsd:"timeout" default:"2s" dur:"positive" doc:"Per attempt."`
	// HealthCheck is the probe interval of a failed upstream: default
	// 500ms.
	HealthCheck time.Duration `dnsd:"health_check" default:"500ms" dur:"positive" doc:"Probe interval of an upstream after a failure."`
	// MaxFails is the consecutive failures before an upstream is down:
	// default 2.
	MaxFails int `dnsd:"max_fails" default:"2" min:"1" doc:"Consecutive failures before an upstream is down."`
	// MaxConcurrent is the forwards in flight: default 1000.
	MaxConcurrent int `dnsd:"max_concurrent" default:"1000" min:"1" doc:"Forwards in flight; over it: REFUSED."`
	// Except are lower-case FQDNs not forwarded; default none.
	Except []string `dnsd:"except" doc:"Names under these are not forwarded." item:"A domain name."`
}

// describe describes the forward block.
func describe() *config.Settings {
	return config.NewSettings(config.Description[Config]{
		Schema: config.Schema{Description: "Upstream resolvers with a health-checked pool and the response cache.", Type: "object"},
		Items: map[string]*config.Schema{
			"upstreams": config.PatternSchema("An upstream.", `^(resolv\.conf|((udp|tcp|tls)://)?(\[[0-9A-Fa-f:.]+\]|[0-9A-Fa-f:.]+)(:[0-9]+)?(@(`+config.NamePattern+`))?|https://(\[[0-9A-Fa-f:.]+\]|[0-9A-Fa-f:.]+)(:[0-9]+)?(/[^?#@ ]*)?(@(`+config.NamePattern+`))?)$`),
			"except":    config.PatternSchema("A domain name.", `^(`+config.NamePattern+`)$`),
		},
		Fields: map[string]func(*config.Block, *Config){"upstreams": parseUpstreams, "tls_ca": parseTLSCA, "except": parseExcept},
	})
}

// UpstreamConfig is one upstream as written. ResolvConf marks the
// "resolv.conf" form, expanded when the source is built.
type UpstreamConfig struct {
	Proto      string     // "udp" (plain or udp://: UDP with TCP retry), "tcp", "tls", "https"; "" for resolv.conf
	Addr       string     // ip:port, normalised; default port 53, 853 for tls, 443 for https
	Path       string     // https: the URL path, default /dns-query
	ServerName string     // tls:// or https:// ...@name, lower case, no trailing dot; "" = verify the IP
	ResolvConf bool       // false: an upstream address
	Raw        string     // the upstream as written; never empty
	Pos        config.Pos // where the upstream is written; always set
}

// CacheKey is the top-level key of the forward kind's block: the
// response cache every forward source shares.
const CacheKey = "cache"

// describeCache describes the cache block.
func describeCache() *config.Settings {
	return config.NewSettings(config.Description[CacheConfig]{
		Schema: config.Schema{Description: "The response cache of forward sources.", Type: config.TObject},
		Check: func(b *config.Block, c *CacheConfig) {
			if c.MinTTL > c.MaxTTL {
				at, key := b.Get("min_ttl")
				if at == nil {
					at, key = b.Get("max_ttl")
				}
				b.Errorf(at, key, "min_ttl (%s) is greater than max_ttl (%s)", c.MinTTL, c.MaxTTL)
			}
		},
	})
}

// parseUpstreams reads upstreams (see parseUpstream), no duplicates.
func parseUpstreams(b *config.Block, f *Config) {
	vals, nodes, upath, present := b.Strings("upstreams")
	if !present {
		b.Errorf(nil, b.Path, "upstreams is required (e.g. [\"1.1.1.1\", \"resolv.conf\"])")
	} else if un, _ := b.Get("upstreams"); un.Kind == yaml.SequenceNode && len(un.Content) == 0 {
		b.Errorf(un, upath, "no upstreams")
	}
	seen := map[string]int{}
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
		f.Upstreams = append(f.Upstreams, u)
	}
}

// parseTLSCA reads tls_ca: a readable file of PEM certificates, for
// tls:// and https:// upstreams.
func parseTLSCA(b *config.Block, f *Config) {
	cn := b.OptFile("tls_ca", &f.TLSCA)
	if cn == nil || cn.Value == "" {
		return
	}
	useTLS := false
	for _, u := range f.Upstreams {
		useTLS = useTLS || u.Proto == "tls" || u.Proto == "https"
	}
	if !useTLS && b.Count("upstreams") > 0 {
		b.Errorf(cn, config.KeyPath(b.Path, "tls_ca"), "tls_ca is set but no upstream uses tls:// or https://")
	}
	if f.TLSCA != "" {
		b.Parser.CheckCA(cn, config.KeyPath(b.Path, "tls_ca"), f.TLSCA)
	}
}

// parseExcept reads except: domain names, lower-cased.
func parseExcept(b *config.Block, f *Config) {
	evals, enodes, epath, _ := b.Strings("except")
	for i, s := range evals {
		name, err := config.NormalizeName(s)
		if err != nil {
			b.Errorf(enodes[i], config.IndexPath(epath, i), "bad name: %v", err)
			continue
		}
		f.Except = append(f.Except, name)
	}
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
