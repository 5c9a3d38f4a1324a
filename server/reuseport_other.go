//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package server

import "syscall"

// Without SO_REUSEPORT each UDP address gets a single socket.
const reusePortSupported = false

func reusePort(_, _ string, _ syscall.RawConn) error { return nil }

// msgTrunc: not reported here; oversized queries fail to parse instead.
const msgTrunc = 0
