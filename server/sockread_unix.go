//go:build unix

package server

import (
	"io"
	"net"
	"os"
	"syscall"
	"time"
	"unsafe"
)

// sockReader reads a TCP connection's socket for its reader and writes
// the answers the reader holds (flush) just before a read would wait:
// when the client has sent more meanwhile, the answers wait for it to be
// read, and go out together with the next ones. Reading first and writing
// only on EAGAIN, in one RawConn.Read, costs no system call more than a
// plain read (the poller's readiness is not lost in between).
//
// The reads, like the writes of sockWriter, are raw system calls: the
// socket is non-blocking, so neither ever blocks, and a raw call does
// not tell the scheduler it may hand the P to another thread. A call the
// scheduler is told of wakes the runtime's monitor thread from its idle
// sleep, and resets it to looking every 20 µs for a millisecond or more:
// a connection that goes idle between a client's bursts paid that at
// every burst (see the UDP reader, which does the same).
type sockReader struct {
	rc      syscall.RawConn // nil: the connection has no socket
	flush   func()
	try     func(fd uintptr) bool // r.read1, bound once
	b       []byte
	n       int
	errno   error
	flushed bool
}

// socketOf returns c's raw socket, nil when it has none.
func socketOf(c net.Conn) syscall.RawConn {
	if sc, ok := c.(syscall.Conn); ok {
		if rc, err := sc.SyscallConn(); err == nil {
			return rc
		}
	}
	return nil
}

func newSockReader(c net.Conn, flush func()) *sockReader {
	r := &sockReader{flush: flush, rc: socketOf(c)}
	r.try = r.read1
	return r
}

// read reads c (the socket's connection) into b.
func (r *sockReader) read(c net.Conn, b []byte) (int, error) {
	if r.rc == nil || len(b) == 0 {
		r.flush()
		return c.Read(b)
	}
	r.b, r.flushed = b, false
	err := r.rc.Read(r.try)
	r.b = nil
	switch {
	case err != nil:
		return 0, err // closed, or the read deadline passed
	case r.errno != nil:
		return 0, os.NewSyscallError("read", r.errno)
	case r.n == 0:
		return 0, io.EOF
	}
	return r.n, nil
}

// read1 is one read attempt; false: wait until the socket is readable.
func (r *sockReader) read1(fd uintptr) bool {
	for {
		n, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&r.b[0])), uintptr(len(r.b)))
		if e == syscall.EINTR {
			continue
		}
		if e == syscall.EAGAIN {
			if !r.flushed {
				r.flushed = true
				r.flush()
			}
			return false
		}
		r.n, r.errno = int(n), nil
		if e != 0 {
			r.n, r.errno = 0, e
		}
		return true
	}
}

// sockWriter writes a TCP connection's socket by raw system calls (see
// sockReader); its user serializes the writes.
type sockWriter struct {
	rc    syscall.RawConn // nil: the connection has no socket
	try   func(fd uintptr) bool
	b     []byte // not written yet
	errno error
	// full, when set, is called when a write finds the socket full,
	// before it waits for room: it sets the write deadline, which write
	// clears once done. A write that goes out at once (nearly all) costs
	// no deadline, whose setting is a clock read and a timer's update.
	full   func()
	waited bool
}

// waitsWithDeadline reports whether a write that finds the socket full
// has full set its deadline (false: its user sets one before every write).
func (w *sockWriter) waitsWithDeadline() bool { return w.rc != nil && w.full != nil }

func newSockWriter(c net.Conn) *sockWriter {
	w := &sockWriter{rc: socketOf(c)}
	w.try = w.write1
	return w
}

// write writes all of b to c (the socket's connection), waiting for room
// as the write deadline allows.
func (w *sockWriter) write(c net.Conn, b []byte) (int, error) {
	if w.rc == nil || len(b) == 0 {
		return c.Write(b)
	}
	w.b, w.errno = b, nil
	err := w.rc.Write(w.try)
	n := len(b) - len(w.b)
	w.b = nil
	if w.waited {
		w.waited = false
		_ = c.SetWriteDeadline(time.Time{})
	}
	if err == nil && w.errno != nil {
		err = os.NewSyscallError("write", w.errno)
	}
	return n, err
}

// write1 writes what is left; false: wait until the socket is writable.
func (w *sockWriter) write1(fd uintptr) bool {
	for len(w.b) > 0 {
		n, _, e := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(&w.b[0])), uintptr(len(w.b)))
		switch e {
		case 0:
			w.b = w.b[n:]
		case syscall.EINTR:
		case syscall.EAGAIN:
			if w.full != nil && !w.waited {
				w.waited = true
				w.full()
			}
			return false
		default:
			w.errno = e
			return true
		}
	}
	return true
}
