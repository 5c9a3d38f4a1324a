package daemon

import (
	"fmt"
	"net"
	"time"

	"golang.org/x/sys/unix"
)

// notifier speaks the systemd sd_notify protocol when NOTIFY_SOCKET is set;
// with an empty socket path every call is a no-op.
type notifier struct {
	socket string
}

// send writes one state datagram, e.g. "READY=1".
func (n notifier) send(state string) error {
	if n.socket == "" {
		return nil
	}
	addr := &net.UnixAddr{Name: n.socket, Net: "unixgram"}
	if addr.Name[0] == '@' {
		addr.Name = "\x00" + addr.Name[1:] // abstract namespace
	}
	c, err := net.DialUnix("unixgram", nil, addr)
	if err != nil {
		return fmt.Errorf("sd_notify %s: %w", n.socket, err)
	}
	defer c.Close()
	if _, err := c.Write([]byte(state)); err != nil {
		return fmt.Errorf("sd_notify %s: %w", n.socket, err)
	}
	return nil
}

// reloading is the RELOADING=1 message with the monotonic timestamp that
// systemd's Type=notify-reload requires.
func reloading() string {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return fmt.Sprintf("RELOADING=1\nMONOTONIC_USEC=%d", ts.Nano()/int64(time.Microsecond))
}
