package config

import (
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

func (p *parser) kubernetes(n *yaml.Node, path string, src *Source) *Kubernetes {
	k := defaultKubernetes()
	m := p.mapping(n, path, "kubeconfig", "context", "pods", "namespaces", "endpoint_pod_names",
		"expose", "ttl", "sync_timeout", "fallthrough")
	if m == nil {
		return &k
	}
	m.optFile("kubeconfig", &k.Kubeconfig)
	m.str("context", &k.Context)
	m.enum("pods", &k.Pods, "disabled", "insecure", "verified")
	vals, nodes, npath, _ := m.strings("namespaces")
	for i, ns := range vals {
		ns = strings.ToLower(ns)
		if !isLabel1123(ns) {
			p.errorf(nodes[i], indexPath(npath, i), "bad namespace %q: must be a DNS label (a-z, 0-9 and '-', at most 63 characters, starting and ending with a letter or digit)", vals[i])
			continue
		}
		k.Namespaces = append(k.Namespaces, ns)
	}
	m.boolean("endpoint_pod_names", &k.EndpointPodNames)
	m.enum("expose", &k.Expose, "cluster_ip", "external")
	m.duration("ttl", &k.TTL, durLimit{Max: MaxKubernetesTTL, Seconds: true})
	m.duration("sync_timeout", &k.SyncTimeout, positive)
	m.boolean("fallthrough", &src.Fallthrough)
	return &k
}

// isLabel1123 reports whether s is an RFC 1123 label as Kubernetes names
// namespaces.
func isLabel1123(s string) bool {
	if s == "" || len(s) > 63 || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for _, c := range []byte(s) {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

func (p *parser) etcd(n *yaml.Node, path string, src *Source) *Etcd {
	e := defaultEtcd()
	m := p.mapping(n, path, "endpoints", "prefix", "tls", "username", "password_file", "password",
		"ttl", "sync_timeout", "fallthrough")
	if m == nil {
		return &e
	}
	vals, nodes, epath, present := m.strings("endpoints")
	if present {
		e.Endpoints = nil
		if len(vals) == 0 && len(nodes) == 0 {
			if en, _ := m.get("endpoints"); en.Kind == yaml.SequenceNode && len(en.Content) == 0 {
				p.errorf(en, epath, "no endpoints (omit endpoints for the default %q)", DefaultEtcdEndpoint)
			}
		}
	}
	https := false
	seen := map[string]bool{}
	for i, s := range vals {
		ipath := indexPath(epath, i)
		if err := checkEndpoint(s); err != nil {
			p.errorf(nodes[i], ipath, "bad endpoint %q: %v", s, err)
			continue
		}
		if seen[s] {
			p.errorf(nodes[i], ipath, "duplicate endpoint %q", s)
			continue
		}
		seen[s] = true
		https = https || strings.HasPrefix(s, "https://")
		e.Endpoints = append(e.Endpoints, s)
	}
	if pn := m.str("prefix", &e.Prefix); pn != nil {
		if !strings.HasPrefix(e.Prefix, "/") {
			p.errorf(pn, keyPath(path, "prefix"), "prefix %q must start with \"/\"", e.Prefix)
		} else if e.Prefix != "/" {
			e.Prefix = strings.TrimRight(e.Prefix, "/")
			if e.Prefix == "" {
				e.Prefix = "/"
			}
		}
	}
	if m.has("tls") {
		tn, tpath := m.get("tls")
		if tm := p.mapping(tn, tpath, "ca", "cert", "key", "server_name"); tm != nil {
			tm.optFile("ca", &e.TLS.CA)
			cn := tm.optFile("cert", &e.TLS.Cert)
			kn := tm.optFile("key", &e.TLS.Key)
			if sn := tm.str("server_name", &e.TLS.ServerName); sn != nil && e.TLS.ServerName != "" {
				if name, err := normalizeName(e.TLS.ServerName); err != nil {
					p.errorf(sn, keyPath(tpath, "server_name"), "bad server name: %v", err)
				} else {
					e.TLS.ServerName = strings.TrimSuffix(name, ".")
				}
			}
			certSet, keySet := cn != nil && cn.Value != "", kn != nil && kn.Value != ""
			if certSet != keySet {
				p.errorf(m.keyNode("tls"), tpath, "cert and key go together: set both (client certificate authentication) or neither")
			}
			if e.TLS.Cert != "" && e.TLS.Key != "" {
				p.checkKeyPair(m.keyNode("tls"), tpath, e.TLS.Cert, e.TLS.Key)
			}
			if e.TLS.CA != "" {
				p.checkCA(tm.keyNode("ca"), keyPath(tpath, "ca"), e.TLS.CA)
			}
			if (e.TLS != ClientTLS{}) && !https {
				p.errorf(m.keyNode("tls"), tpath, "tls is set but no endpoint uses https://")
			}
		}
	}
	if m.has("password") {
		p.errorf(m.keyNode("password"), keyPath(path, "password"), "passwords are never inline: use password_file")
	}
	un := m.str("username", &e.Username)
	pn := m.optFile("password_file", &e.PasswordFile)
	pwSet := pn != nil && pn.Value != ""
	switch {
	case e.Username != "" && !pwSet:
		p.errorf(un, keyPath(path, "username"), "username needs password_file")
	case e.Username == "" && pwSet:
		p.errorf(pn, keyPath(path, "password_file"), "password_file needs username")
	}
	m.duration("ttl", &e.TTL, durLimit{Max: MaxTTL, Seconds: true})
	m.duration("sync_timeout", &e.SyncTimeout, positive)
	m.boolean("fallthrough", &src.Fallthrough)
	return &e
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

func (p *parser) hosts(n *yaml.Node, path string, src *Source, z *Zone, kindNode *yaml.Node) *Hosts {
	h := defaultHosts()
	m := p.mapping(n, path, "files", "entries", "ttl", "reverse", "fallthrough")
	if m == nil {
		return &h
	}
	vals, nodes, fpath, _ := m.strings("files")
	seen := map[string]int{}
	for i, s := range vals {
		ipath := indexPath(fpath, i)
		full, ok := p.readableFile(nodes[i], ipath, s)
		if !ok {
			continue
		}
		if first, dup := seen[full]; dup {
			p.errorf(nodes[i], ipath, "duplicate file %s (already at line %d)", full, first)
			continue
		}
		seen[full] = nodes[i].Line
		h.Files = append(h.Files, full)
	}
	evals, enodes, epath, _ := m.strings("entries")
	for i, s := range evals {
		if e, ok := p.hostsEntry(enodes[i], indexPath(epath, i), s, z); ok {
			h.Entries = append(h.Entries, e)
		}
	}
	m.duration("ttl", &h.TTL, durLimit{Max: MaxTTL, Seconds: true})
	m.boolean("reverse", &h.Reverse)
	m.boolean("fallthrough", &src.Fallthrough)
	if m.emptyList("files") && m.emptyList("entries") {
		p.errorf(kindNode, path, "hosts needs files, entries or both")
	}
	return &h
}

// hostsEntry parses an inline hosts entry "IP name [name...] [# comment]".
// A name without a dot gets the key's first zone appended; every name
// must be inside one of the key's zones. A name whose first label is "*"
// is a wildcard ("*" alone: a wildcard at the key's first zone).
func (p *parser) hostsEntry(n *yaml.Node, path, s string, z *Zone) (HostsEntry, bool) {
	e := HostsEntry{Line: s, Pos: p.pos(n)}
	line := s
	if i := strings.IndexByte(line, '#'); i >= 0 {
		line = line[:i]
	}
	f := strings.Fields(line)
	if len(f) < 2 {
		p.errorf(n, path, "bad entry %q: expected \"IP name [name...]\"", s)
		return e, false
	}
	addr, err := netip.ParseAddr(f[0])
	if err != nil || addr.Zone() != "" {
		p.errorf(n, path, "bad entry %q: %q is not an IP address", s, f[0])
		return e, false
	}
	e.Addr = addr.Unmap()
	ok := true
	for _, name := range f[1:] {
		full := name
		if !strings.Contains(name, ".") && len(z.Names) > 0 {
			full = name + "." + z.Names[0]
			if z.Names[0] == "." {
				full = name + "."
			}
		}
		norm, err := normalizeHostsName(full)
		if err != nil {
			p.errorf(n, path, "bad entry %q: bad name: %v", s, err)
			ok = false
			continue
		}
		if len(z.Names) > 0 && !inZones(norm, z.Names) {
			p.errorf(n, path, "bad entry %q: name %q is outside this key's zones (%s)", s, norm, zoneList(z.Names))
			ok = false
			continue
		}
		e.Names = append(e.Names, norm)
	}
	return e, ok
}

// zoneList names zones for a message, eliding long lists.
func zoneList(zones []string) string {
	if len(zones) > 4 {
		return strings.Join(zones[:3], " ") + fmt.Sprintf(" ... (%d zones)", len(zones))
	}
	return strings.Join(zones, " ")
}

// inZones reports whether name (an FQDN) is at or below one of zones.
func inZones(name string, zones []string) bool {
	for _, z := range zones {
		if z == "." || name == z || strings.HasSuffix(name, "."+z) {
			return true
		}
	}
	return false
}

func (p *parser) forward(n *yaml.Node, path string, src *Source, kindNode *yaml.Node) *Forward {
	f := defaultForward()
	m := p.mapping(n, path, "upstreams", "tls_ca", "policy", "timeout", "health_check",
		"max_fails", "max_concurrent", "except", "fallthrough")
	if m == nil {
		return &f
	}
	vals, nodes, upath, present := m.strings("upstreams")
	if !present {
		p.errorf(kindNode, path, "upstreams is required (e.g. [\"1.1.1.1\", \"resolv.conf\"])")
	} else if un, _ := m.get("upstreams"); un.Kind == yaml.SequenceNode && len(un.Content) == 0 {
		p.errorf(un, upath, "no upstreams")
	}
	seen := map[string]int{}
	useTLS := false
	for i, s := range vals {
		ipath := indexPath(upath, i)
		u, err := parseUpstream(s)
		if err != nil {
			p.errorf(nodes[i], ipath, "bad upstream %q: %v", s, err)
			continue
		}
		u.Pos = p.pos(nodes[i])
		id := u.Proto + "://" + u.Addr + u.Path + "@" + u.ServerName
		if u.ResolvConf {
			id = "resolv.conf"
		}
		if first, dup := seen[id]; dup {
			p.errorf(nodes[i], ipath, "duplicate upstream %q (same as %q)", s, vals[first])
			continue
		}
		seen[id] = i
		useTLS = useTLS || u.Proto == "tls" || u.Proto == "https"
		f.Upstreams = append(f.Upstreams, u)
	}
	if cn := m.optFile("tls_ca", &f.TLSCA); cn != nil && cn.Value != "" {
		if !useTLS && len(vals) > 0 {
			p.errorf(cn, keyPath(path, "tls_ca"), "tls_ca is set but no upstream uses tls:// or https://")
		}
		if f.TLSCA != "" {
			p.checkCA(cn, keyPath(path, "tls_ca"), f.TLSCA)
		}
	}
	m.enum("policy", &f.Policy, "random", "round_robin", "sequential")
	m.duration("timeout", &f.Timeout, positive)
	m.duration("health_check", &f.HealthCheck, positive)
	m.integer("max_fails", &f.MaxFails, 1, maxInt)
	m.integer("max_concurrent", &f.MaxConcurrent, 1, maxInt)
	evals, enodes, epath, _ := m.strings("except")
	for i, s := range evals {
		name, err := normalizeName(s)
		if err != nil {
			p.errorf(enodes[i], indexPath(epath, i), "bad name: %v", err)
			continue
		}
		f.Except = append(f.Except, name)
	}
	m.boolean("fallthrough", &src.Fallthrough)
	return &f
}

// parseUpstream parses "IP", "IP:port", "[v6]:port", "udp://...",
// "tcp://...", "tls://IP[:port][@servername]",
// "https://IP[:port][/path][@servername]" and "resolv.conf". The port
// defaults to 853 for tls://, 443 for https://, else 53; the https path
// to /dns-query.
func parseUpstream(s string) (Upstream, error) {
	u := Upstream{Raw: s, Proto: "udp"}
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
		name, err := normalizeName(rest[i+1:])
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
