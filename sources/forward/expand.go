package forward

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"

	"github.com/dnsd/dnsd/config"
	"github.com/dnsd/dnsd/internal/fsutil"
)

// DefaultResolvConf is where the `resolv.conf` upstream form is read from.
const DefaultResolvConf = "/etc/resolv.conf"

// Upstream is one concrete upstream resolver.
type Upstream struct {
	Proto      string // "udp" (with TCP retry on TC=1), "tcp", "tls" or "https"; always set
	Addr       string // ip:port; always set
	Path       string // https: the URL path; "" unless https
	ServerName string // tls, https: the name the certificate is verified against; "" = the IP
}

// String is the upstream's label in metrics and logs: proto://ip:port
// (plus the path for https), with @name for a TLS server name.
func (u Upstream) String() string {
	s := u.Proto + "://" + u.Addr + u.Path
	if u.ServerName != "" {
		s += "@" + u.ServerName
	}
	return s
}

// ExpandOptions say where the `resolv.conf` form reads from and what
// counts as dnsd's own address.
type ExpandOptions struct {
	// ResolvConf is the file read for `resolv.conf` upstreams ("" =
	// DefaultResolvConf).
	ResolvConf string
	// Listen are dnsd's own listen addresses: an upstream equal to one of
	// them would send dnsd's queries back to itself. None: no upstream
	// is dropped.
	Listen []config.Listen
	// LocalAddrs lists the machine's addresses, which a wildcard listen
	// address (0.0.0.0, ::, "") covers. nil: the interfaces' addresses.
	LocalAddrs func() []netip.Addr
}

// Expand turns configured upstreams into concrete ones. `resolv.conf`
// becomes the file's nameserver lines (plain DNS, port 53, in file
// order), minus those that are dnsd's own listen addresses (returned in
// dropped, for a log line); an error when none remains. An upstream
// written explicitly that is one of dnsd's own listen addresses is an
// error: it is a forwarding loop. Duplicates are removed (first wins).
func Expand(ups []UpstreamConfig, opts ExpandOptions) (out []Upstream, dropped []string, err error) {
	own := newOwnAddrs(opts)
	seen := map[Upstream]bool{}
	add := func(u Upstream) {
		if !seen[u] {
			seen[u] = true
			out = append(out, u)
		}
	}
	for _, cu := range ups {
		if !cu.ResolvConf {
			if own.is(cu.Addr) {
				return nil, nil, fmt.Errorf("upstream %q (%s) is dnsd's own listen address: that is a forwarding loop", cu.Raw, cu.Pos)
			}
			add(Upstream{Proto: cu.Proto, Addr: cu.Addr, Path: cu.Path, ServerName: cu.ServerName})
			continue
		}
		path := opts.ResolvConf
		if path == "" {
			path = DefaultResolvConf
		}
		servers, err := ReadResolvConf(path)
		if err != nil {
			return nil, nil, fmt.Errorf("upstream resolv.conf: %w", err)
		}
		kept := 0
		for _, addr := range servers {
			if own.is(addr) {
				dropped = append(dropped, addr)
				continue
			}
			kept++
			add(Upstream{Proto: "udp", Addr: addr})
		}
		if kept == 0 {
			if len(servers) == 0 {
				return nil, nil, fmt.Errorf("upstream resolv.conf: %s lists no nameserver", path)
			}
			return nil, nil, fmt.Errorf("upstream resolv.conf: every nameserver of %s (%s) is dnsd's own listen address: forwarding there would loop", path, strings.Join(servers, ", "))
		}
	}
	if len(out) == 0 {
		return nil, nil, errors.New("no upstreams")
	}
	return out, dropped, nil
}

// ReadResolvConf returns the addresses (ip:53) of path's nameserver lines.
// Lines that are not an IP address are skipped, as the C library does.
func ReadResolvConf(path string) ([]string, error) {
	b, err := fsutil.ReadSmall(path)
	if err != nil {
		return nil, err
	}
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := sc.Text()
		if i := strings.IndexAny(line, "#;"); i >= 0 {
			line = line[:i]
		}
		f := strings.Fields(line)
		if len(f) < 2 || f[0] != "nameserver" {
			continue
		}
		ip, err := netip.ParseAddr(f[1])
		if err != nil {
			continue
		}
		out = append(out, net.JoinHostPort(ip.String(), "53"))
	}
	return out, sc.Err()
}

// ownAddrs answers "is ip:port one of dnsd's listen addresses?".
type ownAddrs struct {
	exact   map[netip.AddrPort]bool
	wild4   map[uint16]bool // 0.0.0.0:port
	wild6   map[uint16]bool // [::]:port or :port (both families)
	local   func() []netip.Addr
	localIP map[netip.Addr]bool // filled on first use
}

func newOwnAddrs(opts ExpandOptions) *ownAddrs {
	o := &ownAddrs{exact: map[netip.AddrPort]bool{}, wild4: map[uint16]bool{}, wild6: map[uint16]bool{}, local: opts.LocalAddrs}
	for _, l := range opts.Listen {
		host, ps, err := net.SplitHostPort(l.Addr)
		if err != nil {
			continue
		}
		port, err := strconv.ParseUint(ps, 10, 16)
		if err != nil {
			continue
		}
		p := uint16(port)
		if host == "" {
			o.wild6[p] = true
			continue
		}
		ip, err := netip.ParseAddr(host)
		if err != nil {
			continue
		}
		ip = ip.Unmap()
		switch {
		case ip == netip.IPv4Unspecified():
			o.wild4[p] = true
		case ip == netip.IPv6Unspecified():
			o.wild6[p] = true
		default:
			o.exact[netip.AddrPortFrom(ip.WithZone(""), p)] = true
		}
	}
	return o
}

func (o *ownAddrs) is(addr string) bool {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		return false
	}
	ip, port := ap.Addr().Unmap().WithZone(""), ap.Port()
	if o.exact[netip.AddrPortFrom(ip, port)] {
		return true
	}
	if ip.IsUnspecified() { // 0.0.0.0 / :: as a destination is this host
		for a := range o.exact {
			if a.Port() == port && o.isLocal(a.Addr()) {
				return true
			}
		}
	}
	if o.wild6[port] || (o.wild4[port] && ip.Is4()) {
		return o.isLocal(ip)
	}
	return false
}

// isLocal: loopback, unspecified, or an address of one of the machine's
// interfaces.
func (o *ownAddrs) isLocal(ip netip.Addr) bool {
	if ip.IsLoopback() || ip.IsUnspecified() {
		return true
	}
	if o.localIP == nil {
		o.localIP = map[netip.Addr]bool{}
		var addrs []netip.Addr
		if o.local != nil {
			addrs = o.local()
		} else {
			addrs = interfaceAddrs()
		}
		for _, a := range addrs {
			o.localIP[a.Unmap().WithZone("")] = true
		}
	}
	return o.localIP[ip]
}

func interfaceAddrs() []netip.Addr {
	ias, err := net.InterfaceAddrs()
	if err != nil {
		return nil
	}
	var out []netip.Addr
	for _, ia := range ias {
		if pn, ok := ia.(*net.IPNet); ok {
			if a, ok := netip.AddrFromSlice(pn.IP); ok {
				out = append(out, a)
			}
		}
	}
	return out
}
