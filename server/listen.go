package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/dnsd/dnsd/config"
)

// unitKey identifies one bound socket group: a listen entry without a
// protocol is two units (udp and tcp) on the same address.
type unitKey struct {
	proto string // "udp", "tcp", "tls", "https"
	addr  string // as written in the listen entry
}

func unitKeys(l config.Listen) []unitKey {
	if l.Proto == "" {
		// TCP first: with port 0 the TCP port is resolved first and UDP
		// binds the same port.
		return []unitKey{{"tcp", l.Addr}, {"udp", l.Addr}}
	}
	return []unitKey{{l.Proto, l.Addr}}
}

// unit is the sockets of one unitKey and the goroutines reading them.
type unit struct {
	key      unitKey
	listen   string // key as a view's listen matcher sees it: "proto addr"
	loopback bool   // the listen address is a loopback address (ACL default)
	pktinfo  bool   // wildcard UDP address: reply from the query's destination address

	udp []*net.UDPConn // proto udp: one per CPU, SO_REUSEPORT
	ln  net.Listener   // proto tcp, tls, https
	doh *dohUnit       // proto https

	stopping atomic.Bool
	loops    sync.WaitGroup // this unit's reader/accept goroutines

	connsMu sync.Mutex
	conns   map[net.Conn]struct{}
}

func (u *unit) addr() net.Addr {
	if u.ln != nil {
		return u.ln.Addr()
	}
	return u.udp[0].LocalAddr()
}

// stop makes the unit's goroutines stop reading and accepting. In-flight
// queries finish; idle TCP connections wake up and close.
func (u *unit) stop() {
	u.stopping.Store(true)
	now := time.Now()
	for _, c := range u.udp {
		_ = c.SetReadDeadline(now)
	}
	if u.ln != nil {
		_ = u.ln.Close()
	}
	if u.doh != nil {
		// No new requests on open connections; the idle ones close.
		u.doh.noMoreRequests()
	}
	u.connsMu.Lock()
	for c := range u.conns {
		// The connection goroutine sets its own deadline before it checks
		// stopping, so this one cannot be lost.
		_ = c.SetReadDeadline(now)
	}
	u.connsMu.Unlock()
}

func (u *unit) closeConns() {
	u.connsMu.Lock()
	for c := range u.conns {
		_ = c.Close()
	}
	u.connsMu.Unlock()
}

func (u *unit) closeSockets() {
	for _, c := range u.udp {
		_ = c.Close()
	}
	if u.ln != nil {
		_ = u.ln.Close()
	}
	if u.doh != nil {
		u.doh.close()
	}
}

// track registers a connection; it reports false when the unit is
// stopping (the caller then closes it).
func (u *unit) track(c net.Conn) bool {
	u.connsMu.Lock()
	defer u.connsMu.Unlock()
	if u.stopping.Load() {
		return false
	}
	if u.conns == nil {
		u.conns = make(map[net.Conn]struct{})
	}
	u.conns[c] = struct{}{}
	return true
}

func (u *unit) untrack(c net.Conn) {
	u.connsMu.Lock()
	delete(u.conns, c)
	u.connsMu.Unlock()
}

// start launches the unit's reader or accept goroutines; they exit when
// the unit is stopped or its sockets closed.
func (s *Server) start(u *unit) {
	for _, c := range u.udp {
		s.startWatch() // it takes over slow batches (Linux)
		u.loops.Add(1)
		s.loops.Add(1)
		go func() {
			defer s.loops.Done()
			defer u.loops.Done()
			s.readUDP(u, c)
		}()
	}
	if u.ln != nil {
		if u.key.proto == "https" {
			u.doh = &dohUnit{}
			s.followDoH(u, s.set.Load())
		} else {
			s.startWatch()
		}
		u.loops.Add(1)
		s.loops.Add(1)
		go func() {
			defer s.loops.Done()
			defer u.loops.Done()
			if u.key.proto == "https" {
				s.acceptHTTPS(u)
				return
			}
			s.acceptTCP(u)
		}()
	}
}

// bindUnits binds the given units of one listen address (all sharing
// addr). When the port is 0, UDP binds the port TCP got; if that port is
// taken for UDP, the pair is retried a few times. probeUDP: first make
// sure no other socket holds the UDP address (see listenUDP).
func bindUnits(ctx context.Context, addr string, keys []unitKey, probeUDP bool) ([]*unit, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("bad address: %w", err)
	}
	loopback, wildcard := false, host == ""
	if ip, err := netip.ParseAddr(host); err == nil {
		loopback = ip.Unmap().IsLoopback()
		wildcard = ip.IsUnspecified()
	}
	attempts := 1
	if port == "0" && len(keys) > 1 {
		attempts = 5
	}
	for try := 1; ; try++ {
		us, err := bindOnce(ctx, host, port, keys, loopback, wildcard, probeUDP)
		if err == nil || try >= attempts || !errors.Is(err, syscall.EADDRINUSE) {
			return us, err
		}
	}
}

func bindOnce(ctx context.Context, host, port string, keys []unitKey, loopback, wildcard, probeUDP bool) ([]*unit, error) {
	var out []*unit
	fail := func(err error) ([]*unit, error) {
		for _, u := range out {
			u.closeSockets()
		}
		return nil, err
	}
	for _, k := range keys {
		u := &unit{key: k, listen: k.proto + " " + k.addr, loopback: loopback}
		addr := net.JoinHostPort(host, port)
		switch k.proto {
		case "udp":
			u.pktinfo = wildcard && pktinfoSupported
			conns, err := listenUDP(ctx, host, addr, u.pktinfo, probeUDP && port != "0")
			if err != nil {
				return fail(err)
			}
			u.udp = conns
		default: // tcp, tls
			var lc net.ListenConfig
			ln, err := lc.Listen(ctx, network("tcp", host), addr)
			if err != nil {
				return fail(fmt.Errorf("bind %s: %w", k.proto, err))
			}
			u.ln = ln
			// Later units of this address use the port just resolved.
			port = strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
		}
		out = append(out, u)
	}
	return out, nil
}

// listenUDP opens one SO_REUSEPORT socket per CPU on addr so the kernel
// spreads queries over several reader goroutines. With port 0 the first
// socket resolves the port and the others join it. With pktinfo the
// sockets report each packet's destination address.
//
// SO_REUSEPORT also lets any other process of the same user that sets it
// (a second dnsd started by mistake) bind the address beside these
// sockets and silently take part of the queries. With probe, a socket
// without SO_REUSEPORT is bound first and closed: it fails ("address
// already in use") when anything holds the address. The caller probes
// only when dnsd itself holds no UDP socket on that port, which the
// probe would also run into. Port 0 is always resolved that way.
func listenUDP(ctx context.Context, host, addr string, pktinfo, probe bool) ([]*net.UDPConn, error) {
	n := runtime.NumCPU()
	if n < 1 || !reusePortSupported {
		n = 1
	}
	_, port, _ := net.SplitHostPort(addr)
	if (probe || port == "0") && reusePortSupported {
		// Port 0 is resolved by this socket too: the kernel's choice for a
		// SO_REUSEPORT socket may be a port another process's
		// SO_REUSEPORT group holds (it would share it), never for this one.
		var plain net.ListenConfig
		pc, err := plain.ListenPacket(ctx, network("udp", host), addr)
		if err != nil {
			return nil, fmt.Errorf("bind udp: %w", err)
		}
		if port == "0" {
			addr = net.JoinHostPort(host, strconv.Itoa(pc.LocalAddr().(*net.UDPAddr).Port))
		}
		_ = pc.Close()
	}
	lc := net.ListenConfig{Control: func(network, address string, c syscall.RawConn) error {
		if err := reusePort(network, address, c); err != nil {
			return err
		}
		if pktinfo {
			if err := enablePktinfo(network, c); err != nil {
				return fmt.Errorf("enable packet info: %w", err)
			}
		}
		return nil
	}}
	var conns []*net.UDPConn
	for i := range n {
		pc, err := lc.ListenPacket(ctx, network("udp", host), addr)
		if err != nil {
			for _, c := range conns {
				_ = c.Close()
			}
			return nil, fmt.Errorf("bind udp: %w", err)
		}
		c := pc.(*net.UDPConn)
		conns = append(conns, c)
		if i == 0 {
			addr = net.JoinHostPort(host, strconv.Itoa(c.LocalAddr().(*net.UDPAddr).Port))
		}
	}
	return conns, nil
}

// network picks tcp4/udp4 for IPv4 literals and tcp6/udp6 for IPv6
// literals, so "0.0.0.0" and "::" mean what they say; an empty host is
// dual-stack.
func network(base, host string) string {
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return base
	}
	if ip.Is4() {
		return base + "4"
	}
	return base + "6"
}
