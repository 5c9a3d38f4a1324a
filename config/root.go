package config

import (
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/dnsd/dnsd/internal/quote"
)

var rootKeys = []string{"listen", "tls", "http", "log", "acl", "limits", "rotate", "zones", "views", "transfer", "update", "state_dir"}

// rootKeys are the top-level keys: this package's and the blocks the
// kinds own.
func (p *Parser) rootKeys() []string {
	keys := slices.Clone(rootKeys)
	for _, o := range p.kinds.blocks() {
		key, _ := o.Block()
		keys = append(keys, key)
	}
	return keys
}

func (p *Parser) config(root *yaml.Node) *Config {
	cfg := &Config{
		File:   p.file,
		Log:    defaultLog(),
		ACL:    ACL{Default: true},
		Limits: defaultLimits(),
		Blocks: map[string]any{},
	}
	for _, o := range p.kinds.blocks() {
		key, s := o.Block()
		cfg.Blocks[key] = s.New()
	}
	if isNull(root) {
		p.ErrorAt(Pos{File: p.file, Line: 1, Col: 1}, "", "no zones: the file is empty (it needs at least a zones: mapping)")
		return cfg
	}
	p.noteSecretFiles(root)
	m := p.Mapping(root, "", p.rootKeys()...)
	if m == nil {
		return cfg
	}
	cfg.TLS = p.serverTLS(m)
	var listenWritten []Listen
	cfg.Listen, listenWritten = p.listen(m, cfg.TLS != nil, false)
	cfg.HTTP = p.http(m)
	if n, _ := m.Get("http"); n != nil {
		cfg.HTTPPos = p.Pos(n)
		if cfg.HTTP != "" {
			for _, l := range cfg.Listen {
				if l.Proto != "udp" && tcpOverlap(cfg.HTTP, l.Addr) {
					p.Errorf(n, "http", "address %s overlaps listen entry %q at %s: two TCP listeners on port %s of overlapping addresses cannot both be bound", cfg.HTTP, l.String(), l.Pos, portOf(cfg.HTTP))
					break
				}
			}
		}
	}
	p.log(m, &cfg.Log)
	p.acl(m, &cfg.ACL)
	p.limits(m, &cfg.Limits)
	p.blocks(m, cfg.Blocks)
	m.Bool("rotate", &cfg.Rotate)
	cfg.StateDir = p.stateDir(m)
	cfg.Zones = p.zones(m)
	cfg.Views = p.views(m, cfg.Listen, listenWritten)
	cfg.Transfers = p.transfers(m, cfg.Zones)
	cfg.Updates = p.updates(m, cfg.Zones, cfg.Views, cfg.Transfers)
	return cfg
}

// DefaultStateDir is where dnsd keeps what it must find again after a
// restart (the copies of secondary zones) when state_dir is not set.
const DefaultStateDir = "/var/lib/dnsd"

// stateDir parses state_dir: a directory, relative to dnsd.yaml's. It
// need not exist yet (the sources that write there make it).
func (p *Parser) stateDir(m *Mapping) string {
	var dir string
	n := m.Str("state_dir", &dir)
	if n == nil {
		return DefaultStateDir
	}
	if dir == "" {
		p.Errorf(n, "state_dir", "empty directory name")
		return DefaultStateDir
	}
	full, ok := p.filePath(n, "state_dir", dir)
	if !ok {
		return DefaultStateDir
	}
	return full
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
		return "", fmt.Errorf("port %s must be a number between 1 and 65535", quote.QS(port))
	}
	if host == "" {
		return net.JoinHostPort("", strconv.Itoa(pn)), nil
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return "", fmt.Errorf("host %s must be an IP address (or empty for all addresses)", quote.QS(host))
	}
	return net.JoinHostPort(ip.String(), strconv.Itoa(pn)), nil
}

// tcpOverlap reports whether TCP listeners on a and b (normalised
// host:port) would want the same socket address: the same port, and the
// same host or one of them every address of the other's family ("" is
// both families).
func tcpOverlap(a, b string) bool {
	ha, pa, _ := net.SplitHostPort(a)
	hb, pb, _ := net.SplitHostPort(b)
	if pa != pb || pa == "0" {
		return false
	}
	if ha == hb || ha == "" || hb == "" {
		return true
	}
	ia, errA := netip.ParseAddr(ha)
	ib, errB := netip.ParseAddr(hb)
	if errA != nil || errB != nil || ia.Is4() != ib.Is4() {
		return false
	}
	return ia.IsUnspecified() || ib.IsUnspecified()
}

// portOf is the port of a host:port.
func portOf(addr string) string {
	_, port, _ := net.SplitHostPort(addr)
	return port
}

// listen reads a listen list: the top level's, or a view's (inView), where
// leaving it out means every listen entry.
//
// written is every entry whose address parses, the ones rejected as
// taken by an earlier entry included, so that a view naming a rejected
// entry is not told again that it is missing.
func (p *Parser) listen(m *Mapping, haveTLS, inView bool) (out, written []Listen) {
	vals, nodes, path, present := m.Strings("listen")
	if !present {
		l := []Listen{{Addr: DefaultListen}}
		return l, l
	}
	if len(vals) == 0 {
		if n, _ := m.Get("listen"); n != nil && n.Kind == yaml.SequenceNode {
			if inView {
				p.Errorf(n, path, "no listen addresses (omit listen to match queries on every listen entry)")
			} else {
				p.Errorf(n, path, "no listen addresses (omit listen for the default %s)", quote.QS(DefaultListen))
			}
		}
		return nil, nil
	}
	type use struct {
		entry string
		pos   Pos
	}
	used := map[string]use{} // "udp 127.0.0.1:53" -> first entry using that socket
	for i, s := range vals {
		n := nodes[i]
		ipath := IndexPath(path, i)
		l := Listen{Pos: p.Pos(n)}
		rest := s
		if scheme, after, ok := strings.Cut(s, "://"); ok {
			switch scheme {
			case "udp", "tcp", "tls", "https":
				l.Proto, rest = scheme, after
			default:
				p.Errorf(n, ipath, "unknown scheme %s in %s (known: udp://, tcp://, tls://, https://, or none for UDP and TCP)", quote.QS(scheme+"://"), quote.QS(s))
				continue
			}
		}
		addr, err := hostPort(rest)
		if err != nil {
			p.Errorf(n, ipath, "bad listen address %s: %v", quote.QS(s), err)
			continue
		}
		l.Addr = addr
		written = append(written, l)
		if (l.Proto == "tls" || l.Proto == "https") && !haveTLS {
			p.Errorf(n, ipath, "%s needs the top-level tls: block (cert and key)", quote.QS(s))
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
				p.Errorf(n, ipath, "duplicate listen address: %s %s is already used by %s at %s", strings.ToUpper(t), addr, quote.QS(u.entry), u.pos)
				dup = true
				break
			}
		}
		if !dup && slices.Contains(transports, "tcp") {
			// TCP listeners share no port: 0.0.0.0:53 and 127.0.0.1:53
			// cannot both be bound (UDP ones can).
			for _, o := range out {
				if o.Proto != "udp" && tcpOverlap(o.Addr, addr) {
					p.Errorf(n, ipath, "listen address %s overlaps %s at %s: two TCP listeners on port %s of overlapping addresses cannot both be bound", addr, quote.QS(o.String()), o.Pos, portOf(addr))
					dup = true
					break
				}
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
	return out, written
}

func (p *Parser) serverTLS(m *Mapping) *TLS {
	n, path := m.Get("tls")
	if n == nil { // absent or null: no TLS
		return nil
	}
	tm := p.Mapping(n, path, "cert", "key")
	if tm == nil {
		return nil
	}
	t := &TLS{Pos: p.Pos(m.KeyNode("tls"))}
	cn := tm.OptFile("cert", &t.Cert)
	kn := tm.OptFile("key", &t.Key)
	if cn == nil || cn.Value == "" {
		p.Errorf(m.KeyNode("tls"), path, "cert is required (PEM certificate chain file)")
	}
	if kn == nil || kn.Value == "" {
		p.Errorf(m.KeyNode("tls"), path, "key is required (PEM private key file)")
	}
	if t.Cert != "" && t.Key != "" {
		p.CheckKeyPair(m.KeyNode("tls"), path, t.Cert, t.Key)
	}
	return t
}

func (p *Parser) http(m *Mapping) string {
	var s string
	n := m.Str("http", &s)
	if n == nil || s == "" {
		return ""
	}
	_, path := m.Get("http")
	addr, err := hostPort(s)
	if err != nil {
		p.Errorf(n, path, "bad address %s: %v", quote.QS(s), err)
		return ""
	}
	return addr
}

func (p *Parser) log(m *Mapping, l *Log) {
	n, path := m.Get("log")
	lm := p.Mapping(n, path, "level", "format", "queries")
	if lm == nil {
		return
	}
	level := "info"
	lm.Enum("level", &level, "debug", "info", "warn", "error")
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
	lm.Enum("format", &l.Format, "text", "json")
	lm.Bool("queries", &l.Queries)
}

// prefix parses a CIDR; a bare IP is a host prefix (/32, /128). Host bits
// set after the mask are an error: in an ACL, 10.0.0.1/8 is a typo that
// would open a whole /8.
func parsePrefix(s string) (netip.Prefix, error) {
	if !strings.Contains(s, "/") {
		ip, err := netip.ParseAddr(s)
		if err != nil || ip.Zone() != "" {
			return netip.Prefix{}, fmt.Errorf("bad CIDR %s: expected an address/prefix-length such as 10.0.0.0/8 or a bare IP", quote.QS(s))
		}
		return netip.PrefixFrom(ip, ip.BitLen()), nil
	}
	pr, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("bad CIDR %s: %v", quote.QS(s), strings.TrimPrefix(err.Error(), "netip.ParsePrefix("+strconv.Quote(s)+"): "))
	}
	if pr.Masked() != pr {
		return netip.Prefix{}, fmt.Errorf("bad CIDR %s: bits set after the /%d mask (did you mean %s or %s/%d?)",
			quote.QS(s), pr.Bits(), pr.Masked(), pr.Addr(), pr.Addr().BitLen())
	}
	return pr, nil
}

func (p *Parser) acl(m *Mapping, a *ACL) {
	n, path := m.Get("acl")
	am := p.Mapping(n, path, "allow", "deny", "drop")
	if am == nil {
		return
	}
	allow, present := p.prefixList(am, "allow")
	if present {
		a.Default = false
		a.Allow = allow
		if ln, lpath := am.Get("allow"); ln.Kind == yaml.SequenceNode && len(ln.Content) == 0 {
			p.Errorf(ln, lpath, "empty allow list: no client could query (omit allow for the default: loopback, RFC 1918 and RFC 4193 clients)")
		}
	}
	a.Deny, _ = p.prefixList(am, "deny")
	if len(a.Deny) == 0 {
		a.Deny = nil
	}
	am.Bool("drop", &a.Drop)
}

func (p *Parser) limits(m *Mapping, l *Limits) {
	n, path := m.Get("limits")
	lm := p.Mapping(n, path, "udp_buffer", "max_tcp_connections", "max_tcp_per_client", "max_tcp_pipeline", "udp_rcvbuf", "tcp_idle_timeout", "rate_per_client", "rate_drop", "max_transfers", "max_update_size", "max_update_rrs")
	if lm == nil {
		return
	}
	buf := int(l.UDPBuffer)
	lm.Int("udp_buffer", &buf, 512, 65535)
	l.UDPBuffer = uint16(buf)
	lm.Int("max_tcp_connections", &l.MaxTCPConnections, 1, MaxInt)
	lm.Int("max_tcp_per_client", &l.MaxTCPPerClient, 1, MaxInt)
	lm.Int("max_tcp_pipeline", &l.MaxTCPPipeline, 1, 1024)
	lm.Int("udp_rcvbuf", &l.UDPRcvBuf, 0, 1<<30)
	lm.Duration("tcp_idle_timeout", &l.TCPIdleTimeout, Positive)
	lm.Int("rate_per_client", &l.RatePerClient, 0, MaxInt)
	lm.Bool("rate_drop", &l.RateDrop)
	lm.Int("max_transfers", &l.MaxTransfers, 1, 10000)
	lm.Int("max_update_size", &l.MaxUpdateSize, 512, 65535)
	lm.Int("max_update_rrs", &l.MaxUpdateRRs, 1, 65535)
}

// blocks reads the top-level blocks the kinds own into their settings
// (defaults already in place).
func (p *Parser) blocks(m *Mapping, into map[string]any) {
	for _, o := range p.kinds.blocks() {
		key, s := o.Block()
		n, path := m.Get(key)
		if bm := p.Mapping(n, path, s.Keys()...); bm != nil {
			into[key] = s.Parse(&Block{Mapping: bm, Parser: p, Path: path, At: m.KeyNode(key)})
		}
	}
}

// prefixList reads a list of CIDRs (or bare addresses) at key, reporting
// each bad one; the list is empty, not nil, when present.
func (p *Parser) prefixList(m *Mapping, key string) (out []netip.Prefix, present bool) {
	vals, nodes, path, present := m.Strings(key)
	out = []netip.Prefix{}
	for i, s := range vals {
		pr, err := parsePrefix(s)
		if err != nil {
			p.Errorf(nodes[i], IndexPath(path, i), "%v", err)
			continue
		}
		out = append(out, pr)
	}
	return out, present
}
