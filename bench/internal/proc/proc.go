package proc

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// CPUTicks returns utime+stime of pid in clock ticks (1/100 s, USER_HZ).
func CPUTicks(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return ParseStat(string(b))
}

// ParseStat reads utime+stime from the text of /proc/PID/stat.
func ParseStat(s string) (int64, error) {
	// Fields after the command name (which may hold spaces) start at ')'.
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 > len(s) {
		return 0, fmt.Errorf("stat: no ')' in %q", s)
	}
	f := strings.Fields(s[i+2:])
	if len(f) < 13 {
		return 0, fmt.Errorf("stat: %d fields after the name", len(f))
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("stat: utime %q stime %q", f[11], f[12])
	}
	return u + st, nil
}

// Memory is a process's resident set now and at its peak, in KiB.
type Memory struct{ RSS, HWM int64 }

// ReadMemory reads pid's VmRSS and VmHWM.
func ReadMemory(pid int) (Memory, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return Memory{}, err
	}
	defer f.Close()
	return ParseStatus(f)
}

// ParseStatus reads VmRSS and VmHWM from /proc/PID/status.
func ParseStatus(r io.Reader) (Memory, error) {
	var m Memory
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		if len(f) == 0 {
			continue
		}
		n, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			continue
		}
		switch k {
		case "VmRSS":
			m.RSS = n
		case "VmHWM":
			m.HWM = n
		}
	}
	if m.RSS == 0 {
		return m, fmt.Errorf("status: no VmRSS")
	}
	return m, sc.Err()
}

// UDPDrops returns the kernel's receive drops summed over every UDP socket
// (IPv4 and IPv6) bound to local port port.
func UDPDrops(port int) (int64, error) {
	var total int64
	for _, p := range []string{"/proc/net/udp", "/proc/net/udp6"} {
		f, err := os.Open(p)
		if err != nil {
			if os.IsNotExist(err) {
				continue
			}
			return 0, err
		}
		n, err := ParseUDPDrops(f, port)
		f.Close()
		if err != nil {
			return 0, err
		}
		total += n
	}
	return total, nil
}

// ParseUDPDrops sums the last column ("drops") of the lines of a
// /proc/net/udp table whose local address has port port.
func ParseUDPDrops(r io.Reader, port int) (int64, error) {
	var total int64
	sc := bufio.NewScanner(r)
	want := fmt.Sprintf(":%04X", port)
	for first := true; sc.Scan(); first = false {
		f := strings.Fields(sc.Text())
		if first || len(f) < 13 {
			continue // the header
		}
		if !strings.HasSuffix(f[1], want) {
			continue
		}
		n, err := strconv.ParseInt(f[len(f)-1], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("udp table: drops %q", f[len(f)-1])
		}
		total += n
	}
	return total, sc.Err()
}

// WatchRSS samples pid's VmRSS every period until the returned function is
// called, which returns the largest sample in KiB (0: none read).
func WatchRSS(pid int, every time.Duration) func() int64 {
	done := make(chan struct{})
	result := make(chan int64)
	go func() {
		var top int64
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			if m, err := ReadMemory(pid); err == nil {
				top = max(top, m.RSS)
			}
			select {
			case <-done:
				result <- top
				return
			case <-t.C:
			}
		}
	}()
	return func() int64 {
		close(done)
		return <-result
	}
}

// Stop ends a process: SIGTERM, then SIGKILL after 5 s; it returns once
// the process is reaped.
func Stop(cmd *exec.Cmd) {
	_ = cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
}

// FreePort is a loopback port free for both UDP and TCP.
func FreePort() int {
	for {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			panic(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		u, err := net.ListenPacket("udp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		l.Close()
		if err == nil {
			u.Close()
			return port
		}
	}
}
