package fsutil

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
)

// MaxLine is the longest line a hosts or zone file may have, in bytes
// without its newline.
const MaxLine = 64 << 10

// ErrLongLine is the error of a line over MaxLine.
var ErrLongLine = fmt.Errorf("line longer than %d bytes", MaxLine)

// LongLineError is a line over MaxLine, found by ReadLines.
type LongLineError struct {
	Line int // from 1; never 0
}

func (e *LongLineError) Error() string { return fmt.Sprintf("line %d: %v", e.Line, ErrLongLine) }

func (e *LongLineError) Unwrap() error { return ErrLongLine }

// lineCheck follows the lines of what is read, in pieces.
type lineCheck struct {
	line int // the current line's number, from 1
	cur  int // its bytes so far
}

// feed takes the next piece and reports whether every line so far has
// at most MaxLine bytes.
func (c *lineCheck) feed(b []byte) bool {
	for {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			c.cur += len(b)
			return c.cur <= MaxLine
		}
		if c.cur+i > MaxLine {
			c.cur += i
			return false
		}
		b = b[i+1:]
		c.line++
		c.cur = 0
	}
}

// ReadLines is ReadFile for a file of lines (a zone file): a line over
// MaxLine is a *LongLineError, found as the file is read, so that
// reading stops there and never holds the rest of the file.
func ReadLines(path string, max int64) ([]byte, os.FileInfo, error) {
	f, fi, err := Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	if max > 0 && fi.Size() > max {
		return nil, nil, fmt.Errorf("larger than %d bytes", max)
	}
	lc := lineCheck{line: 1}
	data := make([]byte, 0, fi.Size()+512) // pages never written are never touched
	for {
		if len(data) == cap(data) {
			data = append(data, 0)[:len(data)]
		}
		// At most a chunk at a time: a long line is found within a
		// chunk of its MaxLine-th byte.
		n, err := f.Read(data[len(data):min(cap(data), len(data)+1<<20)])
		if !lc.feed(data[len(data) : len(data)+n]) {
			return nil, nil, &LongLineError{Line: lc.line}
		}
		data = data[:len(data)+n]
		if errors.Is(err, io.EOF) {
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
