package server

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dnsd/dnsd/pipeline"
)

// acceptTCP accepts connections on a tcp or tls unit until it is stopped.
func (s *Server) acceptTCP(u *unit) {
	s.accept(u, func(c net.Conn, key uint64) bool {
		if !u.track(c) {
			return false
		}
		s.handlers.Add(1)
		go s.serveConn(u, c, key)
		return true
	})
}

// accept accepts u's connections until it is stopped, for every kind of
// stream listener. Connections over max_tcp_connections (server-wide) or
// over max_tcp_per_client (from one client /24 or /56) are closed at
// once; an accept error (out of file descriptors and the like) is backed
// off and logged once per state change. serve takes an admitted
// connection; false means the unit is stopping: the connection is
// closed and accepting ends.
func (s *Server) accept(u *unit, serve func(c net.Conn, key uint64) bool) {
	errs := acceptLog{log: s.log, proto: u.key.proto, addr: u.ln.Addr().String()}
	for {
		c, err := u.ln.Accept()
		if err != nil {
			if u.stopping.Load() || errors.Is(err, net.ErrClosed) {
				return
			}
			time.Sleep(errs.failed(err))
			continue
		}
		errs.ok()
		key, ok := s.admit(c)
		if !ok {
			continue
		}
		if !serve(c, key) {
			s.leave(key)
			_ = c.Close()
			return
		}
	}
}

// acceptLog logs the accept errors of one listener once per state change:
// WARN when accepting starts failing (and when the error changes), INFO
// when it accepts again; the retries in between are DEBUG. It also keeps
// the backoff between retries (5 ms doubling to 1 s).
type acceptLog struct {
	log         *slog.Logger
	proto, addr string
	failing     string // the error, "" while accepting
	since       time.Time
	backoff     time.Duration
}

// failed records an accept error and returns how long to wait before the
// next accept.
func (a *acceptLog) failed(err error) time.Duration {
	a.backoff = min(max(2*a.backoff, 5*time.Millisecond), time.Second)
	msg := err.Error()
	switch {
	case a.failing == "":
		a.since = time.Now()
		a.log.Warn("accept failing, retrying", "proto", a.proto, "addr", a.addr, "err", msg)
	case a.failing != msg:
		a.log.Warn("accept failing, retrying", "proto", a.proto, "addr", a.addr, "err", msg)
	default:
		a.log.Debug("accept failing, retrying", "proto", a.proto, "addr", a.addr, "err", msg, "retry_in", a.backoff)
	}
	a.failing = msg
	return a.backoff
}

// ok records a connection accepted.
func (a *acceptLog) ok() {
	if a.failing != "" {
		a.log.Info("accepting again", "proto", a.proto, "addr", a.addr, "after", time.Since(a.since).Round(time.Millisecond))
		a.failing = ""
	}
	a.backoff = 0
}

// serveConn serves one TCP or TLS connection. Clients may pipeline
// (RFC 7766 §6.2.1.1), and a slow answer (a forward waiting on its
// upstream) holds up no other query of the connection: queries are
// answered concurrently, at most max_tcp_pipeline at once (over it the
// reader waits for an answer before it reads on), and answers go out as
// they are ready, possibly out of order (the ID tells them apart), each
// written whole; see tcpConn. The reader takes in everything the client
// has sent in one read and answers every complete query of it before it
// writes: the answers it gave meanwhile go out together, in one write
// (one TLS record), just before it would wait for more input. The
// connection is idle only while nothing is in flight: it is closed when
// no message has begun within tcp_idle_timeout of the last message read
// or answer written. Every message must arrive in full within the idle
// timeout of the wait for it, so neither idle nor trickling clients hold
// a connection; writes have the same bound. When reading stops (client
// done, idle, server stopping, unparseable message) the answers in flight
// are still sent, then the connection closes.
func (s *Server) serveConn(u *unit, raw net.Conn, key uint64) {
	defer s.handlers.Done()
	defer s.leave(key)
	defer u.untrack(raw)
	defer raw.Close()

	proto := protoTCP
	var (
		c   net.Conn = raw
		tr  *tlsRaw
		tcc *tls.Conn
	)
	st := s.set.Load()
	if u.key.proto == "tls" {
		proto = protoTLS
		tr = &tlsRaw{Conn: raw}
		tc := tls.Server(tr, st.tls)
		ctx, cancel := context.WithTimeout(s.ctx, st.idle)
		err := tc.HandshakeContext(ctx)
		cancel()
		if err != nil {
			s.log.Debug("tls handshake failed", "client", raw.RemoteAddr().String(), "err", err)
			return
		}
		c, tcc = tc, tc
	}
	ctx, cancel := context.WithCancel(s.ctx)
	defer cancel()
	cc := &tcpConn{
		s: s, u: u, raw: raw, c: c, tlsc: tcc, proto: proto, client: tcpClient(raw),
		ctx: ctx, cancel: cancel,
		rbuf: make([]byte, tcpReadSize),
		work: make(chan *tcpJob),
		pipe: st.pipeline,
	}
	cc.free = make(chan *tcpJob, cc.pipe)
	cc.inlineCtx = pipeline.WithWaitHook(ctx, func() { takeOverNow(cc) })
	cc.sock, cc.sw = newSockReader(raw, cc.flush), newSockWriter(raw)
	// A write that must wait for room waits tcp_idle_timeout at most.
	cc.sw.full = func() { _ = raw.SetWriteDeadline(time.Now().Add(cc.s.set.Load().idle)) }
	if tr != nil {
		tr.sock, tr.sw = cc.sock, cc.sw
	}
	// The read deadline is moved only when it passes (see fill); the
	// stop checks come after it is set (see unit.stop).
	cc.since = time.Now()
	_ = c.SetReadDeadline(cc.since.Add(st.idle))
	defer watchOn(&s.watch, &s.watch.conns, cc)()
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

// tcpMsgKeep: a job keeps its message buffer for the next query up to
// this size; a rarer larger query gets a buffer of its own.
const tcpMsgKeep = 4096

// tcpReadSize is a connection's read buffer: a pipelining client's
// queries (40-60 bytes each) arrive by the dozen in one read. A larger
// message gets a buffer of its own until it has been read.
const tcpReadSize = 4096

// tcpFlushSize: the reader writes the answers it holds as soon as they
// reach this size (one full TLS record), without waiting for the end of
// the input it has.
const tcpFlushSize = 16 << 10

// tcpJob is one message read from a connection and being answered.
type tcpJob struct {
	msg []byte
}

// tcpConn is one TCP or TLS connection being served by one reader and up
// to max_tcp_pipeline workers.
//
// The reader reads messages. A query that arrives while nothing else is
// in flight (a client asking one query at a time, or a burst of fast
// ones) is answered by the reader itself: no hand-off, no goroutine per
// query, no timer (re-arming a 1 ms timer per query wakes the netpoller
// and costs more than the answer). Its answers wait in wbuf until the
// reader has answered every complete message it has read (or wbuf is
// full): then they are written at once, in one write. Should the answer
// wait for an upstream (the source says so through the wait hook of
// inlineCtx) or be a zone transfer, a new reader is started at once; an
// answer slow for another reason is found by the server's watchdog
// (answerWatch) within one to two watchEvery. The new reader takes over
// rbuf and wbuf, the old one writes its answer itself and leaves. A
// query that arrives while another is in flight goes to an idle worker,
// or a new one; a worker writes each answer as soon as it has it, and
// stays until the connection closes.
// The connection's goroutines (the reader, the workers, a relieved reader
// until its answer is sent) are counted in wg and waited for before it
// closes.
type tcpConn struct {
	s      *Server
	u      *unit
	raw    net.Conn
	c      net.Conn  // raw, or the TLS connection over it
	tlsc   *tls.Conn // c when it is a TLS connection
	proto  transport
	client netip.Addr
	// ctx is the resolutions' context: cancelled when the connection
	// has failed and no answer can be sent any more. inlineCtx is ctx
	// with the wait hook, for the reader's own answers.
	ctx       context.Context
	inlineCtx context.Context
	cancel    context.CancelFunc
	wg        sync.WaitGroup

	// The reader's, handed to a new reader with inline.
	sock       *sockReader
	rbuf       []byte    // bytes read; rbuf[rpos:rend] not taken yet
	rpos, rend int       // see rbuf
	wbuf       *[]byte   // answers given by the reader, not written yet (from Server.wbufs)
	taken      uint64    // messages taken from rbuf
	waitFor    uint64    // taken+1 once the wait for the next message has begun
	since      time.Time // when that wait began
	pipe       int       // this connection's max_tcp_pipeline
	jobs       int       // jobs made so far, ≤ pipe
	nwork      int       // workers started, ≤ pipe

	// inline counts the reader's own answers (see answering): whoever
	// takes one over (relieve) starts a new reader.
	inline answering

	work chan *tcpJob // reader → an idle worker; closed when reading stops
	free chan *tcpJob // jobs not in flight

	inflight  atomic.Int32 // messages read and not yet answered
	lastWrite atomic.Int64 // when the last answer was written (UnixNano)
	stopRead  atomic.Bool  // read no further message (set by a worker)
	failed    atomic.Bool  // connection closed after a write or transfer failure

	// wmu is held while one answer, the answers of one flush, or every
	// message of one zone transfer, is written: messages never
	// interleave. sw writes the socket (under wmu).
	wmu sync.Mutex
	sw  *sockWriter
}

// tlsRaw is the TCP connection under a TLS one: once the handshake is
// done, the TLS connection reads it through the reader's sockReader, so
// the answers the reader holds are written just before a read would wait,
// and writes it through the connection's sockWriter.
type tlsRaw struct {
	net.Conn
	sock *sockReader // the reader's, nil during the handshake
	sw   *sockWriter // nil during the handshake
}

func (r *tlsRaw) Read(b []byte) (int, error) {
	if r.sock != nil {
		return r.sock.read(r.Conn, b)
	}
	return r.Conn.Read(b)
}

func (r *tlsRaw) Write(b []byte) (int, error) {
	if r.sw != nil {
		return r.sw.write(r.Conn, b)
	}
	return r.Conn.Write(b)
}

// readLoop reads messages until the client is done, idle or unusable, or
// until another goroutine has taken over reading.
func (cc *tcpConn) readLoop() {
	sc := cc.s.scratches.Get().(*scratch) // for the answers given here
	defer cc.s.scratches.Put(sc)
	var j *tcpJob // the job of the last answer given here, kept
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
				// The new reader owns the rest; this goroutine's
				// answer has been sent.
				cc.wg.Done()
				return
			}
			continue
		}
		cc.dispatch(j)
		j = nil
	}
	cc.flush()
	close(cc.work) // idle workers leave
	cc.wg.Done()
}

// answerInline answers j on the reader, which keeps j for the next
// message; false: reading was taken over meanwhile (j is given back).
func (cc *tcpConn) answerInline(sc *scratch, j *tcpJob) bool {
	transfer := isTransfer(j.msg)
	if transfer {
		cc.flush() // the answers before it are not held up by it
	}
	v := cc.inline.begin()
	var wire []byte
	if transfer {
		// A transfer writes for as long as the secondary reads.
		cc.relieve(v)
		cc.transfer(j.msg)
	} else {
		cc.s.watch.kick()
		wire = cc.respond(cc.inlineCtx, sc, j.msg)
	}
	if !cc.inline.take(v) {
		// wbuf is the new reader's now.
		cc.send(sc, wire)
		cc.done(j)
		return false
	}
	if wire != nil {
		if cc.wbuf == nil {
			cc.wbuf = cc.s.wbufs.Get().(*[]byte)
		}
		*cc.wbuf = append(*cc.wbuf, wire...)
		cc.s.release(sc)
		if len(*cc.wbuf) >= tcpFlushSize {
			cc.flush()
		}
	}
	cc.inflight.Add(-1)
	j.trim()
	return true
}

// relieve starts a new reader when the reader is still on the answer it
// began as inline value v: reading goes on there, while this goroutine
// finishes its answer and writes it itself (see answerInline). The
// relieved reader is still counted in wg until its answer is sent, so the
// count is not zero here.
func (cc *tcpConn) relieve(v uint64) {
	if cc.inline.take(v) {
		cc.wg.Add(1)
		go cc.readLoop()
	}
}

// The watchdog, and the wait hook of the reader's answers (a source about
// to wait for something outside the process: the reader is relieved now,
// not when the watchdog finds it), relieve through these. A reader the
// watchdog relieved before its source said so relieves the reader after
// it, should that one be answering: one reader more, nothing else.
func (cc *tcpConn) answers() *answering { return &cc.inline }
func (cc *tcpConn) takeOver(v uint64)   { cc.relieve(v) }

// job returns a free job; with max_tcp_pipeline in flight it waits for one
// to be answered (after writing the answers the reader holds).
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
	cc.flush()
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
	cc.flush()
	cc.work <- j
}

// worker answers j and then the jobs handed to it, until reading stops.
func (cc *tcpConn) worker(j *tcpJob) {
	defer cc.wg.Done()
	sc := new(scratch)
	for ok := true; ok; j, ok = <-cc.work {
		if isTransfer(j.msg) {
			cc.transfer(j.msg)
		} else {
			cc.send(sc, cc.respond(cc.ctx, sc, j.msg))
		}
		cc.done(j)
	}
}

// read takes the next message into j.msg, reading more when the ones
// read are all taken; false: stop reading.
func (cc *tcpConn) read(j *tcpJob) bool {
	for {
		if cc.u.stopping.Load() || cc.stopRead.Load() {
			return false
		}
		if b := cc.rbuf[cc.rpos:cc.rend]; len(b) >= 2 {
			n := int(binary.BigEndian.Uint16(b))
			if n == 0 {
				return false
			}
			if len(b) >= 2+n {
				cc.rpos += 2 + n
				cc.taken++
				if cap(j.msg) < n {
					j.msg = make([]byte, n, max(n, 512))
				}
				j.msg = append(j.msg[:0], b[2:2+n]...)
				return true
			}
		}
		if !cc.fill() {
			return false
		}
	}
}

// fill reads more of the stream into rbuf. It writes the answers the
// reader holds only when the client has sent nothing more yet, just
// before it waits for more (see sockReader); what has arrived meanwhile
// is answered first, and those answers go out in the same write (a TLS
// connection's records already received are read without a system
// call). false: stop reading.
//
// The read deadline is only moved when it passes: then the connection is
// closed when no message has begun within tcp_idle_timeout of the last
// answer written, with nothing in flight, or when a message begun has
// not arrived in full within tcp_idle_timeout of the wait for it.
func (cc *tcpConn) fill() bool {
	cc.room()
	idle := cc.s.set.Load().idle
	if cc.waitFor != cc.taken+1 {
		cc.waitFor = cc.taken + 1
		cc.since = time.Now()
	}
	for {
		var (
			n   int
			err error
		)
		if cc.tlsc != nil {
			n, err = cc.tlsc.Read(cc.rbuf[cc.rend:])
		} else {
			n, err = cc.sock.read(cc.raw, cc.rbuf[cc.rend:])
		}
		if n > 0 || err == nil {
			cc.rend += n
			return true
		}
		if !isTimeout(err) {
			return cc.readFailed(err)
		}
		now := time.Now()
		end := cc.since.Add(idle) // the message's own bound
		if cc.rpos == cc.rend {
			// No message begun: the connection is idle only once every
			// answer has been written, and for tcp_idle_timeout since.
			if cc.inflight.Load() > 0 {
				end = now.Add(idle)
			} else if w := time.Unix(0, cc.lastWrite.Load()).Add(idle); w.After(end) {
				end = w
			}
		}
		if !end.After(now) {
			return false
		}
		// Deadline first, then the stop checks: see unit.stop.
		_ = cc.c.SetReadDeadline(end)
		if cc.u.stopping.Load() || cc.stopRead.Load() {
			return false
		}
	}
}

// room makes room in rbuf for the rest of the message begun at rpos (at
// least its length prefix) and for a good read, moving what is left to
// the front, or into a buffer of its own when the message is larger than
// the usual one.
func (cc *tcpConn) room() {
	b := cc.rbuf[cc.rpos:cc.rend]
	if len(b) == 0 {
		if len(cc.rbuf) > tcpReadSize {
			cc.rbuf = make([]byte, tcpReadSize) // a large message read: back to the usual size
		}
		cc.rpos, cc.rend = 0, 0
		return
	}
	need := 2
	if len(b) >= 2 {
		need += int(binary.BigEndian.Uint16(b))
	}
	switch {
	case need > len(cc.rbuf):
		nb := make([]byte, need)
		copy(nb, b)
		cc.rbuf = nb
	case cc.rpos+need > len(cc.rbuf) || len(cc.rbuf)-cc.rend < tcpReadSize/4:
		copy(cc.rbuf, b)
	default:
		return
	}
	cc.rpos, cc.rend = 0, len(b)
}

// readFailed ends reading after a read error other than a timeout.
func (cc *tcpConn) readFailed(err error) bool {
	if !errors.Is(err, io.EOF) {
		cc.fail() // reset, or a broken TLS stream: the client is gone
	}
	return false
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// respond answers one query; it returns the answer with its length
// prefix, in sc's pack buffer until s.release(sc), or nil when there is
// nothing to send.
func (cc *tcpConn) respond(ctx context.Context, sc *scratch, msg []byte) []byte {
	s := cc.s
	sc.listen = cc.u.listen
	out := s.serveRaw(ctx, sc, cc.proto, cc.client, cc.u.loopback, msg)
	if out == nil { // unparseable or not a query: give up on this stream
		s.release(sc)
		cc.stopReading()
		return nil
	}
	var wire []byte
	if pb := *sc.pack; len(pb) >= len(out)+2 && &pb[2] == &out[0] {
		wire = pb[:len(out)+2] // packed in place behind the prefix
	} else {
		wire = make([]byte, len(out)+2)
		copy(wire[2:], out)
	}
	binary.BigEndian.PutUint16(wire, uint16(len(out)))
	return wire
}

// transfer answers a zone transfer request, writing its messages.
func (cc *tcpConn) transfer(msg []byte) {
	if !cc.s.serveTransfer(cc.ctx, cc, msg) {
		cc.fail()
	}
}

// send writes one answer from respond at once (nil: none) and releases sc.
func (cc *tcpConn) send(sc *scratch, wire []byte) {
	var err error
	if wire == nil {
		return
	}
	if cc.wmu.TryLock() {
		err = cc.write(wire)
		cc.wmu.Unlock()
		cc.s.release(sc)
	} else {
		// Another answer is being written: wait holding this answer's
		// bytes only, not a whole pack buffer.
		wire = bytes.Clone(wire)
		cc.s.release(sc)
		cc.wmu.Lock()
		err = cc.write(wire)
		cc.wmu.Unlock()
	}
	if err != nil {
		cc.fail()
	}
}

// flush writes the answers the reader holds, in one write.
func (cc *tcpConn) flush() {
	if cc.wbuf == nil {
		return
	}
	cc.wmu.Lock()
	err := cc.write(*cc.wbuf)
	cc.wmu.Unlock()
	if cap(*cc.wbuf) <= 2*tcpFlushSize {
		*cc.wbuf = (*cc.wbuf)[:0]
		cc.s.wbufs.Put(cc.wbuf)
	}
	cc.wbuf = nil
	if err != nil {
		cc.fail()
	}
}

// write sends whole messages (length prefixes included); the caller
// holds wmu.
func (cc *tcpConn) write(b []byte) error {
	if cc.failed.Load() {
		return net.ErrClosed
	}
	now := time.Now()
	if !cc.sw.waitsWithDeadline() {
		// No raw socket: every write gets its deadline.
		_ = cc.c.SetWriteDeadline(now.Add(cc.s.set.Load().idle))
	}
	var err error
	if cc.tlsc != nil {
		_, err = cc.tlsc.Write(b)
	} else {
		_, err = cc.sw.write(cc.raw, b)
	}
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
