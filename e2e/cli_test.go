package e2e

// The command line as an operator meets it: help, version, usage errors,
// the config search, and the first log line. Each runs the built binary.

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// runDnsd runs the binary in dir and returns its stdout, stderr and exit
// code.
func runDnsd(t *testing.T, dir string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(dnsdBin, args...)
	cmd.Dir = dir
	var o, e syncBuffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	return o.String(), e.String(), code
}

func TestCommandLine(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "good.yaml"), "zones:\n  example.internal:\n    - hosts: {entries: [\"10.0.0.1 a\"]}\n")
	cases := []struct {
		args   []string
		code   int
		stdout string // a substring; "" = must be empty
		stderr string // a substring; "" = must be empty
	}{
		{args: []string{"-h"}, code: 0, stdout: "usage:"},
		{args: []string{"--help"}, code: 0, stdout: "usage:"},
		{args: []string{"-help"}, code: 0, stdout: "usage:"},
		{args: []string{"help"}, code: 0, stdout: "usage:"},
		{args: []string{"help", "check"}, code: 0, stdout: "usage:"},
		{args: []string{"help", "bogus"}, code: 2, stderr: `no help for "bogus"`},
		{args: []string{"check", "-h"}, code: 0, stdout: "usage:"},
		{args: []string{"version"}, code: 0, stdout: "dnsd dev\n"},
		{args: []string{"--version"}, code: 0, stdout: "dnsd dev\n"},
		{args: []string{"-version"}, code: 0, stdout: "dnsd dev\n"},
		{args: []string{"--bogus"}, code: 2, stderr: "usage:"},
		{args: []string{"-config"}, code: 2, stderr: "flag needs an argument"},
		{args: []string{"check", "--bogus"}, code: 2, stderr: "usage:"},
		{args: []string{"frobnicate"}, code: 2, stderr: `unknown command "frobnicate"`},
		{args: []string{"check", "extra"}, code: 2, stderr: `unexpected argument "extra"`},
		{args: []string{"-config", "good.yaml", "check"}, code: 0, stdout: "good.yaml: ok"},
		{args: []string{"-config", "good.yaml", "check", "extra"}, code: 2, stderr: `unexpected argument "check"`},
		{args: []string{"version", "-config", "x.yaml"}, code: 2, stderr: "usage:"},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			stdout, stderr, code := runDnsd(t, dir, c.args...)
			if code != c.code {
				t.Errorf("exit %d, want %d\nstdout: %s\nstderr: %s", code, c.code, stdout, stderr)
			}
			if c.stdout == "" && stdout != "" || !strings.Contains(stdout, c.stdout) {
				t.Errorf("stdout %q, want it to contain %q", stdout, c.stdout)
			}
			if c.stderr == "" && stderr != "" || !strings.Contains(stderr, c.stderr) {
				t.Errorf("stderr %q, want it to contain %q", stderr, c.stderr)
			}
		})
	}
}

func TestVersionFields(t *testing.T) {
	stdout, _, code := runDnsd(t, t.TempDir(), "version")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, want := range []string{"dnsd ", "commit: ", "date: ", "go: go1."} {
		if !strings.Contains(strings.Join(strings.Fields(stdout), " "), want) {
			t.Errorf("dnsd version lacks %q:\n%s", want, stdout)
		}
	}
	// The release build stamps version, commit and date.
	bin := filepath.Join(t.TempDir(), "dnsd")
	build := exec.Command("go", "build", "-o", bin, "-ldflags",
		"-X main.version=1.2.3 -X main.commit=abc123 -X main.date=2026-01-02T03:04:05Z", ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"dnsd 1.2.3\n", "commit: abc123\n", "date:   2026-01-02T03:04:05Z\n"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("stamped dnsd --version lacks %q:\n%s", want, out)
		}
	}
}

// TestCheckNoConfig: without -config and with no file at either default
// path, check names both paths it tried.
func TestCheckNoConfig(t *testing.T) {
	if _, err := os.Stat("/etc/dnsd/dnsd.yaml"); err == nil {
		t.Skip("/etc/dnsd/dnsd.yaml exists on this machine")
	}
	dir := t.TempDir()
	stdout, stderr, code := runDnsd(t, dir, "check")
	if code != 1 || stdout != "" {
		t.Errorf("exit %d stdout %q; want 1 and nothing on stdout", code, stdout)
	}
	for _, want := range []string{"./dnsd.yaml", dir, "/etc/dnsd/dnsd.yaml"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr %q does not name %s", stderr, want)
		}
	}
	// run says the same.
	_, stderr, code = runDnsd(t, dir)
	if code != 1 || !strings.Contains(stderr, "./dnsd.yaml") || !strings.Contains(stderr, "/etc/dnsd/dnsd.yaml") {
		t.Errorf("run without a config: exit %d stderr %q", code, stderr)
	}
}

// TestFirstLogLine: the first line dnsd logs names its PID and config
// file, in text and JSON, whatever the log level (it is the one line a
// quiet log still has at start).
func TestFirstLogLine(t *testing.T) {
	for _, tc := range []struct{ format, level string }{{"text", "info"}, {"json", "info"}, {"text", "error"}, {"json", "warn"}} {
		t.Run(tc.format+"-"+tc.level, func(t *testing.T) {
			dir := t.TempDir()
			writeFile(t, filepath.Join(dir, "my.yaml"), fmt.Sprintf("listen: [\"127.0.0.1:%d\"]\nlog: {format: %s, level: %s}\nzones:\n  example.internal:\n    - hosts: {entries: [\"10.0.0.1 a\"]}\n", freePort(t), tc.format, tc.level))
			p := startDnsd(t, dir, "-config", "my.yaml")
			p.waitLog("dnsd starting", 1)
			first, _, _ := strings.Cut(p.stderr.String(), "\n")
			pid := strconv.Itoa(p.cmd.Process.Pid)
			want := []string{"pid=" + pid, "config=my.yaml"}
			if tc.format == "json" {
				want = []string{`"pid":` + pid, `"config":"my.yaml"`}
			}
			for _, w := range want {
				if !strings.Contains(first, w) {
					t.Errorf("first log line %q lacks %s", first, w)
				}
			}
			if tc.level != "info" && strings.Contains(p.stderr.String(), "dnsd started") {
				t.Errorf("level %s logged an info line after the first:\n%s", tc.level, p.stderr.String())
			}
			p.stop(syscall.SIGTERM)
		})
	}
}
