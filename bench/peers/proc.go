package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
)

// cpuTicks returns utime+stime of pid in clock ticks (1/100 s, USER_HZ).
func cpuTicks(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return parseStat(string(b))
}

// parseStat reads utime+stime from the text of /proc/PID/stat.
func parseStat(s string) (int64, error) {
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

// memory is a process's resident set now and at its peak, in KiB.
type memory struct{ RSS, HWM int64 }

func processMemory(pid int) (memory, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return memory{}, err
	}
	defer f.Close()
	return parseStatus(f)
}

// parseStatus reads VmRSS and VmHWM from /proc/PID/status.
func parseStatus(r io.Reader) (memory, error) {
	var m memory
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

// udpDrops returns the kernel's receive drops summed over every UDP socket
// (IPv4 and IPv6) bound to local port port.
func udpDrops(port int) (int64, error) {
	var total int64
	for _, p := range []string{"/proc/net/udp", "/proc/net/udp6"} {
		f, err := os.Open(p)
		if err != nil {
			if os.IsNotExist(err) {
				continue
			}
			return 0, err
		}
		n, err := parseUDPDrops(f, port)
		f.Close()
		if err != nil {
			return 0, err
		}
		total += n
	}
	return total, nil
}

// parseUDPDrops sums the last column ("drops") of the lines of a
// /proc/net/udp table whose local address has port port.
func parseUDPDrops(r io.Reader, port int) (int64, error) {
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

// watchRSS samples pid's VmRSS every 100 ms until the returned function is
// called, which returns the largest sample in KiB (0: none read).
func watchRSS(pid int) func() int64 {
	done := make(chan struct{})
	result := make(chan int64)
	go func() {
		var top int64
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			if m, err := processMemory(pid); err == nil {
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
