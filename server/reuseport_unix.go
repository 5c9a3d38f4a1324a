//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package server

import (
	"fmt"
	"syscall"

	"golang.org/x/sys/unix"
)

const reusePortSupported = true

// reusePort sets SO_REUSEPORT before bind so several UDP sockets can share
// one address.
func reusePort(_, _ string, c syscall.RawConn) error {
	var serr error
	if err := c.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1)
	}); err != nil {
		return fmt.Errorf("control socket: %w", err)
	}
	if serr != nil {
		return fmt.Errorf("set SO_REUSEPORT: %w", serr)
	}
	return nil
}

// msgTrunc is the recvmsg flag of a datagram longer than the buffer.
const msgTrunc = syscall.MSG_TRUNC
