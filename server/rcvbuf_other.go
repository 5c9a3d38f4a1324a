//go:build !linux

package server

import (
	"errors"
	"net"
)

// setRcvBuf asks for an n-byte receive buffer on c and returns n (the
// granted size is not read back on this platform).
func setRcvBuf(c *net.UDPConn, n int) (int, error) {
	return n, c.SetReadBuffer(n)
}

func getRcvBuf(*net.UDPConn) (int, error) { return 0, errors.ErrUnsupported }
