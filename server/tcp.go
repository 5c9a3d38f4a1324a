package server

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"time"
)

// acceptTCP accepts connections on a tcp or tls unit until it is stopped.
// Connections over max_tcp_connections (server-wide) are closed at once.
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
		st := s.set.Load()
		if s.tcpConns.Add(1) > int64(st.maxTCP) {
			s.tcpConns.Add(-1)
			_ = c.Close()
			s.log.Debug("tcp connection limit reached, closing new connection", "client", c.RemoteAddr().String(), "max", st.maxTCP)
			continue
		}
		if !u.track(c) {
			s.tcpConns.Add(-1)
			_ = c.Close()
			return
		}
		s.handlers.Add(1)
		go s.serveConn(u, c)
	}
}

// serveConn answers the queries of one connection in order. Clients may
// pipeline: the next query is read (buffered) while none is outstanding.
// Every message must arrive in full within the idle timeout of the
// previous answer (or of the connection's start), so neither idle nor
// trickling clients hold a connection; the same bound applies to writes.
func (s *Server) serveConn(u *unit, raw net.Conn) {
	defer s.handlers.Done()
	defer s.tcpConns.Add(-1)
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
	client := raw.RemoteAddr().(*net.TCPAddr).AddrPort().Addr().Unmap().WithZone("")

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
