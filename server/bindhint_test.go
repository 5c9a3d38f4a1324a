package server

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/dnsd/dnsd/config"
)

// A bind refused with EACCES on a port below 1024 says which capability
// it takes and how to have it; other errors and ports get no hint.
func TestBindHint(t *testing.T) {
	denied := &net.OpError{Op: "listen", Net: "udp", Err: os.NewSyscallError("bind", syscall.EACCES)}
	if h := bindHint("0.0.0.0:53", denied); !strings.Contains(h, "CAP_NET_BIND_SERVICE") || !strings.Contains(h, "dnsd.service") || !strings.Contains(h, "root") {
		t.Errorf("port 53, EACCES: hint %q", h)
	}
	if h := bindHint("[::1]:5353", denied); h != "" {
		t.Errorf("port 5353: hint %q, want none", h)
	}
	inUse := &net.OpError{Op: "listen", Net: "udp", Err: os.NewSyscallError("bind", syscall.EADDRINUSE)}
	if h := bindHint("0.0.0.0:53", inUse); h != "" {
		t.Errorf("EADDRINUSE: hint %q, want none", h)
	}
}

// Prepare's error carries the hint when the process may not bind a low
// port. As root (which may) the test runs itself again as user nobody,
// from a copy of the test binary that user can execute.
func TestPrepareBindDeniedHint(t *testing.T) {
	if os.Geteuid() == 0 {
		self, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		dir, err := os.MkdirTemp("", "dnsd-bindhint-")
		if err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(dir)
		bin, err := os.ReadFile(self)
		if err != nil {
			t.Fatal(err)
		}
		copyPath := filepath.Join(dir, "server.test")
		if err := os.WriteFile(copyPath, bin, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(copyPath, "-test.run=^TestPrepareBindDeniedHint$", "-test.v")
		cmd.Dir = dir
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		out, err := cmd.CombinedOutput()
		if err == nil && strings.Contains(string(out), "--- SKIP: TestPrepareBindDeniedHint") {
			t.Skipf("as user nobody:\n%s", out)
		}
		if err != nil || !strings.Contains(string(out), "--- PASS: TestPrepareBindDeniedHint") {
			t.Errorf("as user nobody: %v\n%s", err, out)
		}
		return
	}
	s := New(Options{})
	_, err := s.Prepare(context.Background(), []config.Listen{{Addr: "127.0.0.1:53"}}, Settings{})
	if err == nil {
		t.Skip("this process may bind port 53 (net.ipv4.ip_unprivileged_port_start)")
	}
	if !strings.Contains(err.Error(), "permission denied") || !strings.Contains(err.Error(), "CAP_NET_BIND_SERVICE") {
		t.Errorf("error %v, want permission denied with the capability hint", err)
	}
}
