package hosts

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"log/slog"
	"net/netip"
	"runtime"
	"slices"
	"strconv"
	"unsafe"

	"github.com/dnsd/dnsd/internal/fsutil"
	"github.com/dnsd/dnsd/internal/pacing"
	"github.com/dnsd/dnsd/internal/quote"
	"github.com/dnsd/dnsd/pipeline"
)

// fileData is one file's parsed content: (address, name) pairs. A name is
// kept in two parts, its first label and its parent ("db" and
// "example.internal." for db.example.internal.): the first labels in one
// shared string, the parents in another, where a parent already seen in
// the file is not stored again. Large hosts files are mostly names under
// a few parents, so this holds 1,000,000 names in about half the bytes of
// the names written out. The IPv6 addresses are in one array. The index
// refers to a fileData: it is never modified once built.
type fileData struct {
	labels  string
	parents string
	entries []fileEntry
	v6      [][16]byte
	bad     int // lines skipped as malformed
	// secret: a skipped line is one only a key, password or certificate
	// file holds (see quote.SecretLine); no line of the file is logged.
	secret bool
}

// fileEntry is one (address, name) pair: 16 bytes. The name is
// label + "." + parent; parent is "" for a name of one label.
type fileEntry struct {
	label  uint32 // the first label is labels[label : label+labelN]
	addr   uint32 // the IPv4 address, or the IPv6 address's index in v6
	parent uint32 // the parent is parents[parent : parent+parentN]
	labelN uint8
	// parentN is the parent's length: at most 253, since a name is at
	// most 255 octets on the wire (its first label at least 1 of them).
	parentN uint8
	v6      bool
}

func (d *fileData) label(e fileEntry) string {
	return d.labels[e.label : e.label+uint32(e.labelN)]
}

func (d *fileData) parent(e fileEntry) string {
	return d.parents[e.parent : e.parent+uint32(e.parentN)]
}

// nameLen is the length of e's name.
func nameLen(e fileEntry) int { return int(e.labelN) + 1 + int(e.parentN) }

// appendName appends e's name to dst.
func (d *fileData) appendName(dst []byte, e fileEntry) []byte {
	dst = append(dst, d.label(e)...)
	dst = append(dst, '.')
	return append(dst, d.parent(e)...)
}

// name is e's name, as a new string.
func (d *fileData) name(e fileEntry) string {
	var buf [256]byte
	return string(d.appendName(buf[:0], e))
}

// nameIs reports whether e's name is name.
func (d *fileData) nameIs(e fileEntry, name string) bool {
	n := int(e.labelN)
	return len(name) == nameLen(e) && name[n] == '.' && name[:n] == d.label(e) && name[n+1:] == d.parent(e)
}

// inZone reports whether e's name is in zone (a lower-case FQDN, "." the
// root), without writing the name out: it is the zone itself, or its
// parent is in the zone.
func (d *fileData) inZone(e fileEntry, zone string) bool {
	return d.parentInZone(e, zone) || d.nameIs(e, zone)
}

// parentInZone reports whether e's name is in zone by its parent alone
// (true for every name of the root zone).
func (d *fileData) parentInZone(e fileEntry, zone string) bool {
	return zone == "." || e.parentN > 0 && pipeline.InZone(d.parent(e), zone)
}

func (d *fileData) addr(e fileEntry) netip.Addr {
	if e.v6 {
		return netip.AddrFrom16(d.v6[e.addr])
	}
	return netip.AddrFrom4(v4bytes(e.addr))
}

// key is the reverse key of e's address.
func (d *fileData) key(e fileEntry) rkey {
	if e.v6 {
		a := &d.v6[e.addr]
		return rkey{hi: binary.BigEndian.Uint64(a[:8]), lo: binary.BigEndian.Uint64(a[8:]), n: 32, v6: true}
	}
	return rkey{lo: uint64(e.addr), n: 4}
}

// dataBuilder makes a fileData: it splits names into first label and
// parent and stores a parent once when it was seen recently.
type dataBuilder struct {
	d       *fileData
	labels  []byte
	parents []byte
	// recent: parents stored so far, direct-mapped by a hash of the
	// parent; a hit is confirmed by comparing the bytes. The last parent
	// is checked first (consecutive lines usually share theirs).
	recent [256]struct {
		off uint32
		n   uint8
		ok  bool
	}
	last struct {
		off uint32
		n   uint8
	}
}

func newDataBuilder(pairs, nameBytes int) *dataBuilder {
	return &dataBuilder{
		d: &fileData{entries: make([]fileEntry, 0, pairs)},
		// A third of the file: more than the first labels of any usual
		// hosts file take, so the arena is not copied as it grows (its
		// pages not written are never touched).
		labels: make([]byte, 0, nameBytes/3+16),
	}
}

// add appends the pair (addr, name): name is a lower-case FQDN of at
// most 255 octets on the wire; an IPv6 addr is (or is about to be) v6[v6i].
func (b *dataBuilder) add(addr netip.Addr, v6i int, name []byte) {
	e := fileEntry{}
	if addr.Is4() {
		e.addr = binary.BigEndian.Uint32(addr.AsSlice())
	} else {
		e.addr, e.v6 = uint32(v6i), true
	}
	label, parent := name, []byte(nil)
	if i := bytes.IndexByte(name, '.'); i >= 0 {
		label, parent = name[:i], name[i+1:]
	}
	e.label, e.labelN = uint32(len(b.labels)), uint8(len(label))
	b.labels = append(b.labels, label...)
	e.parent, e.parentN = b.parentOf(parent)
	b.d.entries = append(b.d.entries, e)
}

// parentOf returns where parent is stored, storing it if it was not seen
// recently.
func (b *dataBuilder) parentOf(parent []byte) (uint32, uint8) {
	if len(parent) == 0 {
		return 0, 0
	}
	if int(b.last.n) == len(parent) && string(b.parents[b.last.off:b.last.off+uint32(b.last.n)]) == string(parent) {
		return b.last.off, b.last.n
	}
	h := uint32(len(parent))
	for _, c := range parent {
		h = h*31 + uint32(c)
	}
	slot := &b.recent[(h^h>>8)&255]
	if !slot.ok || int(slot.n) != len(parent) || string(b.parents[slot.off:slot.off+uint32(slot.n)]) != string(parent) {
		slot.off, slot.n, slot.ok = uint32(len(b.parents)), uint8(len(parent)), true
		b.parents = append(b.parents, parent...)
	}
	b.last.off, b.last.n = slot.off, slot.n
	return slot.off, slot.n
}

// done returns the fileData, its strings copied to their final size.
func (b *dataBuilder) done() *fileData {
	d := b.d
	d.labels, d.parents = keep(b.labels), string(b.parents)
	if cap(d.entries)-len(d.entries) > len(d.entries)/8 { // comments, blank lines
		d.entries = slices.Clone(d.entries)
	}
	b.d = nil
	return d
}

// keep returns b, which is not written again, as a string: without a
// copy (a copy is as many pages touched again) unless at most half of
// its capacity is used.
func keep(b []byte) string {
	if len(b) < cap(b)/2 {
		return string(b)
	}
	return unsafe.String(unsafe.SliceData(b), len(b))
}

// entriesData is the fileData of inline entries (addresses without a
// zone, names lower-case FQDNs).
func entriesData(entries []Entry) *fileData {
	b := newDataBuilder(0, 0)
	for _, e := range entries {
		if !e.Addr.IsValid() {
			continue
		}
		addr := e.Addr.WithZone("")
		v6i := len(b.d.v6)
		added := false
		for _, name := range e.Names {
			if len(name) == 0 || len(name) > 255 {
				continue // never a valid name
			}
			b.add(addr, v6i, []byte(name))
			added = true
		}
		if added && !addr.Is4() {
			b.d.v6 = append(b.d.v6, addr.As16())
		}
	}
	return b.done()
}

// parallelParseMin is the file size from which the two halves of a file
// are parsed concurrently (then joined).
const parallelParseMin = 4 << 20

// badLine is a skipped line, or a skipped name of a kept line, to be logged.
type badLine struct {
	line  int
	kind  badKind
	field string
}

// parseData parses a whole file. Bad lines are skipped and logged with
// FILE:LINE (the first maxBadLinesLogged of them, then a count). A large
// file is parsed in two halves at once.
func parseData(path string, data []byte, logger *slog.Logger) fileParts {
	return parseDataFrom(path, data, logger, parallelParseMin, nil)
}

// parseDataFrom is parseData with halves parsed at once from size
// parallel on, pacing itself when pace is set (a reload's: see package pacing).
func parseDataFrom(path string, data []byte, logger *slog.Logger, parallel int, pace *pacing.Pacing) fileParts {
	part := func(data []byte, first int) partFunc {
		return func() (*fileData, []badLine, error) {
			d, bad := parsePart(data, first, pace)
			return d, bad, nil
		}
	}
	var parts fileParts
	if half := len(data) / 2; len(data) >= parallel && bytes.IndexByte(data[half:], '\n') >= 0 {
		cut := half + bytes.IndexByte(data[half:], '\n') + 1
		parts, _ = parseParts(path, logger, part(data[:cut], 1), part(data[cut:], 1+bytes.Count(data[:cut], []byte{'\n'})))
	} else {
		parts, _ = parseParts(path, logger, part(data, 1), nil)
	}
	return parts
}

// partFunc parses one part of a file: its data, its first
// maxBadLinesLogged bad lines, or the error that stopped it reading.
type partFunc func() (*fileData, []badLine, error)

// parseParts parses a file in one part, or in two when second is not nil
// (at once with two processors or more), and logs its bad lines.
func parseParts(path string, logger *slog.Logger, first, second partFunc) (fileParts, error) {
	if second == nil {
		d, bad, err := first()
		if err != nil {
			return nil, err
		}
		logBad(path, fileParts{d}, bad, logger)
		return fileParts{d}, nil
	}
	var (
		d2   *fileData
		bad2 []badLine
		err2 error
	)
	done := make(chan struct{})
	parseSecond := func() {
		defer close(done)
		d2, bad2, err2 = second()
	}
	if runtime.GOMAXPROCS(0) == 1 {
		parseSecond() // one after the other: see buildIndex
	} else {
		go parseSecond()
	}
	d1, bad1, err1 := first()
	<-done
	if err := cmp.Or(err1, err2); err != nil {
		return nil, err
	}
	parts := fileParts{d1, d2}
	logBad(path, parts, append(bad1, bad2...), logger)
	return parts, nil
}

// logBad logs a file's first maxBadLinesLogged bad lines (bad, in file
// order) and, past them, how many there were.
func logBad(path string, parts fileParts, bad []badLine, logger *slog.Logger) {
	if slices.ContainsFunc(parts, func(d *fileData) bool { return d.secret }) {
		// A key or a certificate: its lines are never logged.
		logger.Warn("hosts: not a hosts file (it looks like a key, password or certificate file); its lines are skipped and not shown",
			"file", path, "bad_lines", parts.bad())
		return
	}
	for _, b := range bad[:min(len(bad), maxBadLinesLogged)] {
		msg := "hosts: skipping bad line"
		if b.kind == badNames {
			msg = "hosts: skipping bad name"
		}
		logger.Warn(msg, "at", path+":"+strconv.Itoa(b.line), "reason", b.kind.String(), "field", b.field)
	}
	if n := parts.bad(); n > maxBadLinesLogged {
		logger.Warn("hosts: more bad lines skipped", "file", path, "total", n)
	}
}

// parsePart parses lines numbered from first on. It returns the first
// maxBadLinesLogged bad lines (d.bad counts them all).
func parsePart(data []byte, first int, pace *pacing.Pacing) (*fileData, []badLine) {
	p := newPartParser(first, bytes.Count(data, []byte{'\n'})+1, len(data), pace)
	p.lines(data)
	return p.done()
}

// partParser parses a part of a file, its lines given in order in one
// or more calls to lines.
type partParser struct {
	b      *dataBuilder
	lineNo int // the next line's number
	arena  []byte
	spans  []span
	bad    []badLine // the first maxBadLinesLogged
	pc     pacing.Pacer
}

// newPartParser parses lines numbered from first on, sized for about
// lines lines of size bytes, pacing itself when pace is set (a reload's).
func newPartParser(first, lines, size int, pace *pacing.Pacing) *partParser {
	return &partParser{b: newDataBuilder(lines, size), lineNo: first, spans: make([]span, 0, 4), pc: pacing.New(pace)}
}

// lines parses data: whole lines, the last one ending the part when it
// has no newline.
// utf8BOM is the byte order mark some editors write at a file's start.
const utf8BOM = "\uFEFF"

func (p *partParser) lines(data []byte) {
	d := p.b.d
	for len(data) > 0 {
		line := data
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			data = nil
		}
		p.pc.Step()
		lineNo := p.lineNo
		p.lineNo++
		if lineNo == 1 && len(line) >= len(utf8BOM) && string(line[:len(utf8BOM)]) == utf8BOM {
			line = line[len(utf8BOM):] // as some editors save a file
		}
		if len(line) > fsutil.MaxLine {
			p.long(lineNo)
			continue
		}
		addr, a, s, kind, field := parseLine(line, p.arena[:0], p.spans[:0])
		p.arena, p.spans = a, s
		if kind != lineOK {
			if !d.secret && quote.SecretLine(line) {
				d.secret = true
			}
			d.bad++
			if d.bad <= maxBadLinesLogged {
				p.bad = append(p.bad, badLine{lineNo, kind, quote.Excerpt(field)})
			}
			if kind != badNames {
				continue
			}
		}
		if len(p.spans) == 0 {
			continue
		}
		v6i := len(d.v6)
		for _, sp := range p.spans {
			p.b.add(addr, v6i, p.arena[sp.off:sp.off+sp.n])
		}
		if !addr.Is4() {
			d.v6 = append(d.v6, addr.As16())
		}
	}
}

// skipLong skips the next line, longer than fsutil.MaxLine: a bad line.
func (p *partParser) skipLong() {
	p.long(p.lineNo)
	p.lineNo++
}

// long counts line lineNo, longer than fsutil.MaxLine, as a bad line.
func (p *partParser) long(lineNo int) {
	d := p.b.d
	d.bad++
	if d.bad <= maxBadLinesLogged {
		p.bad = append(p.bad, badLine{line: lineNo, kind: badLong})
	}
}

// done returns the part's data and its first bad lines.
func (p *partParser) done() (*fileData, []badLine) {
	return p.b.done(), p.bad
}

// fileParts is a file's data: one fileData, or two for a file parsed in
// halves (the index takes them in order as it takes files, so the halves
// are never copied into one).
type fileParts []*fileData

// pairs is the number of pairs in p.
func (p fileParts) pairs() int {
	n := 0
	for _, d := range p {
		n += len(d.entries)
	}
	return n
}

// bad is the number of lines skipped in p.
func (p fileParts) bad() int {
	n := 0
	for _, d := range p {
		n += d.bad
	}
	return n
}
