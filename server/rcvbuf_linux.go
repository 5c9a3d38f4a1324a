package server

import (
	"net"

	"golang.org/x/sys/unix"
)

// setRcvBuf asks for an n-byte receive buffer on c: SO_RCVBUFFORCE when
// the process may (root or CAP_NET_ADMIN: not capped by
// net.core.rmem_max), else SO_RCVBUF (capped). It returns the size the
// kernel granted (see getRcvBuf).
func setRcvBuf(c *net.UDPConn, n int) (int, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return 0, err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		if unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, n) != nil {
			serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF, n)
		}
	}); err != nil {
		return 0, err
	}
	if serr != nil {
		return 0, serr
	}
	return getRcvBuf(c)
}

// getRcvBuf reads c's receive buffer size: what Linux reports, halved
// (it doubles the size asked for, to account for its bookkeeping).
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
