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

// freeAddr returns 127.0.0.1:port with the port free for UDP and TCP.
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
		if err == nil {
			u.Close()
			return addr
		}
	}
	t.Fatal("no free port")
	return ""
}

// TestNotifyWatchdog runs the daemon under a fake service manager (a real
// unixgram NOTIFY_SOCKET and WATCHDOG_USEC): READY=1 at start, WATCHDOG=1
// every half interval from the serving loop, none while a reload holds
// that loop, RELOADING=1 with a current MONOTONIC_USEC and READY=1 around
// the reload, STOPPING=1 at the end and no ping after it.
func TestNotifyWatchdog(t *testing.T) {
	msgs := listenNotify(t)
	t.Setenv("WATCHDOG_USEC", "200000") // pings every 100ms
	t.Setenv("WATCHDOG_PID", strconv.Itoa(os.Getpid()))

	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "dnsd.yaml")
	listen := freeAddr(t)
	hostsOnly := fmt.Sprintf("listen: [%q]\nzones:\n  example.internal:\n    - hosts: {entries: [\"10.0.0.1 a\"]}\n", listen)
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
	// listens, sync_timeout 1s) holds the loop: no ping until it is done.
	dead := freeAddr(t)
	withEtcd := hostsOnly + fmt.Sprintf("  dead.internal:\n    - etcd: {endpoints: [\"http://%s\"], sync_timeout: 1s}\n", dead)
	if err := os.WriteFile(cfgPath, []byte(withEtcd), 0o644); err != nil {
		t.Fatal(err)
	}
	signals <- syscall.SIGHUP
	var rel notifyMsg
	for rel.text == "" {
		select {
		case m := <-msgs:
			if strings.HasPrefix(m.text, "RELOADING=1\n") {
				rel = m
			}
		case <-time.After(10 * time.Second):
			t.Fatal("no RELOADING=1")
		}
	}
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		t.Fatal(err)
	}
	usec, ok := strings.CutPrefix(strings.TrimSpace(strings.TrimPrefix(rel.text, "RELOADING=1\n")), "MONOTONIC_USEC=")
	n, err := strconv.ParseInt(usec, 10, 64)
	if !ok || err != nil || ts.Nano()/1000-n < 0 || ts.Nano()/1000-n > 5_000_000 {
		t.Errorf("RELOADING message %q: want MONOTONIC_USEC= the monotonic clock (now %d)", rel.text, ts.Nano()/1000)
	}
	select {
	case m := <-msgs:
		if m.text != "READY=1" {
			t.Fatalf("during a reload that holds the loop: got %q, want no ping and then READY=1", m.text)
		}
		if took := m.at.Sub(rel.at); took < 800*time.Millisecond {
			t.Fatalf("the reload took only %v: it did not wait for the new backend, so the test proves nothing", took)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no READY=1 after the reload")
	}
	next("WATCHDOG=1") // pings resume

	cancel()
	next("STOPPING=1")
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("Run did not return")
	}
	time.Sleep(300 * time.Millisecond)
	for len(msgs) > 0 {
		if m := <-msgs; m.text == "WATCHDOG=1" {
			t.Fatalf("WATCHDOG=1 after STOPPING=1")
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
