package fsutil

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
)

// ErrNotRegular is returned (wrapped) for paths that exist but are not
// regular files.
var ErrNotRegular = errors.New("not a regular file")

// CheckRegular stats path (following symlinks) and returns an error unless
// it is a regular file; it opens nothing.
func CheckRegular(path string) (os.FileInfo, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	return fi, regular(fi)
}

// notRegular says what a path is instead of a regular file; it matches
// ErrNotRegular with errors.Is.
type notRegular string

func (e notRegular) Error() string        { return string(e) }
func (e notRegular) Is(target error) bool { return target == ErrNotRegular }

func regular(fi os.FileInfo) error {
	switch {
	case fi.Mode().IsRegular():
		return nil
	case fi.IsDir():
		return notRegular("is a directory")
	case fi.Mode()&os.ModeNamedPipe != 0:
		return notRegular("is a FIFO, not a regular file")
	case fi.Mode()&os.ModeDevice != 0:
		return notRegular("is a device, not a regular file")
	case fi.Mode()&os.ModeSocket != 0:
		return notRegular("is a socket, not a regular file")
	}
	return ErrNotRegular
}

// Open opens path for reading if it is a regular file. It checks before
// opening, then opens without blocking (O_NONBLOCK: a FIFO swapped in
// between the check and the open does not wait for a writer) and checks
// the opened file again, so what it returns is a regular file whatever
// happened to the path meanwhile.
func Open(path string) (*os.File, os.FileInfo, error) {
	if _, err := CheckRegular(path); err != nil {
		return nil, nil, err
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err == nil {
		err = regular(fi)
	}
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, fi, nil
}

// ReadFile reads a whole regular file (see Open) of at most max bytes
// (max <= 0: no limit) and returns its info from the same open.
func ReadFile(path string, max int64) ([]byte, os.FileInfo, error) {
	f, fi, err := Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	if max > 0 && fi.Size() > max {
		return nil, nil, fmt.Errorf("larger than %d bytes", max)
	}
	data := make([]byte, 0, fi.Size()+512)
	for {
		if len(data) == cap(data) {
			data = append(data, 0)[:len(data)]
		}
		n, err := f.Read(data[len(data):cap(data)])
		data = data[:len(data)+n]
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, nil, err
		}
		if max > 0 && int64(len(data)) > max {
			return nil, nil, fmt.Errorf("larger than %d bytes", max)
		}
	}
	return data, fi, nil
}

// maxPEMSize bounds a certificate, key or CA bundle file.
const maxPEMSize = 16 << 20

// ReadSmall reads a small regular file: a key, a certificate, a password,
// resolv.conf.
func ReadSmall(path string) ([]byte, error) {
	b, _, err := ReadFile(path, maxPEMSize)
	return b, err
}

// LoadKeyPair is tls.LoadX509KeyPair over ReadSmall.
func LoadKeyPair(certFile, keyFile string) (tls.Certificate, error) {
	cert, err := ReadSmall(certFile)
	if err != nil {
		return tls.Certificate{}, err
	}
	key, err := ReadSmall(keyFile)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.X509KeyPair(cert, key)
}

// Moved reports whether path is no longer the file described by was (it
// cannot be statted, is another file, or has another size or modification
// time): a file replaced or written, or a symlink on its path swapped. A
// nil was has always moved.
func Moved(path string, was os.FileInfo) bool {
	if was == nil {
		return true
	}
	info, err := os.Stat(path)
	return err != nil || !os.SameFile(info, was) || info.Size() != was.Size() || !info.ModTime().Equal(was.ModTime())
}

// TargetDir is the directory of the file a symlink at path finally names,
// when that is not path's own directory: a watcher of path's directory
// sees the link change but not the file it names change, so it watches
// this one too. "" when path is not a symlink, its target is in its own
// directory, or it cannot be resolved.
func TargetDir(path string) string {
	fi, err := os.Lstat(path)
	if err != nil || fi.Mode()&os.ModeSymlink == 0 {
		return ""
	}
	target, err := filepath.EvalSymlinks(path)
	if err != nil {
		return ""
	}
	dir, err := filepath.EvalSymlinks(filepath.Dir(path))
	if err != nil {
		dir = filepath.Dir(path)
	}
	if d := filepath.Dir(target); d != dir && d != filepath.Dir(path) {
		return d
	}
	return ""
}

// WriteAtomic replaces path with data (mode fileMode; its directory,
// made when missing, gets dirMode): a temporary file in its
// directory, synced, renamed over it, and the directory synced, so that
// a crash leaves the old file or the new one, never a part.
func WriteAtomic(path string, data []byte, dirMode, fileMode os.FileMode) (err error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, dirMode); err != nil {
		return fmt.Errorf("state directory: %w", err)
	}
	if err := os.Chmod(dir, dirMode); err != nil { // the umask may have narrowed it
		return fmt.Errorf("state directory: %w", err)
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = os.Remove(f.Name())
		}
	}()
	if err := f.Chmod(fileMode); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if _, err := f.Write(data); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("syncing %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("syncing %s: %w", dir, err)
	}
	return nil
}
