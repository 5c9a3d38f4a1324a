package fsutil

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	reg := filepath.Join(dir, "hosts")
	if err := os.WriteFile(reg, []byte("10.0.0.1 a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	data, fi, err := ReadFile(reg, 0)
	if err != nil || string(data) != "10.0.0.1 a\n" || fi.Size() != 11 {
		t.Fatalf("regular file: %q %v", data, err)
	}
	if _, _, err := ReadFile(reg, 5); err == nil {
		t.Fatal("file over the size limit was read")
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(reg, link); err != nil {
		t.Fatal(err)
	}
	if data, _, err := ReadFile(link, 0); err != nil || len(data) != 11 {
		t.Fatalf("symlink to a regular file: %v", err)
	}

	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, _, err := ReadFile(fifo, 0); done <- err }()
	select {
	case err := <-done:
		if !errors.Is(err, ErrNotRegular) {
			t.Fatalf("FIFO: err = %v, want ErrNotRegular", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("reading a FIFO blocked")
	}
	for _, p := range []string{dir, "/dev/null"} {
		if _, _, err := ReadFile(p, 0); !errors.Is(err, ErrNotRegular) {
			t.Errorf("%s: err = %v, want ErrNotRegular", p, err)
		}
	}
	if _, _, err := ReadFile(filepath.Join(dir, "missing"), 0); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}

// Moved: the same file is not; written to another size, replaced by
// another file through a swapped symlink, removed, or never read, it is.
func TestMoved(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	for _, p := range []string{a, b} {
		if err := os.WriteFile(p, []byte("x\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink("a", link); err != nil {
		t.Fatal(err)
	}
	was, err := os.Stat(link)
	if err != nil {
		t.Fatal(err)
	}
	if Moved(link, was) {
		t.Error("an unchanged file moved")
	}
	if !Moved(link, nil) {
		t.Error("a file never read did not move")
	}
	if err := os.Rename(filepath.Join(dir, "link"), filepath.Join(dir, "old")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("b", link); err != nil {
		t.Fatal(err)
	}
	if !Moved(link, was) {
		t.Error("a symlink swapped to another file of the same size and content did not move")
	}
	wasB, _ := os.Stat(b)
	if err := os.WriteFile(b, []byte("longer\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if !Moved(b, wasB) {
		t.Error("a file written to another size did not move")
	}
	if err := os.Remove(a); err != nil {
		t.Fatal(err)
	}
	if !Moved(filepath.Join(dir, "old"), was) {
		t.Error("a removed file did not move")
	}
}

// TargetDir: a symlink's target's directory when it is elsewhere; ""
// for a regular file, a link within its own directory, a dangling link.
func TestTargetDir(t *testing.T) {
	root := t.TempDir()
	other := filepath.Join(root, "other")
	if err := os.Mkdir(other, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{filepath.Join(root, "plain"), filepath.Join(other, "target")} {
		if err := os.WriteFile(f, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	links := map[string]string{"away": filepath.Join(other, "target"), "near": "plain", "dangling": "nowhere"}
	for name, to := range links {
		if err := os.Symlink(to, filepath.Join(root, name)); err != nil {
			t.Fatal(err)
		}
	}
	want, _ := filepath.EvalSymlinks(other)
	for name, w := range map[string]string{"away": want, "near": "", "dangling": "", "plain": ""} {
		if got := TargetDir(filepath.Join(root, name)); got != w {
			t.Errorf("TargetDir(%s) = %q, want %q", name, got, w)
		}
	}
}

func TestReadLines(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	short := strings.Repeat("a", MaxLine) + "\n"
	for _, c := range []struct {
		data string
		want int // the long line, 0: none
	}{
		{"", 0},
		{short, 0},
		{strings.Repeat("a", MaxLine), 0},
		{strings.Repeat("a", MaxLine+1), 1},
		{short + short + strings.Repeat("b", MaxLine+1) + "\nc\n", 3},
		{short + "x\n" + strings.Repeat("b", 3<<20), 3},
		{strings.Repeat(short, 40) + strings.Repeat("\n", 1<<20) + "x\n" + short, 0},
		{strings.Repeat(short, 40) + strings.Repeat("\n", 1<<20) + "x" + short, 40 + 1<<20 + 1},
	} {
		if err := os.WriteFile(path, []byte(c.data), 0o644); err != nil {
			t.Fatal(err)
		}
		data, _, err := ReadLines(path, 0)
		var le *LongLineError
		switch {
		case c.want == 0 && (err != nil || string(data) != c.data):
			t.Errorf("ReadLines(%d bytes): %d bytes, %v", len(c.data), len(data), err)
		case c.want > 0 && (!errors.As(err, &le) || le.Line != c.want || !errors.Is(err, ErrLongLine)):
			t.Errorf("ReadLines(%d bytes): %v, want line %d too long", len(c.data), err, c.want)
		}
	}
}
