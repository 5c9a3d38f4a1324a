//go:build !unix

package server

import "net"

// sockReader writes the answers the reader holds (flush) before every
// read here.
type sockReader struct {
	flush func()
}

func newSockReader(_ net.Conn, flush func()) *sockReader {
	return &sockReader{flush: flush}
}

func (r *sockReader) read(c net.Conn, b []byte) (int, error) {
	r.flush()
	return c.Read(b)
}

// sockWriter writes through the connection here; its user sets a write
// deadline before every write.
type sockWriter struct {
	full func() // not used here
}

func newSockWriter(net.Conn) *sockWriter { return &sockWriter{} }

func (w *sockWriter) waitsWithDeadline() bool { return false }

func (w *sockWriter) write(c net.Conn, b []byte) (int, error) {
	return c.Write(b)
}
