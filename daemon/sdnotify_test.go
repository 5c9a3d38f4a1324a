package daemon

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// notifyMsg is one datagram received on the test's NOTIFY_SOCKET.
type notifyMsg struct {
	at   time.Time
	text string
}

// listenNotify binds a unixgram socket, points NOTIFY_SOCKET at it and
// returns the datagrams it receives.
func listenNotify(t *testing.T) <-chan notifyMsg {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "notify.sock")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	t.Setenv("NOTIFY_SOCKET", sock)
	msgs := make(chan notifyMsg, 1024)
	go func() {
		defer close(msgs)
		buf := make([]byte, 4096)
		for {
			n, _, err := conn.ReadFromUnix(buf)
			if err != nil {
				return
			}
			msgs <- notifyMsg{at: time.Now(), text: string(buf[:n])}
		}
	}()
	return msgs
}

// handedOut records the ports freeAddr has returned in this test binary:
// two listen-and-close probes in a row may get the same ephemeral port.
var handedOut sync.Map

// freeAddr returns 127.0.0.1:port with the port free for UDP and TCP and
// not returned before.
func freeAddr(t *testing.T) string {
	t.Helper()
	for range 50 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		u, err := net.ListenPacket("udp", addr)
		l.Close()
		if err != nil {
			continue
		}
		u.Close()
		if _, dup := handedOut.LoadOrStore(addr, true); !dup {
			return addr
		}
	}
	t.Fatal("no free port")
	return ""
}

// TestNotifyWatchdog runs the daemon under a fake service manager (a real
// unixgram NOTIFY_SOCKET and WATCHDOG_USEC): READY=1 at start, WATCHDOG=1
// every half interval from the main loop, RELOADING=1 with a current
// MONOTONIC_USEC and READY=1 around a reload, STOPPING=1 at the end, and
// no ping while the loop is busy stopping (a pinger of its own would go on).
func TestNotifyWatchdog(t *testing.T) {
	msgs := listenNotify(t)
	t.Setenv("WATCHDOG_USEC", "200000") // pings every 100ms
	t.Setenv("WATCHDOG_PID", strconv.Itoa(os.Getpid()))

	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "dnsd.yaml")
	listen := freeAddr(t)
	httpAddr := freeAddr(t)
	hostsOnly := fmt.Sprintf("listen: [%q]\nhttp: %q\nzones:\n  example.internal:\n    - hosts: {entries: [\"10.0.0.1 a\"]}\n", listen, httpAddr)
	if err := os.WriteFile(cfgPath, []byte(hostsOnly), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	signals := make(chan os.Signal, 1)
	done := make(chan error, 1)
	go func() { done <- Run(ctx, Options{ConfigPath: cfgPath, LogOutput: io.Discard}, signals) }()

	next := func(want string) notifyMsg {
		t.Helper()
		for {
			select {
			case m, ok := <-msgs:
				if !ok {
					t.Fatalf("notify socket closed waiting for %q", want)
				}
				if strings.HasPrefix(m.text, want) {
					return m
				}
				if m.text != "WATCHDOG=1" {
					t.Fatalf("got %q waiting for %q", m.text, want)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("no %q", want)
			}
		}
	}
	next("READY=1")
	// Pings keep coming at about every 100ms.
	first := next("WATCHDOG=1")
	var last notifyMsg
	for range 4 {
		last = next("WATCHDOG=1")
	}
	if gap := last.at.Sub(first.at); gap < 300*time.Millisecond || gap > 2*time.Second {
		t.Errorf("4 pings after the first took %v; want about 400ms", gap)
	}

	// A reload that waits for a new backend (an etcd endpoint where nothing
	// listens, sync_timeout 1s): RELOADING=1 with the monotonic clock, then
	// READY=1 once it is done (watchdog pings may come in between).
	dead := freeAddr(t)
	withEtcd := hostsOnly + fmt.Sprintf("  dead.internal:\n    - etcd: {endpoints: [\"http://%s\"], sync_timeout: 1s}\n", dead)
	if err := os.WriteFile(cfgPath, []byte(withEtcd), 0o644); err != nil {
		t.Fatal(err)
	}
	signals <- syscall.SIGHUP
	rel := next("RELOADING=1\n")
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		t.Fatal(err)
	}
	usec, ok := strings.CutPrefix(strings.TrimSpace(strings.TrimPrefix(rel.text, "RELOADING=1\n")), "MONOTONIC_USEC=")
	n, err := strconv.ParseInt(usec, 10, 64)
	if !ok || err != nil || ts.Nano()/1000-n < 0 || ts.Nano()/1000-n > 5_000_000 {
		t.Errorf("RELOADING message %q: want MONOTONIC_USEC= the monotonic clock (now %d)", rel.text, ts.Nano()/1000)
	}
	if ready := next("READY=1"); ready.at.Sub(rel.at) < 800*time.Millisecond {
		t.Errorf("READY=1 came %v after RELOADING=1: the reload did not wait for the new backend", ready.at.Sub(rel.at))
	}
	next("WATCHDOG=1") // pings resume

	// A stop held by an HTTP request still arriving (its headers not
	// complete: the graceful stop of the HTTP server waits for it). The
	// loop, busy stopping, must not ping meanwhile.
	hc, err := net.Dial("tcp", httpAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer hc.Close()
	if _, err := hc.Write([]byte("GET /health HTTP/1.1\r\nHost: dnsd\r\n")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // read by the server: the connection is active
	go func() {
		time.Sleep(1500 * time.Millisecond)
		_, _ = hc.Write([]byte("\r\n"))
		_, _ = io.Copy(io.Discard, hc)
	}()
	cancel()
	stopping := next("STOPPING=1")
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("Run did not return")
	}
	if took := time.Since(stopping.at); took < time.Second {
		t.Fatalf("the stop took only %v: the pending HTTP request did not hold it, so the test proves nothing", took)
	}
	time.Sleep(300 * time.Millisecond)
	for len(msgs) > 0 {
		if m := <-msgs; m.text == "WATCHDOG=1" {
			t.Fatalf("WATCHDOG=1 after STOPPING=1, while the loop was stopping")
		}
	}
}

// TestNotifyWithoutWatchdog: without WATCHDOG_USEC there is no ping, and
// WATCHDOG_USEC meant for another process (WATCHDOG_PID) is ignored.
func TestNotifyWithoutWatchdog(t *testing.T) {
	msgs := listenNotify(t)
	t.Setenv("WATCHDOG_USEC", "100000")
	t.Setenv("WATCHDOG_PID", strconv.Itoa(os.Getpid()+1))
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "dnsd.yaml")
	cfg := fmt.Sprintf("listen: [%q]\nzones:\n  example.internal:\n    - hosts: {entries: [\"10.0.0.1 a\"]}\n", freeAddr(t))
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, Options{ConfigPath: cfgPath, LogOutput: io.Discard}, nil) }()
	var got []string
	deadline := time.After(600 * time.Millisecond)
collect:
	for {
		select {
		case m := <-msgs:
			got = append(got, m.text)
		case <-deadline:
			break collect
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, "|") != "READY=1" {
		t.Fatalf("notify messages %q; want only READY=1", got)
	}
}

// TestNotifyReadyWaitsForStartSync: a SIGHUP while the start still waits
// for a source's first sync (an etcd endpoint where nothing listens,
// sync_timeout 2s) does not make dnsd say READY=1 early: no RELOADING=1
// or READY=1 before the start's wait is over.
func TestNotifyReadyWaitsForStartSync(t *testing.T) {
	msgs := listenNotify(t)
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "dnsd.yaml")
	cfg := fmt.Sprintf("listen: [%q]\nzones:\n  example.internal:\n    - hosts: {entries: [\"10.0.0.1 a\"]}\n  dead.internal:\n    - etcd: {endpoints: [\"http://%s\"], sync_timeout: 2s}\n", freeAddr(t), freeAddr(t))
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	signals := make(chan os.Signal, 1)
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- Run(ctx, Options{ConfigPath: cfgPath, LogOutput: io.Discard}, signals) }()
	time.Sleep(300 * time.Millisecond)
	signals <- syscall.SIGHUP
	select {
	case m := <-msgs:
		if m.text != "READY=1" || m.at.Sub(start) < 1800*time.Millisecond {
			t.Errorf("first message %q %v after the start; want READY=1 once the 2 s sync wait is over", m.text, m.at.Sub(start))
		}
	case <-time.After(10 * time.Second):
		t.Error("no READY=1")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// A stop during a reload: after RELOADING=1 comes STOPPING=1, never a
// READY=1 for the abandoned reload.
func TestNotifyStopDuringReload(t *testing.T) {
	msgs := listenNotify(t)
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "dnsd.yaml")
	hostsOnly := fmt.Sprintf("listen: [%q]\nzones:\n  example.internal:\n    - hosts: {entries: [\"10.0.0.1 a\"]}\n", freeAddr(t))
	if err := os.WriteFile(cfgPath, []byte(hostsOnly), 0o644); err != nil {
		t.Fatal(err)
	}
	signals := make(chan os.Signal, 1)
	done := make(chan error, 1)
	go func() {
		done <- Run(context.Background(), Options{ConfigPath: cfgPath, LogOutput: io.Discard}, signals)
	}()
	var got []string
	next := func() string {
		t.Helper()
		select {
		case m := <-msgs:
			got = append(got, strings.SplitN(m.text, "\n", 2)[0])
			return got[len(got)-1]
		case <-time.After(10 * time.Second):
			t.Fatalf("no message after %q", got)
			return ""
		}
	}
	if m := next(); m != "READY=1" {
		t.Fatalf("first message %q", m)
	}
	// A reload that waits for an etcd where nothing listens.
	withEtcd := hostsOnly + fmt.Sprintf("  dead.internal:\n    - etcd: {endpoints: [\"http://%s\"], sync_timeout: 5s}\n", freeAddr(t))
	if err := os.WriteFile(cfgPath, []byte(withEtcd), 0o644); err != nil {
		t.Fatal(err)
	}
	signals <- syscall.SIGHUP
	if m := next(); m != "RELOADING=1" {
		t.Fatalf("after SIGHUP %q", m)
	}
	time.Sleep(300 * time.Millisecond)
	signals <- syscall.SIGTERM
	if m := next(); m != "STOPPING=1" {
		t.Errorf("messages %q: after RELOADING=1 the stop's STOPPING=1 must come next", got)
	}
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		t.Fatal("Run did not return")
	}
}
