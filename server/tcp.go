package server

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/netip"
	"time"
)

// acceptTCP accepts connections on a tcp or tls unit until it is stopped.
// Connections over max_tcp_connections (server-wide) or over
// max_tcp_per_client (from one client /24 or /56) are closed at once.
func (s *Server) acceptTCP(u *unit) {
	var backoff time.Duration
	for {
		c, err := u.ln.Accept()
		if err != nil {
			if u.stopping.Load() || errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of file descriptors and the like: back off, keep serving.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			s.log.Warn("tcp accept error", "addr", u.ln.Addr().String(), "err", err, "retry_in", backoff)
			time.Sleep(backoff)
			continue
		}
		backoff = 0
		key, ok := s.admit(c)
		if !ok {
			continue
		}
		if !u.track(c) {
			s.leave(key)
			_ = c.Close()
			return
		}
		s.handlers.Add(1)
		go s.serveConn(u, c, key)
	}
}

// serveConn answers the queries of one connection in order. Clients may
// pipeline: the next query is read (buffered) while none is outstanding.
// Every message must arrive in full within the idle timeout of the
// previous answer (or of the connection's start), so neither idle nor
// trickling clients hold a connection; the same bound applies to writes.
func (s *Server) serveConn(u *unit, raw net.Conn, key uint64) {
	defer s.handlers.Done()
	defer s.leave(key)
	defer u.untrack(raw)
	defer raw.Close()

	proto := protoTCP
	var c net.Conn = raw
	if u.key.proto == "tls" {
		proto = protoTLS
		st := s.set.Load()
		tc := tls.Server(raw, st.tls)
		ctx, cancel := context.WithTimeout(s.ctx, st.idle)
		err := tc.HandshakeContext(ctx)
		cancel()
		if err != nil {
			s.log.Debug("tls handshake failed", "client", raw.RemoteAddr().String(), "err", err)
			return
		}
		c = tc
	}
	client := tcpClient(raw)

	br := bufio.NewReaderSize(c, 1024)
	var (
		sc  scratch
		msg []byte
		hdr [2]byte
	)
	for {
		idle := s.set.Load().idle
		// Deadline first, then the stop check: see unit.stop.
		_ = c.SetReadDeadline(time.Now().Add(idle))
		if u.stopping.Load() {
			return
		}
		if _, err := io.ReadFull(br, hdr[:]); err != nil {
			return
		}
		n := int(binary.BigEndian.Uint16(hdr[:]))
		if n == 0 {
			return
		}
		if cap(msg) < n {
			msg = make([]byte, n, max(n, 512))
		}
		msg = msg[:n]
		if _, err := io.ReadFull(br, msg); err != nil {
			return
		}
		if isTransfer(msg) {
			if !s.serveTransfer(s.ctx, c, proto, client, u.loopback, msg) {
				return
			}
			continue
		}
		sc.listen = u.listen
		out := s.serveRaw(s.ctx, &sc, proto, client, u.loopback, msg)
		if out == nil { // unparseable or not a query: give up on this stream
			s.release(&sc)
			return
		}
		var wire []byte
		if pb := *sc.pack; len(pb) >= len(out)+2 && &pb[2] == &out[0] {
			wire = pb[:len(out)+2] // packed in place behind the prefix
		} else {
			wire = make([]byte, len(out)+2)
			copy(wire[2:], out)
		}
		binary.BigEndian.PutUint16(wire, uint16(len(out)))
		_ = c.SetWriteDeadline(time.Now().Add(idle))
		_, err := c.Write(wire)
		s.release(&sc)
		if err != nil {
			return
		}
	}
}

// admit counts a new TCP, TLS or HTTPS connection against
// max_tcp_connections and max_tcp_per_client, or closes it at once (and
// reports why) when either is reached. An admitted connection's client
// key must be given back with leave when it closes.
func (s *Server) admit(c net.Conn) (key uint64, ok bool) {
	st := s.set.Load()
	if s.tcpConns.Add(1) > int64(st.maxTCP) {
		s.tcpConns.Add(-1)
		_ = c.Close()
		s.rejected(RejectTotal)
		s.log.Debug("tcp connection limit reached, closing new connection", "client", c.RemoteAddr().String(), "max", st.maxTCP)
		return 0, false
	}
	key = clientKey(tcpClient(c))
	if !s.tcpPer.add(key, st.maxPer) {
		s.tcpConns.Add(-1)
		_ = c.Close()
		s.rejected(RejectClient)
		s.log.Debug("tcp per-client limit reached, closing new connection", "client", c.RemoteAddr().String(), "max", st.maxPer)
		return 0, false
	}
	return key, true
}

// leave gives back an admitted connection's places.
func (s *Server) leave(key uint64) {
	s.tcpPer.remove(key)
	s.tcpConns.Add(-1)
}

// Reasons for Observer.TCPRejected.
const (
	RejectTotal  = "total"
	RejectClient = "client"
)

func (s *Server) rejected(reason string) {
	if s.observer != nil {
		s.observer.TCPRejected(reason)
	}
}

// tcpClient is a connection's client address, unmapped and without zone.
func tcpClient(c net.Conn) netip.Addr {
	if a, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		return a.AddrPort().Addr().Unmap().WithZone("")
	}
	return netip.Addr{}
}
