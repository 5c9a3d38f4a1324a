package main

import (
	"os/exec"
	"runtime"

	"golang.org/x/sys/unix"
)

// canPin: processes can be started on one CPU here.
const canPin = true

// startOn starts cmd on cpu alone. A process inherits the CPU mask of the
// thread that forks it, so the thread starting cmd is held to cpu for the
// moment of the fork and given its mask back after: no taskset runs before
// the command (its own start, ~4.7 ms on the 2-core VM, counted in every
// server's start to first answer), and the pid is the command's.
func startOn(cmd *exec.Cmd, cpu int) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var was, one unix.CPUSet
	if err := unix.SchedGetaffinity(0, &was); err != nil {
		return err
	}
	one.Set(cpu)
	if err := unix.SchedSetaffinity(0, &one); err != nil {
		return err
	}
	// Back to the mask the thread had a moment ago (it cannot fail where
	// setting one CPU of it did not).
	defer unix.SchedSetaffinity(0, &was)
	return cmd.Start()
}
