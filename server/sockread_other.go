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
