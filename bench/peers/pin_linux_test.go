package main

import (
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestStartOn checks that a command started on one CPU is allowed that CPU
// alone, and that the starting thread gets its own mask back.
func TestStartOn(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var was unix.CPUSet
	if err := unix.SchedGetaffinity(0, &was); err != nil {
		t.Fatal(err)
	}
	cpu := -1
	for i := range 1024 {
		if was.IsSet(i) {
			cpu = i // the last CPU this test may use
		}
	}
	if cpu < 0 {
		t.Skip("no CPU in the mask")
	}
	cmd := exec.Command("sleep", "5")
	if err := startOn(cmd, cpu); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	status, err := os.ReadFile("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	var allowed string
	for _, l := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(l, "Cpus_allowed_list:"); ok {
			allowed = strings.TrimSpace(v)
		}
	}
	if allowed != strconv.Itoa(cpu) {
		t.Errorf("the command may run on %q, want %d alone", allowed, cpu)
	}
	var now unix.CPUSet
	if err := unix.SchedGetaffinity(0, &now); err != nil {
		t.Fatal(err)
	}
	if now != was {
		t.Errorf("the starting thread's mask is %v after, %v before", now, was)
	}
}
