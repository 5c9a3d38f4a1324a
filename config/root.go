package config

import (
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

var rootKeys = []string{"listen", "tls", "http", "log", "acl", "limits", "cache", "rotate", "zones", "views", "transfer"}

func (p *parser) config(root *yaml.Node) *Config {
	cfg := &Config{
		File:   p.file,
		Log:    defaultLog(),
		ACL:    ACL{Default: true},
		Limits: defaultLimits(),
		Cache:  defaultCache(),
	}
	if isNull(root) {
		p.errorAt(Pos{File: p.file, Line: 1, Col: 1}, "", "no zones: the file is empty (it needs at least a zones: mapping)")
		return cfg
	}
	m := p.mapping(root, "", rootKeys...)
	if m == nil {
		return cfg
	}
	cfg.TLS = p.serverTLS(m)
	cfg.Listen = p.listen(m, cfg.TLS != nil)
	cfg.HTTP = p.http(m)
	p.log(m, &cfg.Log)
	p.acl(m, &cfg.ACL)
	p.limits(m, &cfg.Limits)
	p.cache(m, &cfg.Cache)
	m.boolean("rotate", &cfg.Rotate)
	cfg.Zones = p.zones(m)
	cfg.Views = p.views(m, cfg.Listen)
	cfg.Transfers = p.transfers(m, cfg.Zones)
	return cfg
}

// hostPort validates "host:port" where host is an IP literal ([v6] for
// IPv6) or empty and port is 1-65535, and returns it normalised.
func hostPort(s string) (string, error) {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return "", fmt.Errorf("expected host:port: %v", strings.TrimPrefix(err.Error(), "address "+s+": "))
	}
	pn, err := strconv.Atoi(port)
	if err != nil || pn < 1 || pn > 65535 {
		return "", fmt.Errorf("port %q must be a number between 1 and 65535", port)
	}
	if host == "" {
		return net.JoinHostPort("", strconv.Itoa(pn)), nil
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return "", fmt.Errorf("host %q must be an IP address (or empty for all addresses)", host)
	}
	return net.JoinHostPort(ip.String(), strconv.Itoa(pn)), nil
}

func (p *parser) listen(m *mapping, haveTLS bool) []Listen {
	vals, nodes, path, present := m.strings("listen")
	if !present {
		return []Listen{{Addr: DefaultListen}}
	}
	if len(vals) == 0 {
		if n, _ := m.get("listen"); n != nil && n.Kind == yaml.SequenceNode {
			p.errorf(n, path, "no listen addresses (omit listen for the default %q)", DefaultListen)
		}
		return nil
	}
	type use struct {
		entry string
		pos   Pos
	}
	used := map[string]use{} // "udp 127.0.0.1:53" -> first entry using that socket
	var out []Listen
	for i, s := range vals {
		n := nodes[i]
		ipath := indexPath(path, i)
		l := Listen{Pos: p.pos(n)}
		rest := s
		if scheme, after, ok := strings.Cut(s, "://"); ok {
			switch scheme {
			case "udp", "tcp", "tls", "https":
				l.Proto, rest = scheme, after
			default:
				p.errorf(n, ipath, "unknown scheme %q in %q (known: udp://, tcp://, tls://, https://, or none for UDP and TCP)", scheme+"://", s)
				continue
			}
		}
		addr, err := hostPort(rest)
		if err != nil {
			p.errorf(n, ipath, "bad listen address %q: %v", s, err)
			continue
		}
		l.Addr = addr
		if (l.Proto == "tls" || l.Proto == "https") && !haveTLS {
			p.errorf(n, ipath, "%q needs the top-level tls: block (cert and key)", s)
		}
		var transports []string
		switch l.Proto {
		case "":
			transports = []string{"udp", "tcp"}
		case "udp":
			transports = []string{"udp"}
		default: // tcp, tls
			transports = []string{"tcp"}
		}
		dup := false
		for _, t := range transports {
			if u, ok := used[t+" "+addr]; ok {
				p.errorf(n, ipath, "duplicate listen address: %s %s is already used by %q at %s", strings.ToUpper(t), addr, u.entry, u.pos)
				dup = true
				break
			}
		}
		if dup {
			continue
		}
		for _, t := range transports {
			used[t+" "+addr] = use{entry: s, pos: l.Pos}
		}
		out = append(out, l)
	}
	return out
}

func (p *parser) serverTLS(m *mapping) *TLS {
	if !m.has("tls") {
		return nil
	}
	n, path := m.get("tls")
	tm := p.mapping(n, path, "cert", "key")
	if tm == nil {
		return nil
	}
	t := &TLS{Pos: p.pos(m.keyNode("tls"))}
	cn := tm.optFile("cert", &t.Cert)
	kn := tm.optFile("key", &t.Key)
	if cn == nil {
		p.errorf(m.keyNode("tls"), path, "cert is required (PEM certificate chain file)")
	}
	if kn == nil {
		p.errorf(m.keyNode("tls"), path, "key is required (PEM private key file)")
	}
	if t.Cert != "" && t.Key != "" {
		p.checkKeyPair(m.keyNode("tls"), path, t.Cert, t.Key)
	}
	return t
}

func (p *parser) http(m *mapping) string {
	var s string
	n := m.str("http", &s)
	if n == nil || s == "" {
		return ""
	}
	_, path := m.get("http")
	addr, err := hostPort(s)
	if err != nil {
		p.errorf(n, path, "bad address %q: %v", s, err)
		return ""
	}
	return addr
}

func (p *parser) log(m *mapping, l *Log) {
	n, path := m.get("log")
	lm := p.mapping(n, path, "level", "format", "queries")
	if lm == nil {
		return
	}
	level := "info"
	lm.enum("level", &level, "debug", "info", "warn", "error")
	switch level {
	case "debug":
		l.Level = slog.LevelDebug
	case "info":
		l.Level = slog.LevelInfo
	case "warn":
		l.Level = slog.LevelWarn
	case "error":
		l.Level = slog.LevelError
	}
	lm.enum("format", &l.Format, "text", "json")
	lm.boolean("queries", &l.Queries)
}

// prefix parses a CIDR; a bare IP is a host prefix (/32, /128). Host bits
// set after the mask are an error: in an ACL, 10.0.0.1/8 is a typo that
// would open a whole /8.
func parsePrefix(s string) (netip.Prefix, error) {
	if !strings.Contains(s, "/") {
		ip, err := netip.ParseAddr(s)
		if err != nil || ip.Zone() != "" {
			return netip.Prefix{}, fmt.Errorf("bad CIDR %q: expected an address/prefix-length such as 10.0.0.0/8 or a bare IP", s)
		}
		return netip.PrefixFrom(ip, ip.BitLen()), nil
	}
	pr, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("bad CIDR %q: %v", s, strings.TrimPrefix(err.Error(), "netip.ParsePrefix("+strconv.Quote(s)+"): "))
	}
	if pr.Masked() != pr {
		return netip.Prefix{}, fmt.Errorf("bad CIDR %q: bits set after the /%d mask (did you mean %s or %s/%d?)",
			s, pr.Bits(), pr.Masked(), pr.Addr(), pr.Addr().BitLen())
	}
	return pr, nil
}

func (p *parser) acl(m *mapping, a *ACL) {
	n, path := m.get("acl")
	am := p.mapping(n, path, "allow", "deny", "drop")
	if am == nil {
		return
	}
	allow, present := p.prefixList(am, "allow")
	if present {
		a.Default = false
		a.Allow = allow
		if ln, lpath := am.get("allow"); ln.Kind == yaml.SequenceNode && len(ln.Content) == 0 {
			p.errorf(ln, lpath, "empty allow list: no client could query (omit allow for the default: loopback, RFC 1918 and RFC 4193 clients)")
		}
	}
	a.Deny, _ = p.prefixList(am, "deny")
	if len(a.Deny) == 0 {
		a.Deny = nil
	}
	am.boolean("drop", &a.Drop)
}

func (p *parser) limits(m *mapping, l *Limits) {
	n, path := m.get("limits")
	lm := p.mapping(n, path, "udp_buffer", "max_tcp_connections", "max_tcp_per_client", "udp_rcvbuf", "tcp_idle_timeout", "rate_per_client", "rate_drop")
	if lm == nil {
		return
	}
	buf := int(l.UDPBuffer)
	lm.integer("udp_buffer", &buf, 512, 65535)
	l.UDPBuffer = uint16(buf)
	lm.integer("max_tcp_connections", &l.MaxTCPConnections, 1, maxInt)
	lm.integer("max_tcp_per_client", &l.MaxTCPPerClient, 1, maxInt)
	lm.integer("udp_rcvbuf", &l.UDPRcvBuf, 0, 1<<30)
	lm.duration("tcp_idle_timeout", &l.TCPIdleTimeout, positive)
	lm.integer("rate_per_client", &l.RatePerClient, 0, maxInt)
	lm.boolean("rate_drop", &l.RateDrop)
}

func (p *parser) cache(m *mapping, c *Cache) {
	n, path := m.get("cache")
	cm := p.mapping(n, path, "size", "min_ttl", "max_ttl", "negative_ttl", "serve_stale", "prefetch")
	if cm == nil {
		return
	}
	ttl := durLimit{Max: MaxTTL, Seconds: true}
	cm.integer("size", &c.Size, 0, maxInt)
	minN := cm.duration("min_ttl", &c.MinTTL, ttl)
	maxN := cm.duration("max_ttl", &c.MaxTTL, ttl)
	cm.duration("negative_ttl", &c.NegativeTTL, ttl)
	cm.duration("serve_stale", &c.ServeStale, nonNegative)
	cm.boolean("prefetch", &c.Prefetch)
	if c.MinTTL > c.MaxTTL {
		at, key := minN, "min_ttl"
		if at == nil {
			at, key = maxN, "max_ttl"
		}
		p.errorf(at, keyPath(path, key), "min_ttl (%s) is greater than max_ttl (%s)", c.MinTTL, c.MaxTTL)
	}
}

// prefixList reads a list of CIDRs (or bare addresses) at key, reporting
// each bad one; the list is empty, not nil, when present.
func (p *parser) prefixList(m *mapping, key string) (out []netip.Prefix, present bool) {
	vals, nodes, path, present := m.strings(key)
	out = []netip.Prefix{}
	for i, s := range vals {
		pr, err := parsePrefix(s)
		if err != nil {
			p.errorf(nodes[i], indexPath(path, i), "%v", err)
			continue
		}
		out = append(out, pr)
	}
	return out, present
}
