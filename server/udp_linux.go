package server

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/dnsd/dnsd/pipeline"
)

// UDP on Linux: each socket has one reader goroutine that takes up to
// batchSize datagrams per recvmmsg and answers them itself, one after the
// other: no hand-off to another goroutine, no wake-up per query.
//
// A query can be slow (forwarded to an upstream, waiting on a cache miss).
// Then the batch is taken over: a goroutine of its own starts a new reader
// for the socket at once and answers each of the batch's datagrams nobody
// has begun yet on a goroutine of its own, so neither the socket nor the
// rest of the batch waits for a slow query, however many the batch holds.
// The old reader finishes the query it is on and exits. Datagrams are
// claimed with an atomic index, so each is answered exactly once; a
// reference count returns the batch to its pool when the last user is
// done. The takeover comes at once when a source says it is about to wait
// (pipeline.Waiting: the wait hook of the reader's answers), and for an
// answer slow for any other reason from the server's watchdog (see
// answerWatch), within 10-20 ms. No timer is armed per batch: with
// GOMAXPROCS above one, a timer that early wakes another thread to watch it.
//
// The reader's busy count is odd while it answers a batch; a takeover
// (the hook's or the watchdog's) makes it even first, with a
// compare-and-swap, so exactly one of the reader and the takeover learns
// that the batch was taken over.
//
// Goroutines busy with slow queries are bounded like the portable path's
// workers (maxUDPWorkers, counted in Server.nworkers): a reader that has
// been taken over counts as one while it finishes its query, and so does
// each goroutine started for a datagram. At the bound there is no
// takeover (the reader answers its whole batch, the kernel queue absorbs
// the rest) and the takeover's goroutine answers what is left of the
// batch itself instead of starting more.
//
// Replies go out together: the reader queues each reply of a batch of
// two or more and sends the queue with one sendmmsg, saving a system call
// per reply. The queue goes out every flushEvery replies rather than once
// per batch, so that the first reply of a full batch does not wait for the
// last. A reply waits behind a slow query only until the takeover: it
// sends the queue first, and from then on until the next batch every reply
// goes out at once, on its own.
const (
	batchSize  = 16
	flushEvery = 8
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
	s    *Server
	u    *unit
	conn *net.UDPConn
	rc   syscall.RawConn
	// busy counts the batches the reader answers (see above and
	// answering).
	busy  answering
	batch atomic.Pointer[udpBatch] // being answered; read by the takeover's goroutine
	taken chan struct{}            // closed when the takeover's goroutine has decided (handedOver says what)
	// hookCtx is the server's context with the wait hook (waiting), for
	// the reader's own answers.
	hookCtx context.Context
	// handedOver: the takeover's goroutine started the next reader; this
	// one exits after its current query. Written before taken is closed.
	handedOver bool
	sc         scratch
	oobOut     oobBuf // a reply's control message when sent on its own
	w          udpSends

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
	r.hookCtx = pipeline.WithWaitHook(s.ctx, func() { takeOverNow(r) })
	// recvmmsg and sendmmsg are issued as raw system calls: the socket is
	// non-blocking, so neither ever blocks, and a raw call does not tell
	// the scheduler it may hand this P to another thread. With Syscall6 a
	// sendmmsg of a batch (tens of µs of loopback delivery) kept the
	// runtime's monitor thread waking every 20 µs to take the P away and
	// back (7,500 context switches a second at saturation, 8 % of the
	// server's CPU in a profile).
	r.recvFn = func(fd uintptr) bool {
		r0, _, e := unix.RawSyscall6(unix.SYS_RECVMMSG, fd, uintptr(unsafe.Pointer(&r.rb.hdrs[0])), batchSize, unix.MSG_DONTWAIT, 0, 0)
		if e == unix.EAGAIN || e == unix.EINTR {
			return false
		}
		r.rn, r.rerr = int(r0), e
		return true
	}
	r.w.sendFn = r.sendmmsg
	return r
}

// udpSends is the reply queue of a reader's batch, for one sendmmsg. Each
// reply goes to its client's address as received and, on a wildcard
// listener, from the address the query came to (IP_PKTINFO /
// IPV6_PKTINFO, as writeUDP does). A reply stays in the pack buffer taken
// from its scratch until the sendmmsg carrying it has returned.
type udpSends struct {
	mu sync.Mutex
	// direct: the batch has been taken over (or the takeover declined):
	// until the next batch, replies are sent one by one, at once.
	direct bool
	n      int // replies queued
	off    int // next one sendmmsg sends
	hdrs   [batchSize]unix.Mmsghdr
	iovs   [batchSize]unix.Iovec
	to     [batchSize]unix.RawSockaddrInet6
	oob    [batchSize]oobBuf
	packs  [batchSize]*[]byte
	sendFn func(fd uintptr) bool
}

// queue queues out, the reply to datagram i of b (from `from`, sent to
// dst), or sends it at once when the batch has been taken over; a queue of
// flushEvery replies is sent at once. It reports whether it was queued;
// then the pack buffer has moved from sc to the queue.
func (r *udpReader) queue(b *udpBatch, i int, sc *scratch, out []byte, from netip.AddrPort, dst netip.Addr, ifindex uint32, oobOut *oobBuf) bool {
	w := &r.w
	w.mu.Lock()
	if w.direct || len(out) == 0 {
		w.mu.Unlock()
		r.sendOne(b, i, out, from, dst, ifindex, oobOut)
		return false
	}
	k := w.n
	w.n++
	w.to[k] = b.from[i]
	setReply(&w.hdrs[k].Hdr, &w.iovs[k], &w.to[k], b.hdrs[i].Hdr.Namelen, out, &w.oob[k], dst, ifindex)
	w.packs[k], sc.pack = sc.pack, nil
	if w.n >= flushEvery {
		r.flush()
	}
	w.mu.Unlock()
	return true
}

// setReply makes h, with iov, the message carrying out (not empty) to the
// client address to (namelen bytes of it), from dst on interface ifindex
// when dst is valid (the control message written to oob).
func setReply(h *unix.Msghdr, iov *unix.Iovec, to *unix.RawSockaddrInet6, namelen uint32, out []byte, oob *oobBuf, dst netip.Addr, ifindex uint32) {
	iov.Base = &out[0]
	iov.SetLen(len(out))
	h.Name = (*byte)(unsafe.Pointer(to))
	h.Namelen = namelen
	h.Iov = iov
	h.Iovlen = 1
	if dst.IsValid() {
		c := srcPktinfo(oob, dst, ifindex)
		h.Control = &c[0]
		h.SetControllen(len(c))
	} else {
		h.Control = nil
		h.SetControllen(0)
	}
}

// sendOne sends out, the reply to datagram i of b (from `from`), at once
// (from dst on interface ifindex when dst is valid), by a raw sendmsg as
// the queue's are sent: not through the net package, whose system calls
// wake the runtime's monitor thread (see run).
func (r *udpReader) sendOne(b *udpBatch, i int, out []byte, from netip.AddrPort, dst netip.Addr, ifindex uint32, oobOut *oobBuf) {
	if len(out) == 0 {
		r.s.writeUDP(r.conn, out, from, dst, ifindex, oobOut)
		return
	}
	var iov unix.Iovec
	var h unix.Msghdr
	setReply(&h, &iov, &b.from[i], b.hdrs[i].Hdr.Namelen, out, oobOut, dst, ifindex)
	var errno syscall.Errno
	err := r.rc.Write(func(fd uintptr) bool {
		for {
			_, _, e := unix.RawSyscall(unix.SYS_SENDMSG, fd, uintptr(unsafe.Pointer(&h)), 0)
			switch e {
			case unix.EINTR:
				continue
			case unix.EAGAIN:
				return false // wait until the socket is writable
			}
			errno = e
			return true
		}
	})
	if err == nil && errno != 0 {
		err = errno
	}
	if err != nil && !errors.Is(err, net.ErrClosed) {
		r.s.log.Debug("udp write error", "client", from.String(), "err", err)
	}
}

// flush sends the queued replies and marks their queries answered. The
// caller holds r.w.mu.
func (r *udpReader) flush() {
	w := &r.w
	if w.n == 0 {
		return
	}
	w.off = 0
	if err := r.rc.Write(w.sendFn); err != nil && !errors.Is(err, net.ErrClosed) {
		r.s.log.Debug("udp write error", "addr", r.conn.LocalAddr().String(), "err", err)
	}
	for k := range w.n {
		if w.packs[k] != nil {
			r.s.packs.Put(w.packs[k])
			w.packs[k] = nil
		}
		w.iovs[k].Base = nil
	}
	r.s.handlers.Add(-w.n)
	w.n = 0
}

// sendmmsg is the function handed to RawConn.Write by flush. A reply the
// kernel refuses (sendmmsg fails on its first message) is logged and
// skipped; the rest are still sent.
func (r *udpReader) sendmmsg(fd uintptr) bool {
	w := &r.w
	for w.off < w.n {
		r0, _, e := unix.RawSyscall6(unix.SYS_SENDMMSG, fd, uintptr(unsafe.Pointer(&w.hdrs[w.off])), uintptr(w.n-w.off), 0, 0, 0)
		switch e {
		case 0:
			w.off += max(int(r0), 1)
		case unix.EAGAIN:
			return false // wait until the socket is writable
		case unix.EINTR:
		default:
			to, _ := sockaddrAddrPort(&w.to[w.off], w.hdrs[w.off].Hdr.Namelen)
			r.s.log.Debug("udp write error", "client", to.String(), "err", e)
			w.off++
		}
	}
	return true
}

func (r *udpReader) run() {
	s := r.s
	defer watchOn(&s.watch, &s.watch.udps, r)()
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
		b.refs.Store(2) // this reader and, should there be one, the takeover's goroutine
		s.handlers.Add(n)
		r.batch.Store(b)
		// Even a lone datagram's reply goes through the queue, to be
		// sent by a raw sendmmsg: a send through the net package is a
		// system call the runtime is told of, and entering one wakes
		// the runtime's monitor thread from its idle sleep and resets
		// it to polling every 20 µs for the next millisecond or more.
		// Traffic in bursts with idle gaps, one datagram at a burst's
		// head, did that at every burst: on a server pinned to one
		// core the monitor then preempted the reader hundreds of times
		// a second.
		r.w.mu.Lock()
		r.w.direct = false
		r.w.mu.Unlock()
		v := r.busy.begin()
		s.watch.kick()
		r.answer(b, &r.sc, &r.oobOut, true)
		r.w.mu.Lock()
		r.flush()
		r.w.mu.Unlock()
		if r.busy.take(v) {
			r.unref(b, 2)
			continue
		}
		// Taken over: the takeover's goroutine has started the next
		// reader (or is starting it); this one is done once that is
		// registered. At the worker bound it declined: this reader goes
		// on.
		<-r.taken
		r.unref(b, 1)
		if !r.handedOver {
			r.taken = make(chan struct{})
			continue
		}
		s.nworkers.Add(-1) // counted as a worker by takeBatch
		return
	}
}

// The watchdog, and the wait hook of the reader's answers (a source about
// to wait for something outside the process: the batch is taken over
// now), take over the batch the reader began as busy count v, if it is
// still on it, through these.
func (r *udpReader) answers() *answering { return &r.busy }
func (r *udpReader) takeOver(v uint64) {
	if r.busy.take(v) {
		go r.takeBatch()
	}
}

// takeBatch runs on a goroutine of its own when a batch is slow.
func (r *udpReader) takeBatch() {
	s, u, b := r.s, r.u, r.batch.Load()
	// The replies ready so far go out now, later ones as they are made.
	r.w.mu.Lock()
	r.w.direct = true
	r.flush()
	r.w.mu.Unlock()
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
			var oobOut oobBuf
			r.answer(b, &sc, &oobOut, false) // at the bound: the rest, one after the other, here
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
			r.answerOne(b, i, &sc, &oobOut, false)
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

// answer answers the batch's datagrams not yet claimed, queueing the
// replies for r's next flush when queue is set (only the reader does).
// sc and oobOut belong to the caller's goroutine: the reader's own are
// kept in r, so that answering a batch allocates nothing.
func (r *udpReader) answer(b *udpBatch, sc *scratch, oobOut *oobBuf, queue bool) {
	for {
		i := int(b.next.Add(1)) - 1
		if i >= b.n {
			return
		}
		r.answerOne(b, i, sc, oobOut, queue)
	}
}

// answerOne answers datagram i of b. A queued reply's query is marked
// answered by the flush that sends it.
func (r *udpReader) answerOne(b *udpBatch, i int, sc *scratch, oobOut *oobBuf, queue bool) {
	s := r.s
	h := &b.hdrs[i]
	from, ok := sockaddrAddrPort(&b.from[i], h.Hdr.Namelen)
	if h.Hdr.Flags&unix.MSG_TRUNC != 0 {
		s.handlers.Done()
		s.oversized(from.Addr())
		return
	}
	if !ok {
		s.handlers.Done()
		return
	}
	var dst netip.Addr
	var ifindex uint32
	if r.u.pktinfo {
		if d, idx, ok := parsePktinfo(b.oob[i].bytes()[:h.Hdr.Controllen]); ok {
			dst, ifindex = d.Unmap(), idx
		}
	}
	ctx := s.ctx
	if queue {
		ctx = r.hookCtx // the reader's own answer
	}
	out := s.serveUDP(ctx, sc, r.u, from, b.bufs[i][:h.Len])
	queued := out != nil && queue && r.queue(b, i, sc, out, from, dst, ifindex, oobOut)
	if out != nil && !queue {
		r.sendOne(b, i, out, from, dst, ifindex, oobOut)
	}
	s.release(sc)
	if !queued {
		s.handlers.Done()
	}
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
