package daemon

import (
	"fmt"
	"time"

	sd "github.com/coreos/go-systemd/v22/daemon"
)

// notifier speaks the systemd sd_notify protocol (go-systemd's client of
// it) when NOTIFY_SOCKET is set; without it every call is a no-op.
type notifier struct{}

// send writes one state datagram, e.g. "READY=1".
func (notifier) send(state string) error {
	if _, err := sd.SdNotify(false, state); err != nil {
		return fmt.Errorf("sd_notify %q: %w", state, err)
	}
	return nil
}

// reloading is the RELOADING=1 message with the monotonic timestamp that
// systemd's Type=notify-reload requires.
func reloading() string {
	return sd.SdNotifyReloading + "\n" + sd.SdNotifyMonotonicUsec()
}

// watchdogInterval is how often to send WATCHDOG=1: half the interval
// systemd asked for with WATCHDOG_USEC (WatchdogSec= in the unit), or 0
// when no watchdog is set for this process.
func (notifier) watchdogInterval() (time.Duration, error) {
	d, err := sd.SdWatchdogEnabled(false)
	if err != nil {
		return 0, fmt.Errorf("systemd watchdog: %w", err)
	}
	return d / 2, nil
}

// watchdogC ticks when the systemd watchdog wants a ping (never without
// one).
func (d *Daemon) watchdogC() <-chan time.Time {
	if d.watchdog == nil {
		return nil
	}
	return d.watchdog.C
}
