//go:build unix

package server

import (
	"io"
	"net"
	"os"
	"syscall"
)

// sockReader reads a TCP connection's socket for its reader and writes
// the answers the reader holds (flush) just before a read would wait:
// when the client has sent more meanwhile, the answers wait for it to be
// read, and go out together with the next ones. Reading first and writing
// only on EAGAIN, in one RawConn.Read, costs no system call more than a
// plain read (the poller's readiness is not lost in between).
type sockReader struct {
	rc      syscall.RawConn // nil: the connection has no socket
	flush   func()
	try     func(fd uintptr) bool // r.read1, bound once
	b       []byte
	n       int
	errno   error
	flushed bool
}

func newSockReader(c net.Conn, flush func()) *sockReader {
	r := &sockReader{flush: flush}
	if sc, ok := c.(syscall.Conn); ok {
		if rc, err := sc.SyscallConn(); err == nil {
			r.rc = rc
		}
	}
	r.try = r.read1
	return r
}

// read reads c (the socket's connection) into b.
func (r *sockReader) read(c net.Conn, b []byte) (int, error) {
	if r.rc == nil {
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
		r.n, r.errno = syscall.Read(int(fd), r.b)
		if r.errno != syscall.EINTR {
			break
		}
	}
	if r.errno == syscall.EAGAIN {
		if !r.flushed {
			r.flushed = true
			r.flush()
		}
		return false
	}
	return true
}
