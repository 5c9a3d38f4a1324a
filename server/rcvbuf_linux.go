package server

import (
	"net"

	"golang.org/x/sys/unix"
)

// setRcvBuf asks for an n-byte receive buffer on c: SO_RCVBUFFORCE when
// the process may (root or CAP_NET_ADMIN: not capped by
// net.core.rmem_max), else SO_RCVBUF (capped). It returns the size the
// kernel granted (Linux reports twice the usable size; this is halved).
func setRcvBuf(c *net.UDPConn, n int) (int, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return 0, err
	}
	var got int
	var serr error
	if err := rc.Control(func(fd uintptr) {
		if unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, n) != nil {
			serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF, n)
		}
		if serr == nil {
			got, serr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF)
			got /= 2
		}
	}); err != nil {
		return 0, err
	}
	return got, serr
}

// getRcvBuf reads c's receive buffer size (halved, as setRcvBuf does).
func getRcvBuf(c *net.UDPConn) (int, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return 0, err
	}
	var got int
	var serr error
	if err := rc.Control(func(fd uintptr) {
		got, serr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF)
	}); err != nil {
		return 0, err
	}
	return got / 2, serr
}
