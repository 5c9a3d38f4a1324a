package server

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
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

// serveConn serves one TCP or TLS connection. Clients may pipeline
// (RFC 7766 §6.2.1.1), and a slow answer (a forward waiting on its
// upstream) holds up no other query of the connection: queries are
// answered concurrently, at most max_tcp_pipeline at once (over it the
// reader waits for an answer before it reads on), and answers go out as
// they are ready, possibly out of order (the ID tells them apart), each
// written whole; see tcpConn. The connection is idle only while nothing
// is in flight: it is closed when no message has begun within
// tcp_idle_timeout of the last message read or answer written. Every
// message must arrive in full within the idle timeout of the previous
// one, so neither idle nor trickling clients hold a connection; writes
// have the same bound. When reading stops (client done, idle, server
// stopping, unparseable message) the answers in flight are still sent,
// then the connection closes.
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
	ctx, cancel := context.WithCancel(s.ctx)
	defer cancel()
	cc := &tcpConn{
		s: s, u: u, raw: raw, c: c, proto: proto, client: tcpClient(raw),
		ctx: ctx, cancel: cancel,
		br:   bufio.NewReaderSize(c, 1024),
		work: make(chan *tcpJob),
		pipe: s.set.Load().pipeline,
	}
	cc.free = make(chan *tcpJob, cc.pipe)
	s.watch.add(cc)
	defer s.watch.remove(cc)
	cc.wg.Add(1) // the reader
	cc.readLoop()
	cc.wg.Wait()
}

// limits.max_tcp_pipeline (Settings; default defaultPipeline) bounds the
// queries of one TCP or TLS connection that are answered at once, and so
// the goroutines and buffers one connection may hold: in all at most
// max_tcp_connections × max_tcp_pipeline queries are in flight over TCP
// and TLS. A client sending more waits for answers (TCP backpressure), it
// is never refused. A connection keeps the bound it was accepted with.

// tcpInlineWait is how often the watchdog looks at the connections: a
// reader that has been answering one query itself for between one and
// two of these is relieved (see tcpConn, tcpWatch). Local answers and
// cache hits take microseconds; an upstream round trip takes longer.
const tcpInlineWait = time.Millisecond

// tcpWatchQuiet: the watchdog sleeps after this many looks in a row found
// no reader answering, until a reader answers again (a channel send that
// readers pay only then). Answers take microseconds, so looks rarely find
// one even under load: this sets how often it sleeps and is woken, not
// whether it sees a slow answer.
const tcpWatchQuiet = 10

// tcpMsgKeep: a job keeps its message buffer for the next query up to
// this size; a rarer larger query gets a buffer of its own.
const tcpMsgKeep = 4096

// tcpJob is one message read from a connection and being answered.
type tcpJob struct {
	hdr [2]byte // the length prefix, read here (on the heap already)
	msg []byte
}

// tcpConn is one TCP or TLS connection being served by one reader and up
// to max_tcp_pipeline workers.
//
// The reader reads messages. A query that arrives while nothing else is
// in flight (a client asking one query at a time, or a burst of fast
// ones) is answered by the reader itself: no hand-off, no goroutine per
// query, no timer (re-arming a 1 ms timer per query wakes the netpoller
// and costs more than the answer). Should that answer take longer than
// tcpInlineWait, the server's watchdog (tcpWatch) starts a new reader, so
// the queries behind it wait 1-2 ms at most; the old reader finishes its
// answer and leaves. A query that arrives while another is in flight
// goes to an idle worker, or a new one; workers stay until the
// connection closes.
// The connection's goroutines (the reader, the workers) are counted in wg
// and waited for before it closes.
type tcpConn struct {
	s      *Server
	u      *unit
	raw    net.Conn
	c      net.Conn // raw, or the TLS connection over it
	proto  transport
	client netip.Addr
	// ctx is the resolutions' context: cancelled when the connection
	// has failed and no answer can be sent any more.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	// The reader's, handed to a new reader with inline.
	br    *bufio.Reader
	pipe  int // this connection's max_tcp_pipeline
	jobs  int // jobs made so far, ≤ pipe
	nwork int // workers started, ≤ pipe

	// inline counts the reader's own answers: odd while one is being
	// given. The reader makes it even when done; the watchdog, when it
	// sees the same odd value twice, makes it even first and starts a
	// new reader. seen and idx are the watchdog's (under tcpWatch.mu).
	inline atomic.Uint64
	seen   uint64
	idx    int

	work chan *tcpJob // reader → an idle worker; closed when reading stops
	free chan *tcpJob // jobs not in flight

	inflight  atomic.Int32 // messages read and not yet answered
	lastWrite atomic.Int64 // when the last answer was written (UnixNano)
	stopRead  atomic.Bool  // read no further message (set by a worker)
	failed    atomic.Bool  // connection closed after a write or transfer failure

	// wmu is held while one answer, or every message of one zone
	// transfer, is written: messages never interleave.
	wmu sync.Mutex
}

// readLoop reads messages until the client is done, idle or unusable, or
// until another goroutine has taken over reading.
func (cc *tcpConn) readLoop() {
	sc := new(scratch) // for the answers given here
	var j *tcpJob      // the job of the last answer given here, kept
	for {
		if j == nil {
			j = cc.job()
		}
		if !cc.read(j) {
			cc.free <- j
			break
		}
		if cc.inflight.Add(1) == 1 {
			if !cc.answerInline(sc, j) {
				return // the new reader owns the rest
			}
			continue
		}
		cc.dispatch(j)
		j = nil
	}
	close(cc.work) // idle workers leave
	cc.wg.Done()
}

// answerInline answers j on the reader, which keeps j for the next
// message; false: reading was taken over meanwhile (j is given back).
func (cc *tcpConn) answerInline(sc *scratch, j *tcpJob) bool {
	v := cc.inline.Add(1)
	cc.s.watch.kick()
	cc.answer(sc, j.msg)
	if !cc.inline.CompareAndSwap(v, v+1) {
		cc.done(j)
		return false
	}
	cc.inflight.Add(-1)
	j.trim()
	return true
}

// job returns a free job; with max_tcp_pipeline in flight it waits for one
// to be answered.
func (cc *tcpConn) job() *tcpJob {
	select {
	case j := <-cc.free:
		return j
	default:
	}
	if cc.jobs < cc.pipe {
		cc.jobs++
		return &tcpJob{}
	}
	return <-cc.free
}

// done gives back an answered job.
func (cc *tcpConn) done(j *tcpJob) {
	cc.inflight.Add(-1)
	j.trim()
	cc.free <- j
}

// trim drops a large message buffer (see tcpMsgKeep).
func (j *tcpJob) trim() {
	if cap(j.msg) > tcpMsgKeep {
		j.msg = nil
	}
}

// dispatch hands j to an idle worker, or starts one. With every worker
// started, one is about to be idle: at most max_tcp_pipeline-1 other
// messages are in flight.
func (cc *tcpConn) dispatch(j *tcpJob) {
	select {
	case cc.work <- j:
		return
	default:
	}
	if cc.nwork < cc.pipe {
		cc.nwork++
		cc.wg.Add(1)
		go cc.worker(j)
		return
	}
	cc.work <- j
}

// worker answers j and then the jobs handed to it, until reading stops.
func (cc *tcpConn) worker(j *tcpJob) {
	defer cc.wg.Done()
	sc := new(scratch)
	for ok := true; ok; j, ok = <-cc.work {
		cc.answer(sc, j.msg)
		cc.done(j)
	}
}

// read reads the next message into j.msg; false: stop reading.
func (cc *tcpConn) read(j *tcpJob) bool {
	idle := cc.s.set.Load().idle
	deadline := time.Now().Add(idle)
	hdr := j.hdr[:]
	for {
		// Deadline first, then the stop checks: see unit.stop.
		_ = cc.c.SetReadDeadline(deadline)
		if cc.u.stopping.Load() || cc.stopRead.Load() {
			return false
		}
		n, err := io.ReadFull(cc.br, hdr)
		if err == nil {
			break
		}
		var ne net.Error
		if n > 0 || !errors.As(err, &ne) || !ne.Timeout() {
			if !errors.Is(err, io.EOF) {
				cc.fail() // reset, or a broken TLS stream: the client is gone
			}
			return false
		}
		// No message begun: the connection is idle only once every
		// answer has been written, and for tcp_idle_timeout since.
		now := time.Now()
		if cc.inflight.Load() > 0 {
			deadline = now.Add(idle)
			continue
		}
		if end := time.Unix(0, cc.lastWrite.Load()).Add(idle); end.After(now) {
			deadline = end
			continue
		}
		return false
	}
	n := int(binary.BigEndian.Uint16(hdr))
	if n == 0 {
		return false
	}
	if cap(j.msg) < n {
		j.msg = make([]byte, n, max(n, 512))
	}
	j.msg = j.msg[:n]
	if _, err := io.ReadFull(cc.br, j.msg); err != nil {
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			cc.fail()
		}
		return false
	}
	return true
}

// answer answers one message: a query, or a zone transfer.
func (cc *tcpConn) answer(sc *scratch, msg []byte) {
	s := cc.s
	if isTransfer(msg) {
		if !s.serveTransfer(cc.ctx, cc, msg) {
			cc.fail()
		}
		return
	}
	sc.listen = cc.u.listen
	out := s.serveRaw(cc.ctx, sc, cc.proto, cc.client, cc.u.loopback, msg)
	defer s.release(sc)
	if out == nil { // unparseable or not a query: give up on this stream
		cc.stopReading()
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
	if !cc.wmu.TryLock() {
		// Another answer is being written: wait holding this answer's
		// bytes only, not a whole pack buffer.
		wire = bytes.Clone(wire)
		s.release(sc)
		cc.wmu.Lock()
	}
	err := cc.write(wire)
	cc.wmu.Unlock()
	if err != nil {
		cc.fail()
	}
}

// write sends one whole message (length prefix included); the caller
// holds wmu.
func (cc *tcpConn) write(b []byte) error {
	if cc.failed.Load() {
		return net.ErrClosed
	}
	now := time.Now()
	_ = cc.c.SetWriteDeadline(now.Add(cc.s.set.Load().idle))
	_, err := cc.c.Write(b)
	cc.lastWrite.Store(now.UnixNano())
	return err
}

// stopReading makes the reader stop at its next message; the answers in
// flight are still sent.
func (cc *tcpConn) stopReading() {
	cc.stopRead.Store(true)
	_ = cc.c.SetReadDeadline(time.Now())
}

// fail closes the connection at once (a write failed, or a zone transfer
// could not be completed): answers in flight are abandoned and their
// resolutions cancelled.
func (cc *tcpConn) fail() {
	if cc.failed.CompareAndSwap(false, true) {
		cc.cancel()
		_ = cc.raw.Close()
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

// tcpWatch is the server's watchdog over the answers connection readers
// give themselves (see tcpConn). Every tcpInlineWait it looks at the open
// connections; a reader that has been answering the same query since the
// previous look is relieved: a new goroutine takes over reading, owned by
// the connection like the old one. It sleeps while no reader answers
// anything, and runs until the server has shut down.
type tcpWatch struct {
	once   sync.Once
	mu     sync.Mutex
	conns  []*tcpConn
	parked atomic.Bool
	wake   chan struct{} // capacity 1
}

// startWatch starts the watchdog once (owned by s.workers, stopped by s.done).
func (s *Server) startWatch() {
	s.watch.once.Do(func() {
		s.watch.wake = make(chan struct{}, 1)
		s.workers.Add(1)
		go s.runWatch()
	})
}

func (w *tcpWatch) add(cc *tcpConn) {
	w.mu.Lock()
	cc.idx = len(w.conns)
	w.conns = append(w.conns, cc)
	w.mu.Unlock()
}

func (w *tcpWatch) remove(cc *tcpConn) {
	w.mu.Lock()
	last := len(w.conns) - 1
	w.conns[cc.idx] = w.conns[last]
	w.conns[cc.idx].idx = cc.idx
	w.conns[last] = nil
	w.conns = w.conns[:last]
	w.mu.Unlock()
}

// kick wakes the watchdog if it sleeps; a reader calls it after it has
// begun an answer.
func (w *tcpWatch) kick() {
	if w.parked.Load() && w.parked.CompareAndSwap(true, false) {
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
}

func (s *Server) runWatch() {
	defer s.workers.Done()
	w := &s.watch
	tick := time.NewTicker(tcpInlineWait)
	defer tick.Stop()
	quiet := 0
	for {
		select {
		case <-s.done:
			return
		case <-tick.C:
		}
		if w.look() {
			quiet = 0
			continue
		}
		if quiet++; quiet < tcpWatchQuiet {
			continue
		}
		// Say so, then look once more: a reader that began its answer
		// before it could see parked is found here.
		w.parked.Store(true)
		if w.look() {
			w.parked.Store(false)
			quiet = 0
			continue
		}
		tick.Stop()
		select {
		case <-s.done:
			return
		case <-w.wake:
		}
		quiet = 0
		tick.Reset(tcpInlineWait)
	}
}

// look relieves the readers that are still on the answer they were on at
// the previous look; it reports whether any reader was answering.
func (w *tcpWatch) look() (busy bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, cc := range w.conns {
		v := cc.inline.Load()
		if v&1 == 0 {
			continue
		}
		busy = true
		if v == cc.seen && cc.inline.CompareAndSwap(v, v+1) {
			go cc.readLoop() // the reader's place in cc.wg passes to it
		}
		cc.seen = v
	}
	return busy
}
