package server

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"time"
)

// UDP serving, portable path (Linux batches reads and answers on the
// reader, see udp_linux.go): each socket has one reader goroutine. A
// reader hands each packet to an idle worker, or starts a worker (up to
// maxUDPWorkers), or when at that bound handles the packet itself
// (backpressure: the kernel queue absorbs the rest). Workers exit after workerIdle without work, so
// a burst of slow (forwarded) queries does not leave goroutines behind.
const (
	udpReadSize = 4096 // larger queries (MSG_TRUNC) are dropped
	// maxUDPWorkers bounds the goroutines answering UDP queries besides
	// the readers (slow, i.e. forwarded, queries), on every platform.
	// Forwarded queries are bounded by forward's max_concurrent first; this
	// is the server's own bound, whatever the pipeline does.
	maxUDPWorkers = 4096
	workerIdle    = 10 * time.Second
)

// udpJob is one received packet and the working memory to answer it.
type udpJob struct {
	u    *unit
	conn *net.UDPConn
	from netip.AddrPort
	n    int
	// dst and ifindex: where the query was sent (wildcard listeners only).
	dst     netip.Addr
	ifindex uint32
	oob     oobBuf
	oobOut  oobBuf
	sc      scratch
	buf     [udpReadSize]byte
}

// readUDPEach is the portable reader: one recvmsg per datagram, handed to
// the worker pool.
func (s *Server) readUDPEach(u *unit, conn *net.UDPConn) {
	for {
		j := s.jobs.Get().(*udpJob)
		var oob []byte
		if u.pktinfo {
			oob = j.oob.bytes()
		}
		n, oobn, flags, from, err := conn.ReadMsgUDPAddrPort(j.buf[:], oob)
		if err != nil {
			s.jobs.Put(j)
			if u.stopping.Load() || errors.Is(err, net.ErrClosed) {
				return
			}
			s.log.Debug("udp read error", "addr", conn.LocalAddr().String(), "err", err)
			time.Sleep(time.Millisecond) // never spin on a persistent error
			continue
		}
		if flags&msgTrunc != 0 {
			s.jobs.Put(j)
			s.oversized(from.Addr())
			continue
		}
		j.u, j.conn, j.from, j.n = u, conn, from, n
		j.dst = netip.Addr{}
		if u.pktinfo {
			if dst, ifindex, ok := parsePktinfo(oob[:oobn]); ok {
				j.dst, j.ifindex = dst.Unmap(), ifindex
			}
		}
		s.handlers.Add(1)
		s.dispatch(j)
	}
}

// oversized counts a UDP query longer than udpReadSize, dropped unread,
// as malformed: it is no query dnsd can parse.
func (s *Server) oversized(client netip.Addr) {
	if s.observer != nil {
		s.observer.Observe(Observation{Proto: protoUDP.String(), Client: client, Rcode: -1, Dropped: true, DropReason: DropMalformed})
	}
}

func (s *Server) dispatch(j *udpJob) {
	select {
	case s.udpq <- j:
		return
	default:
	}
	if s.nworkers.Add(1) <= maxUDPWorkers {
		s.workers.Add(1)
		go s.udpWorker(j)
		return
	}
	s.nworkers.Add(-1)
	s.handleUDP(j)
}

func (s *Server) udpWorker(j *udpJob) {
	defer s.workers.Done()
	defer s.nworkers.Add(-1)
	s.handleUDP(j)
	t := time.NewTimer(workerIdle)
	defer t.Stop()
	for {
		select {
		case j := <-s.udpq:
			s.handleUDP(j)
			t.Reset(workerIdle)
		case <-t.C:
			return
		case <-s.done:
			return
		}
	}
}

func (s *Server) handleUDP(j *udpJob) {
	defer s.handlers.Done()
	s.answerUDP(&j.sc, j.u, j.conn, j.from, j.dst, j.ifindex, &j.oobOut, j.buf[:j.n])
	j.u, j.conn = nil, nil
	s.jobs.Put(j)
}

// answerUDP answers one datagram from `from` (sent to dst on interface
// ifindex when dst is valid: a wildcard listener) and releases sc.
func (s *Server) answerUDP(sc *scratch, u *unit, conn *net.UDPConn, from netip.AddrPort, dst netip.Addr, ifindex uint32, oobOut *oobBuf, in []byte) {
	if out := s.serveUDP(s.ctx, sc, u, from, in); out != nil {
		s.writeUDP(conn, out, from, dst, ifindex, oobOut)
	}
	s.release(sc)
}

// serveUDP is serveRaw for a datagram from `from` on u: the reply to
// send, nil for none, in sc's pack buffer until s.release(sc).
func (s *Server) serveUDP(ctx context.Context, sc *scratch, u *unit, from netip.AddrPort, in []byte) []byte {
	client := from.Addr().Unmap().WithZone("")
	sc.listen = u.listen
	return s.serveRaw(ctx, sc, protoUDP, client, u.loopback, in)
}

// writeUDP sends one reply (from dst on interface ifindex when dst is
// valid).
func (s *Server) writeUDP(conn *net.UDPConn, out []byte, to netip.AddrPort, dst netip.Addr, ifindex uint32, oobOut *oobBuf) {
	var err error
	if dst.IsValid() {
		_, _, err = conn.WriteMsgUDPAddrPort(out, srcPktinfo(oobOut, dst, ifindex), to)
	} else {
		_, err = conn.WriteToUDPAddrPort(out, to)
	}
	if err != nil && !errors.Is(err, net.ErrClosed) {
		s.log.Debug("udp write error", "client", to.String(), "err", err)
	}
}
