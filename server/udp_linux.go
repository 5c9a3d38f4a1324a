package server

import (
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// UDP on Linux: each socket has one reader goroutine that takes up to
// batchSize datagrams per recvmmsg and answers them itself, one after the
// other: no hand-off to another goroutine, no wake-up per query.
//
// A query can be slow (forwarded to an upstream, waiting on a cache miss).
// The reader arms a timer for each batch; when a batch takes longer than
// slowBatch the timer's goroutine takes over: it starts a new reader for
// the socket at once and answers each of the batch's datagrams nobody has
// begun yet on a goroutine of its own, so neither the socket nor the rest
// of the batch waits for a slow query, however many the batch holds. The
// old reader finishes the query it is on and exits. Datagrams are claimed
// with an atomic index, so each is answered exactly once; a reference
// count returns the batch to its pool when the last user is done.
//
// Goroutines busy with slow queries are bounded like the portable path's
// workers (maxUDPWorkers, counted in Server.nworkers): a reader that has
// been taken over counts as one while it finishes its query, and so does
// each goroutine started for a datagram. At the bound there is no
// takeover (the reader answers its whole batch, the kernel queue absorbs
// the rest) and the timer's goroutine answers what is left of the batch
// itself instead of starting more.
const (
	batchSize = 16
	slowBatch = 500 * time.Microsecond
)

// udpBatch is the memory of one recvmmsg: datagrams, their source
// addresses and control messages.
type udpBatch struct {
	n    int          // datagrams received
	next atomic.Int32 // next datagram to claim
	refs atomic.Int32 // goroutines still using the batch

	hdrs [batchSize]unix.Mmsghdr
	iovs [batchSize]unix.Iovec
	from [batchSize]unix.RawSockaddrInet6 // large enough for IPv4 too
	oob  [batchSize]oobBuf
	bufs [batchSize][udpReadSize]byte
}

func newUDPBatch() *udpBatch {
	b := new(udpBatch)
	for i := range b.hdrs {
		b.iovs[i].Base = &b.bufs[i][0]
		b.iovs[i].SetLen(udpReadSize)
		h := &b.hdrs[i].Hdr
		h.Name = (*byte)(unsafe.Pointer(&b.from[i]))
		h.Iov = &b.iovs[i]
		h.Iovlen = 1
	}
	return b
}

// udpReader is one reader goroutine of a socket.
type udpReader struct {
	s     *Server
	u     *unit
	conn  *net.UDPConn
	rc    syscall.RawConn
	timer *time.Timer
	batch atomic.Pointer[udpBatch] // being answered; read by the timer's goroutine
	taken chan struct{}            // closed when the timer's goroutine has decided (handedOver says what)
	// handedOver: the timer's goroutine started the next reader; this one
	// exits after its current query. Written before taken is closed.
	handedOver bool
	sc         scratch

	// recvmmsg's arguments and results, kept here so that the function
	// handed to RawConn.Read is made once.
	recvFn func(fd uintptr) bool
	rb     *udpBatch
	rn     int
	rerr   syscall.Errno
}

func newBatchAny() any { return newUDPBatch() }

func (s *Server) readUDP(u *unit, conn *net.UDPConn) {
	rc, err := conn.SyscallConn()
	if err != nil {
		s.readUDPEach(u, conn)
		return
	}
	s.newUDPReader(u, conn, rc).run()
}

func (s *Server) newUDPReader(u *unit, conn *net.UDPConn, rc syscall.RawConn) *udpReader {
	r := &udpReader{s: s, u: u, conn: conn, rc: rc, taken: make(chan struct{})}
	r.timer = time.AfterFunc(time.Hour, r.takeOver)
	r.timer.Stop()
	r.recvFn = func(fd uintptr) bool {
		r0, _, e := unix.Syscall6(unix.SYS_RECVMMSG, fd, uintptr(unsafe.Pointer(&r.rb.hdrs[0])), batchSize, unix.MSG_DONTWAIT, 0, 0)
		if e == unix.EAGAIN || e == unix.EINTR {
			return false
		}
		r.rn, r.rerr = int(r0), e
		return true
	}
	return r
}

func (r *udpReader) run() {
	s := r.s
	for {
		b := s.batches.Get().(*udpBatch)
		n, err := r.recv(b)
		if err != nil {
			s.batches.Put(b)
			if r.u.stopping.Load() || errors.Is(err, net.ErrClosed) {
				return
			}
			s.log.Debug("udp read error", "addr", r.conn.LocalAddr().String(), "err", err)
			time.Sleep(time.Millisecond) // never spin on a persistent error
			continue
		}
		b.n = n
		b.next.Store(0)
		b.refs.Store(2) // this reader and, should it fire, the timer's goroutine
		s.handlers.Add(n)
		r.batch.Store(b)
		r.timer.Reset(slowBatch)
		r.answer(b, &r.sc)
		if r.timer.Stop() {
			r.unref(b, 2)
			continue
		}
		// The timer fired: its goroutine has started the next reader (or
		// is starting it); this one is done once that is registered. At
		// the worker bound it declined: this reader goes on.
		<-r.taken
		r.unref(b, 1)
		if !r.handedOver {
			r.taken = make(chan struct{})
			continue
		}
		s.nworkers.Add(-1) // counted as a worker by takeOver
		return
	}
}

// takeOver runs on the timer's goroutine when a batch is slow.
func (r *udpReader) takeOver() {
	s, u, b := r.s, r.u, r.batch.Load()
	if s.nworkers.Load() >= maxUDPWorkers {
		close(r.taken) // declined: the reader answers the rest itself
		r.unref(b, 1)
		return
	}
	// The old reader, busy with its slow query, now counts as a worker.
	s.nworkers.Add(1)
	r.handedOver = true
	// Register the new reader before the old one, still counted, exits.
	u.loops.Add(1)
	s.loops.Add(1)
	next := s.newUDPReader(u, r.conn, r.rc)
	go func() {
		defer s.loops.Done()
		defer u.loops.Done()
		next.run()
	}()
	close(r.taken)
	// Every datagram not begun yet gets a goroutine of its own (up to the
	// worker bound): a second slow query in the batch must not hold up
	// the rest either.
	for {
		if s.nworkers.Add(1) > maxUDPWorkers {
			s.nworkers.Add(-1)
			var sc scratch
			r.answer(b, &sc) // at the bound: the rest, one after the other, here
			break
		}
		i := int(b.next.Add(1)) - 1
		if i >= b.n {
			s.nworkers.Add(-1)
			break
		}
		b.refs.Add(1)
		go func() {
			defer s.nworkers.Add(-1)
			var sc scratch
			var oobOut oobBuf
			r.answerOne(b, i, &sc, &oobOut)
			r.unref(b, 1)
		}()
	}
	r.unref(b, 1)
}

func (r *udpReader) unref(b *udpBatch, n int32) {
	if b.refs.Add(-n) == 0 {
		r.s.batches.Put(b)
	}
}

// answer answers the batch's datagrams not yet claimed.
func (r *udpReader) answer(b *udpBatch, sc *scratch) {
	var oobOut oobBuf
	for {
		i := int(b.next.Add(1)) - 1
		if i >= b.n {
			return
		}
		r.answerOne(b, i, sc, &oobOut)
	}
}

func (r *udpReader) answerOne(b *udpBatch, i int, sc *scratch, oobOut *oobBuf) {
	s := r.s
	defer s.handlers.Done()
	h := &b.hdrs[i]
	if h.Hdr.Flags&unix.MSG_TRUNC != 0 {
		return
	}
	from, ok := sockaddrAddrPort(&b.from[i], h.Hdr.Namelen)
	if !ok {
		return
	}
	var dst netip.Addr
	var ifindex uint32
	if r.u.pktinfo {
		if d, idx, ok := parsePktinfo(b.oob[i].bytes()[:h.Hdr.Controllen]); ok {
			dst, ifindex = d.Unmap(), idx
		}
	}
	s.answerUDP(sc, r.u, r.conn, from, dst, ifindex, oobOut, b.bufs[i][:h.Len])
}

// recv fills b with one recvmmsg, waiting until at least one datagram is
// there (or the socket's read deadline passes or it is closed).
func (r *udpReader) recv(b *udpBatch) (int, error) {
	for i := range b.hdrs {
		h := &b.hdrs[i].Hdr
		h.Namelen = unix.SizeofSockaddrInet6
		h.Flags = 0
		b.hdrs[i].Len = 0
		if r.u.pktinfo {
			h.Control = &b.oob[i].bytes()[0]
			h.SetControllen(len(b.oob[i]) * 8)
		} else {
			h.Control = nil
			h.SetControllen(0)
		}
	}
	r.rb, r.rn, r.rerr = b, 0, 0
	err := r.rc.Read(r.recvFn)
	r.rb = nil
	if err != nil {
		return 0, err
	}
	if r.rerr != 0 {
		return 0, r.rerr
	}
	return r.rn, nil
}

// sockaddrAddrPort converts a received source address.
func sockaddrAddrPort(sa *unix.RawSockaddrInet6, namelen uint32) (netip.AddrPort, bool) {
	switch sa.Family {
	case unix.AF_INET:
		if namelen < unix.SizeofSockaddrInet4 {
			return netip.AddrPort{}, false
		}
		sa4 := (*unix.RawSockaddrInet4)(unsafe.Pointer(sa))
		port := binary.BigEndian.Uint16((*[2]byte)(unsafe.Pointer(&sa4.Port))[:])
		return netip.AddrPortFrom(netip.AddrFrom4(sa4.Addr), port), true
	case unix.AF_INET6:
		if namelen < unix.SizeofSockaddrInet6 {
			return netip.AddrPort{}, false
		}
		port := binary.BigEndian.Uint16((*[2]byte)(unsafe.Pointer(&sa.Port))[:])
		a := netip.AddrFrom16(sa.Addr)
		if sa.Scope_id != 0 {
			// A numeric zone: the net package accepts it when sending.
			a = a.WithZone(strconv.FormatUint(uint64(sa.Scope_id), 10))
		}
		return netip.AddrPortFrom(a, port), true
	}
	return netip.AddrPort{}, false
}
