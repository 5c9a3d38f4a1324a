package fsutil

import (
	"errors"
	"os"
	"path/filepath"
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
