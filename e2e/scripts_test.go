package e2e

// scripts/: the progress lines of scripts/test.sh (scripts/progress.sh).

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// progressScript writes a bash script named prog.sh that sources
// scripts/progress.sh and runs body, and returns its command with
// ticks every second.
func progressScript(t *testing.T, body string) *exec.Cmd {
	t.Helper()
	root, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "dnsd-progress-") // a path the script can hold unquoted
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	script := filepath.Join(dir, "prog.sh")
	writeFile(t, script, "set -euo pipefail\n. "+filepath.Join(root, "scripts/progress.sh")+"\n"+body)
	cmd := exec.Command("bash", script)
	cmd.Env = append(os.Environ(), "DNSD_PROGRESS_EVERY=1", "TMPDIR="+dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd
}

// waitWithin waits for cmd, which holds pipes for its output: Wait
// returns once every process holding them has exited, the ticker too.
func waitWithin(t *testing.T, cmd *exec.Cmd, d time.Duration) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(d):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		t.Fatalf("the script's output was still open %v after it should have ended: a ticker left running", d)
		return nil
	}
}

var progressLine = regexp.MustCompile(`^prog\.sh: (starting|one|two|three), [0-9]+s elapsed$`)

// The ticker repeats the phase with the elapsed time on stderr, stdout
// stays the script's own, the exit status is the script's (a success, a
// command failing under set -e, an exit), and nothing is left running
// once it exits: its output pipes close at once.
func TestProgressTicker(t *testing.T) {
	for _, tc := range []struct {
		end  string
		code int
	}{{"true", 0}, {"false", 1}, {"exit 3", 3}} {
		t.Run(tc.end, func(t *testing.T) {
			cmd := progressScript(t, "phase one\necho out\nsleep 2.5\nphase two\nsleep 1.5\n"+tc.end+"\nphase three\n")
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			err := waitWithin(t, cmd, 10*time.Second)
			if code := cmd.ProcessState.ExitCode(); code != tc.code {
				t.Errorf("exit status %d (%v), want %d", code, err, tc.code)
			}
			if stdout.String() != "out\n" {
				t.Errorf("stdout %q, want the script's own %q", stdout.String(), "out\n")
			}
			lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
			for _, l := range lines {
				if !progressLine.MatchString(l) {
					t.Errorf("stderr line %q", l)
				}
			}
			if len(lines) == 0 || lines[0] != "prog.sh: one, 0s elapsed" {
				t.Errorf("first line %q, want the phase at once", lines[0])
			}
			s := stderr.String()
			if !regexp.MustCompile(`(?m)^prog\.sh: one, [12]s elapsed$`).MatchString(s) ||
				!regexp.MustCompile(`(?m)^prog\.sh: two, [34]s elapsed$`).MatchString(s) {
				t.Errorf("no ticks repeating both phases with the elapsed time:\n%s", s)
			}
			if strings.Contains(s, "three") != (tc.code == 0) {
				t.Errorf("phase three announced %v, want %v:\n%s", strings.Contains(s, "three"), tc.code == 0, s)
			}
		})
	}

	// Killed outright (no trap runs): the ticker ends at its next tick.
	cmd := progressScript(t, "phase one\nsleep 30 </dev/null >/dev/null 2>&1\n")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }) // the sleep
	time.Sleep(1500 * time.Millisecond)
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = waitWithin(t, cmd, 5*time.Second)
}

// scripts/test.sh announces every phase (the ticker repeats it), says
// before a cold kube-apiserver build how long it takes, and the README
// says what the command prints.
func TestTestScriptPhases(t *testing.T) {
	text := readFile(t, "scripts/test.sh")
	if !strings.Contains(text, "\n. scripts/progress.sh\n") {
		t.Error("scripts/test.sh does not source scripts/progress.sh")
	}
	for _, cmd := range []string{"go vet ./...", "scripts/staticcheck.sh", "(cd hack/release-tools", "tools scripts/k8s-tools.sh",
		"tools scripts/acme-tools.sh", "tools scripts/extdns-tools.sh", "go test -race"} {
		i := strings.Index(text, cmd)
		if i < 0 {
			t.Errorf("scripts/test.sh has no %q", cmd)
			continue
		}
		// The last phase before the command, with nothing but
		// comments, a check of the cache and announcements between.
		lines := strings.Split(text[:i], "\n")
		p := len(lines) - 1
		for p >= 0 && !strings.HasPrefix(strings.TrimSpace(lines[p]), "phase ") {
			p--
		}
		if p < 0 {
			t.Errorf("no phase before %q", cmd)
			continue
		}
		for _, l := range lines[p+1:] {
			l = strings.TrimSpace(l)
			if l != "" && !strings.HasPrefix(l, "#") && l != "else" && l != "fi" {
				t.Errorf("%q runs before %q in the same phase", l, cmd)
			}
		}
	}
	if !strings.Contains(text, `phase "building kube-apiserver (cold: about 12 minutes on 2 cores)"`) {
		t.Error("scripts/test.sh does not announce a cold kube-apiserver build with its estimate")
	}
	readme := readFile(t, "README.md")
	for _, want := range []string{"test.sh: go vet, 0s elapsed", "every 30 s", "about 12 minutes on 2 cores"} {
		if !strings.Contains(readme, want) {
			t.Errorf("README.md does not say %q", want)
		}
	}
}
