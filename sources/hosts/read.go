package hosts

import (
	"bytes"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"log/slog"
	"os"

	"github.com/dnsd/dnsd/internal/fsutil"
	"github.com/dnsd/dnsd/internal/pacing"
)

// readChunk is how much of a hosts file is read at a time. A file that
// fits is read once and parsed from memory. A larger one is read twice a
// chunk at a time, for its hash and line count, then to parse it, and is
// never in memory whole: reading a 40 MB file into one buffer took 125 ms
// on one core of a VM where each page first touched is a ~13 µs fault;
// the same file a chunk at a time, 6 ms.
const readChunk = 1 << 20

// scan is the first read of a hosts file, kept open for the second.
type scan struct {
	f        *os.File
	info     os.FileInfo
	chunk    int            // bytes read at a time
	parallel int64          // the size from which a file is parsed in halves
	pace     *pacing.Pacing // a reload's: see package pacing
	sum      uint64         // the content's maphash, as maphash.Bytes over all of it
	size     int64
	// data is the whole content when it fits in one chunk, else nil.
	data []byte
	// lines is the number of lines (newlines, and a last line without).
	lines int
	// cut is where the second half of a file of parallelParseMin bytes
	// or more starts (after the first newline from its middle on), 0
	// when the file is parsed whole; cutLine is that line's number.
	cut     int64
	cutLine int
}

// errTooLarge is a hosts file over maxFileSize.
var errTooLarge = fmt.Errorf("larger than %d bytes", maxFileSize)

// scanHosts opens path (a regular file: see fsutil.Open) and reads it
// once, pacing itself when pace is set (a reload's: see package pacing). The caller
// must close the scan.
func scanHosts(path string, seed maphash.Seed, pace *pacing.Pacing) (*scan, error) {
	return scanFile(path, seed, readChunk, parallelParseMin, pace)
}

// scanFile is scanHosts reading chunk bytes at a time, cutting files of
// parallel bytes or more in halves.
func scanFile(path string, seed maphash.Seed, chunk int, parallel int64, pace *pacing.Pacing) (*scan, error) {
	f, info, err := fsutil.Open(path)
	if err != nil {
		return nil, err
	}
	s := &scan{f: f, info: info, chunk: chunk, parallel: parallel, pace: pace}
	if err := s.read(seed); err != nil {
		f.Close()
		return nil, err
	}
	return s, nil
}

func (s *scan) read(seed maphash.Seed) error {
	if s.info.Size() > maxFileSize {
		return errTooLarge
	}
	var h maphash.Hash
	h.SetSeed(seed)
	mid := int64(-1) // where the halves' cut is looked for
	if s.info.Size() >= s.parallel {
		mid = s.info.Size() / 2
	}
	// A small file's buffer is its size (and a byte to see its end), not
	// a whole chunk.
	buf := make([]byte, min(int64(s.chunk), max(s.info.Size()+1, 64<<10)))
	var last byte // the file's last byte
	pc := pacing.New(s.pace)
	for {
		pc.Check()
		n, err := io.ReadFull(s.f, buf)
		chunk := buf[:n]
		end := errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
		if err != nil && !end {
			return err
		}
		if s.size == 0 && end {
			s.data = chunk // the whole file
		}
		h.Write(chunk)
		if s.cut == 0 && mid >= 0 && s.size+int64(n) > mid {
			from := max(mid-s.size, 0)
			if i := bytes.IndexByte(chunk[from:], '\n'); i >= 0 {
				at := from + int64(i) + 1
				s.cut = s.size + at
				s.cutLine = s.lines + bytes.Count(chunk[:at], []byte{'\n'}) + 1
			}
		}
		s.lines += bytes.Count(chunk, []byte{'\n'})
		s.size += int64(n)
		if n > 0 {
			last = chunk[n-1]
		}
		if s.size > maxFileSize {
			return errTooLarge
		}
		if end {
			break
		}
	}
	if s.size > 0 && last != '\n' {
		s.lines++ // a last line without a newline
	}
	s.sum = h.Sum64()
	return nil
}

// parse parses the file as parseData parses its content: from memory
// when it fitted in a chunk, else read again a chunk at a time, its two
// halves at once when it has them. An error is a failed read.
func (s *scan) parse(path string, logger *slog.Logger) (fileParts, error) {
	if s.data != nil {
		return parseDataFrom(path, s.data, logger, int(s.parallel), s.pace), nil
	}
	part := func(off, n int64, first, lines int) partFunc {
		return func() (*fileData, []badLine, error) {
			return parseStream(io.NewSectionReader(s.f, off, n), first, lines, n, s.chunk, s.pace)
		}
	}
	if s.cut > 0 {
		return parseParts(path, logger, part(0, s.cut, 1, s.cutLine-1),
			part(s.cut, s.size-s.cut, s.cutLine, s.lines-s.cutLine+1))
	}
	return parseParts(path, logger, part(0, s.size, 1, s.lines), nil)
}

// close closes the file.
func (s *scan) close() { s.f.Close() }

// parseStream parses r chunk bytes at a time: lines numbered from first
// on, about lines of them in size bytes. The file may have changed since
// it was scanned: what r has is parsed (the change's event follows). A
// line longer than fsutil.MaxLine is a bad line, skipped without being
// held: the buffer is never larger than a chunk or a line of MaxLine.
func parseStream(r io.Reader, first, lines int, size int64, chunk int, pace *pacing.Pacing) (*fileData, []badLine, error) {
	p := newPartParser(first, lines, int(size), pace)
	buf := make([]byte, min(int64(chunk), size+1))
	carry := 0        // the start of a line that the last chunk cut
	skipping := false // in a line over MaxLine, up to its newline
	for {
		n, err := io.ReadFull(r, buf[carry:])
		data := buf[:carry+n]
		end := errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
		if err != nil && !end {
			return nil, nil, err
		}
		if skipping {
			i := bytes.IndexByte(data, '\n')
			if i < 0 {
				if end {
					break
				}
				carry = 0
				continue
			}
			skipping, data = false, data[i+1:]
		}
		if end {
			p.lines(data)
			break
		}
		last := bytes.LastIndexByte(data, '\n')
		if last < 0 { // a line longer than what buf holds
			if len(data) > fsutil.MaxLine {
				p.skipLong()
				skipping, carry = true, 0
				continue
			}
			if len(data) == len(buf) {
				buf = append(buf, make([]byte, min(len(buf), fsutil.MaxLine+1-len(buf)))...)
			}
			carry = copy(buf, data)
			continue
		}
		p.lines(data[:last+1])
		carry = copy(buf, data[last+1:])
	}
	d, bad := p.done()
	return d, bad, nil
}
