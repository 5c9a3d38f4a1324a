package file

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc64"
	"io/fs"
	"iter"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/miekg/dns"

	"github.com/dnsd/dnsd/config"
	"github.com/dnsd/dnsd/internal/fsutil"
	"github.com/dnsd/dnsd/internal/pacing"
	"github.com/dnsd/dnsd/internal/quote"
	"github.com/dnsd/dnsd/pipeline"
)

// maxIncludeDepth bounds nested $INCLUDEs (the parser's own limit is 7).
const maxIncludeDepth = 7

// maxFileSize bounds one zone file (a 100,000-record zone is a few MB).
const maxFileSize = 512 << 20

// zone is one parse of a file source: every record by lower-case owner,
// the apex SOA and what it took to build it.
type zone struct {
	names map[string][]dns.RR // owner → records, owners lower case
	order []string            // owners in order of first appearance (transfers list them so)
	ents  map[string]bool     // empty non-terminals
	// referrals: for each zone cut (a name below the apex with NS
	// records: a delegation), the answer to a question at or below it —
	// its NS records in authority, their addresses held here (glue) in
	// additional, not authoritative. Read-only once built; nil when the
	// file delegates nothing.
	referrals map[string]*dns.Msg
	wildcards bool
	ttl       uint32              // the file's first $TTL, else DefaultTTL: the TTL of inline records that name none
	soa       *dns.SOA            // the file's first SOA at an apex, nil when none
	soas      map[string]*dns.SOA // the file's SOA at each apex of the zone key that has one
	records   int
	files     []string      // the zone file and every file it includes
	infos     []os.FileInfo // files' identity, size and time when read
	sum       uint64        // hash of the files' content and the inline records
	outside   int           // records ignored: outside the zone key's zones
	example   string
	// What add mended or left out, reported once per load (see
	// Backend.warnLoad): records beside a CNAME or a CNAME beside
	// other data (the first written stays), and records whose TTL was
	// made their RRset's (RFC 2181 section 5.2). Duplicates are dropped
	// silently (section 5).
	conflicts, ttlFixed int
	conflict, ttlName   string
	// denials: for each apex of the zone key whose names hold NSEC or
	// NSEC3 records or a DNSKEY (a zone signed beforehand), its denial
	// records in order; nil when there is none.
	denials map[string]*denial
}

// denial is one signed apex's NSEC and NSEC3 owners in the order a
// search for the record matching or covering a name needs (Source.NSEC,
// Source.NSEC3).
type denial struct {
	signed bool     // a DNSKEY at the apex
	nsec   []string // owners of NSEC records, in canonical order
	nsec3  []string // NSEC3 owners' first labels (hashes), lower case, in order
	owner3 []string // the NSEC3 owners, as nsec3
}

// parseError is a zone file or inline record that does not parse.
type parseError struct {
	pos config.Pos
	msg string
	// read: an included file could not be read (it is read again: see
	// Backend.run).
	read bool
}

func (e *parseError) Error() string { return e.pos.String() + ": " + e.msg }

// readError is a zone file that could not be read.
type readError struct{ error }

func (e *readError) Unwrap() error { return e.error }

// unreadable reports whether err is a file that could not be read (a
// failure worth trying again without an event), not one that does not
// parse.
func unreadable(err error) bool {
	var re *readError
	var pe *parseError
	return errors.As(err, &re) || errors.As(err, &pe) && pe.read
}

// secretFile is what is said of a key, password or certificate file a
// zone file is, or includes, instead of quoting it.
const secretFile = "a key, password or certificate file, not a zone file (its content is not shown)"

// isSecret reports whether file (holding data) is one the config names
// as a key, password, certificate or kubeconfig file, or looks like one.
func (c *Config) isSecret(file string, data []byte) bool {
	return c.secrets.Has(file) || quote.Secret(data)
}

// checkContent checks that the zone file (holding data) is not a key,
// password or certificate file.
func (c *Config) checkContent(file string, data []byte) error {
	if c.isSecret(file, data) {
		return fmt.Errorf("zone file %s: %s", file, secretFile)
	}
	return nil
}

func asParseError(err error, target **parseError) bool { return errors.As(err, target) }

// miekg/dns reports `[file: ]dns: msg: "token" at line: L:C`.
var zoneErr = regexp.MustCompile(`^(?:(.*): )?dns: (.*) at line: (\d+):(\d+)$`)

// requote cuts the token a ZoneParser message ends with (`problem:
// "token"`) to what quote.Q shows of it.
func requote(msg string) string {
	i := strings.Index(msg, `: "`)
	if i < 0 {
		return msg
	}
	tok, err := strconv.Unquote(msg[i+2:])
	if err != nil {
		return msg
	}
	return msg[:i+2] + quote.QS(tok)
}

// toParseError turns a ZoneParser error into FILE:LINE:COL.
func toParseError(err error, file string, base config.Pos) *parseError {
	m := zoneErr.FindStringSubmatch(err.Error())
	if m == nil {
		pos := config.Pos{File: file, Line: 1, Col: 1}
		if base.File != "" {
			pos = base
		}
		return &parseError{pos: pos, msg: err.Error()}
	}
	line, _ := strconv.Atoi(m[3])
	col, _ := strconv.Atoi(m[4])
	m[2] = requote(m[2])
	if m[1] != "" {
		file = m[1]
	}
	pos := config.Pos{File: file, Line: line, Col: col}
	if base.File != "" { // an inline record: point into dnsd.yaml
		pos = base
	}
	return &parseError{pos: pos, msg: m[2]}
}

// load reads and parses c's file (with its includes) and inline records,
// pacing itself when pace is set (a reload's: see package pacing).
func load(c *Config, pace *pacing.Pacing) (*zone, error) {
	pc := pacing.New(pace)
	z := &zone{names: make(map[string][]dns.RR), ents: make(map[string]bool)}
	h := crc64.New(crc64.MakeTable(crc64.ECMA)) // a byte at a time (FNV) was a tenth of the load
	defTTL := uint32(DefaultTTL / 1e9)
	if c.Path != "" {
		data, info, err := fsutil.ReadLines(c.Path, maxFileSize)
		if le := (*fsutil.LongLineError)(nil); errors.As(err, &le) {
			return nil, &parseError{pos: config.Pos{File: c.Path, Line: le.Line, Col: 1}, msg: fsutil.ErrLongLine.Error()}
		}
		if err != nil {
			return nil, &readError{fmt.Errorf("zone file %s: %w", c.Path, err)}
		}
		if err := c.checkContent(c.Path, data); err != nil {
			return nil, err
		}
		h.Write(data)
		z.files, z.infos = append(z.files, c.Path), append(z.infos, info)
		if t, ok := firstTTL(data); ok {
			defTTL = t
		}
		// Included files (and theirs) are watched and hashed too, and
		// must be regular files: the parser opens them itself, and a FIFO
		// would block it.
		todo := includes(data, c.Path)
		for depth := 0; len(todo) > 0 && depth < maxIncludeDepth; depth++ {
			var next []include
			for _, inc := range todo {
				b, info, err := fsutil.ReadLines(inc.path, maxFileSize)
				if le := (*fsutil.LongLineError)(nil); errors.As(err, &le) {
					return nil, &parseError{pos: config.Pos{File: inc.path, Line: le.Line, Col: 1}, msg: fsutil.ErrLongLine.Error()}
				}
				if err != nil {
					return nil, &parseError{pos: inc.pos, msg: fmt.Sprintf("$INCLUDE %s: %v", inc.path, unwrapPath(err)), read: true}
				}
				if c.isSecret(inc.path, b) {
					return nil, &parseError{pos: inc.pos, msg: fmt.Sprintf("$INCLUDE %s: %s", inc.path, secretFile)}
				}
				h.Write(b)
				z.files, z.infos = append(z.files, inc.path), append(z.infos, info)
				next = append(next, includes(b, inc.path)...)
			}
			todo = next
		}
		lines := bytes.Count(data, []byte{'\n'}) + 1
		z.names, z.order = make(map[string][]dns.RR, lines), make([]string, 0, lines)
		add := func(rr dns.RR) {
			pc.Step()
			z.add(rr, c.Zones)
		}
		// The file's own records: $TTL applies from its line on; those
		// before it (and without one) get the default, as documented.
		fileTTL := uint32(DefaultTTL / 1e9)
		if !fastRecords(data, c.Origin, c.Path, fileTTL, add) {
			*z = zone{names: make(map[string][]dns.RR, lines), ents: z.ents, files: z.files, infos: z.infos}
			zp := dns.NewZoneParser(bytes.NewReader(data), c.Origin, c.Path)
			zp.SetDefaultTTL(fileTTL)
			zp.SetIncludeAllowed(true)
			for rr, ok := zp.Next(); ok; rr, ok = zp.Next() {
				add(rr)
			}
			if err := zp.Err(); err != nil {
				return nil, toParseError(err, c.Path, config.Pos{})
			}
		}
	}
	z.ttl = defTTL
	for _, r := range c.Records {
		h.Write([]byte(r.Text))
		h.Write([]byte{0})
		zp := dns.NewZoneParser(strings.NewReader(r.Text), c.Origin, "")
		zp.SetDefaultTTL(defTTL)
		n := 0
		for rr, ok := zp.Next(); ok; rr, ok = zp.Next() {
			z.add(rr, c.Zones)
			n++
		}
		if err := zp.Err(); err != nil {
			pe := toParseError(err, "", r.Pos)
			pe.msg = fmt.Sprintf("record %s: %s", quote.QS(r.Text), pe.msg)
			return nil, pe
		}
		if n == 0 {
			return nil, &parseError{pos: r.Pos, msg: fmt.Sprintf("record %s: no record", quote.QS(r.Text))}
		}
	}
	z.sum = h.Sum64()
	z.index(c.Zones, &pc)
	return z, nil
}

// index makes what lookups need beside the records: referrals, denial
// chains and empty non-terminals.
func (z *zone) index(zones []string, pc *pacing.Pacer) {
	z.delegations(zones)
	z.indexDenials(zones)
	for name := range z.names {
		pc.Step()
		top := zoneOf(name, zones)
		for p := pipeline.Parent(name); p != "" && pipeline.InZone(p, top); p = pipeline.Parent(p) {
			if _, ok := z.names[p]; ok {
				continue
			}
			z.ents[p] = true
		}
	}
}

// add files rr under its owner unless it is outside every zone, and
// keeps each name's data valid: one copy of a record (RFC 2181 section
// 5), one TTL per RRset (section 5.2: the first record's), a TTL above
// 2^31-1 read as 0 (section 8), no CNAME beside other data (RFC 1034
// section 3.6.2; DNSSEC records aside: the first written stays). Names
// with escapes or bytes outside printable ASCII are stored as queries
// spell them (miekg/dns's presentation of their wire form).
func (z *zone) add(rr dns.RR, zones []string) {
	hdr := rr.Header()
	if hdr.Rrtype == dns.TypeNone || hdr.Class != dns.ClassINET {
		return
	}
	if needsCanon(hdr.Name) || hasNameData(rr) {
		rr = canonical(rr)
		hdr = rr.Header()
	}
	if hdr.Ttl > math.MaxInt32 {
		hdr.Ttl = 0
	}
	name := strings.ToLower(hdr.Name)
	in := false
	for _, zn := range zones {
		in = in || pipeline.InZone(name, zn)
	}
	if !in {
		z.outside++
		if z.example == "" {
			z.example = hdr.Name
		}
		return
	}
	if hdr.Name != name { // a record indexed before may be shared with readers
		hdr.Name = name
	}
	if soa, ok := rr.(*dns.SOA); ok && slices.Contains(zones, name) {
		if z.soa == nil {
			z.soa = soa
		}
		if z.soas[name] == nil {
			if z.soas == nil {
				z.soas = make(map[string]*dns.SOA, len(zones))
			}
			z.soas[name] = soa
		}
	}
	if strings.HasPrefix(name, "*.") {
		z.wildcards = true
	}
	rrs, seen := z.names[name]
	if !seen {
		z.order = append(z.order, name)
	}
	for _, old := range rrs {
		ot := old.Header().Rrtype
		if ot == hdr.Rrtype {
			if dns.IsDuplicate(old, rr) {
				return
			}
			if t := old.Header().Ttl; t != hdr.Ttl && sameRRset(old, rr) {
				hdr.Ttl = t
				if z.ttlFixed++; z.ttlName == "" {
					z.ttlName = name
				}
			}
		}
		if (ot == dns.TypeCNAME || hdr.Rrtype == dns.TypeCNAME) && !besideCNAME(ot) && !besideCNAME(hdr.Rrtype) {
			if z.conflicts++; z.conflict == "" {
				z.conflict = name
			}
			return
		}
	}
	z.names[name] = append(rrs, rr)
	z.records++
}

// sameRRset reports whether a and b, of one type at one name, are of one
// RRset: RRSIGs are only with those covering the same type, whose TTL is
// that type's (RFC 4034 section 3).
func sameRRset(a, b dns.RR) bool {
	sa, ok := a.(*dns.RRSIG)
	if !ok {
		return true
	}
	sb, ok := b.(*dns.RRSIG)
	return ok && sa.TypeCovered == sb.TypeCovered
}

// besideCNAME reports whether records of type t may share a name with a
// CNAME (DNSSEC's own, RFC 4035 section 2.5).
func besideCNAME(t uint16) bool {
	return t == dns.TypeRRSIG || t == dns.TypeNSEC || t == dns.TypeNSEC3
}

// needsCanon reports whether name is not already as miekg/dns presents
// it: an escape, or a byte it would escape.
func needsCanon(name string) bool {
	for i := 0; i < len(name); i++ {
		switch c := name[i]; {
		case c <= ' ' || c > '~', c == '\\', c == '"', c == '(', c == ')', c == ';', c == '@', c == '\'':
			return true
		}
	}
	return false
}

// hasNameData reports whether rr has a domain name in its data that
// needsCanon (the targets dnsd follows or adds addresses for).
func hasNameData(rr dns.RR) bool {
	switch r := rr.(type) {
	case *dns.CNAME:
		return needsCanon(r.Target)
	case *dns.NS:
		return needsCanon(r.Ns)
	case *dns.MX:
		return needsCanon(r.Mx)
	case *dns.SRV:
		return needsCanon(r.Target)
	case *dns.PTR:
		return needsCanon(r.Ptr)
	case *dns.DNAME:
		return needsCanon(r.Target)
	}
	return false
}

// canonical is rr as a query's answer would carry it: packed to wire
// form and read back, so that its names are spelt as miekg/dns spells
// the names of queries (\065bc becomes Abc, raw UTF-8 becomes \DDD).
// rr as it is when it does not pack.
func canonical(rr dns.RR) dns.RR {
	buf := make([]byte, dns.Len(rr)+64)
	n, err := dns.PackRR(rr, buf, 0, nil, false)
	if err != nil {
		return rr
	}
	out, _, err := dns.UnpackRR(buf[:n], 0)
	if err != nil {
		return rr
	}
	return out
}

// delegations finds the zone cuts - names below an apex of zones that
// hold NS records - and makes their referrals.
func (z *zone) delegations(zones []string) {
	for _, name := range z.order {
		if slices.Contains(zones, name) {
			continue
		}
		var ns []dns.RR
		for _, rr := range z.names[name] {
			if rr.Header().Rrtype == dns.TypeNS {
				ns = append(ns, rr)
			}
		}
		if len(ns) == 0 {
			continue
		}
		m := new(dns.Msg)
		m.Response = true
		m.Ns = ns
		for _, rr := range ns {
			for _, a := range z.names[strings.ToLower(rr.(*dns.NS).Ns)] {
				if t := a.Header().Rrtype; t == dns.TypeA || t == dns.TypeAAAA {
					m.Extra = append(m.Extra, a)
				}
			}
		}
		if z.referrals == nil {
			z.referrals = make(map[string]*dns.Msg)
		}
		z.referrals[name] = m
	}
}

// indexDenials orders, for each apex of zones, the NSEC and NSEC3
// records at its names, and notes whether it has a DNSKEY.
func (z *zone) indexDenials(zones []string) {
	for _, name := range z.order {
		for _, rr := range z.names[name] {
			t := rr.Header().Rrtype
			if t != dns.TypeNSEC && t != dns.TypeNSEC3 && t != dns.TypeDNSKEY {
				continue
			}
			apex := zoneOf(name, zones)
			if t == dns.TypeDNSKEY && name != apex {
				continue
			}
			if z.denials == nil {
				z.denials = make(map[string]*denial)
			}
			d := z.denials[apex]
			if d == nil {
				d = new(denial)
				z.denials[apex] = d
			}
			switch t {
			case dns.TypeDNSKEY:
				d.signed = true
			case dns.TypeNSEC:
				if len(d.nsec) == 0 || d.nsec[len(d.nsec)-1] != name {
					d.nsec = append(d.nsec, name)
				}
			case dns.TypeNSEC3:
				if pipeline.Parent(name) == apex && (len(d.owner3) == 0 || d.owner3[len(d.owner3)-1] != name) {
					d.owner3 = append(d.owner3, name)
				}
			}
		}
	}
	for _, d := range z.denials {
		slices.SortFunc(d.nsec, pipeline.CanonicalCompare)
		slices.SortFunc(d.owner3, strings.Compare) // one parent: by the hash label
		d.nsec3 = make([]string, len(d.owner3))
		for i, o := range d.owner3 {
			d.nsec3[i] = o[:strings.IndexByte(o, '.')]
		}
	}
}

// before returns the index of the last of sorted (in the order of cmp)
// that is at or before key, or the last when none is (a chain wraps);
// -1 when sorted is empty.
func before(sorted []string, key string, cmp func(a, b string) int) int {
	if len(sorted) == 0 {
		return -1
	}
	i, found := slices.BinarySearchFunc(sorted, key, cmp)
	if found {
		return i
	}
	if i == 0 {
		return len(sorted) - 1
	}
	return i - 1
}

// referral returns the referral for name when it lies at or below a zone
// cut (the closest one), nil otherwise. A question for DS at the cut is
// the parent's to answer (RFC 4035 section 3.1.4.1): no referral.
func (z *zone) referral(name string, qtype uint16) *dns.Msg {
	for n := name; n != ""; n = pipeline.Parent(n) {
		if m, ok := z.referrals[n]; ok {
			if n == name && qtype == dns.TypeDS {
				return nil
			}
			return m
		}
	}
	return nil
}

// zoneOf returns the longest of zones that holds name.
func zoneOf(name string, zones []string) string {
	best := ""
	for _, zn := range zones {
		if pipeline.InZone(name, zn) && len(zn) > len(best) {
			best = zn
		}
	}
	return best
}

// firstTTL finds the file's first valid $TTL directive.
func firstTTL(data []byte) (uint32, bool) {
	for _, f := range directives(data, "$TTL") {
		if t, ok := parseTTL(f[1]); ok {
			return t, true
		}
	}
	return 0, false
}

// include is a file a zone file names with $INCLUDE, and where.
type include struct {
	path string
	pos  config.Pos // the file name in the including file
}

// includes lists the files the zone file file (holding data) names with
// $INCLUDE (relative names against its directory), for watching.
func includes(data []byte, file string) []include {
	var out []include
	for at, f := range directives(data, "$INCLUDE") {
		p := f[1]
		if !filepath.IsAbs(p) {
			p = filepath.Join(filepath.Dir(file), p)
		}
		at.File = file
		out = append(out, include{path: p, pos: at})
	}
	return out
}

// directives yields the fields of every line of data whose first field
// is name (a $ directive, any case) and that has a second, in file order,
// with the position (line and column, no file) of the second. Lines that
// do not start with '$' (after blanks) are skipped without being split: a
// zone file is almost all records.
func directives(data []byte, name string) iter.Seq2[config.Pos, []string] {
	return func(yield func(config.Pos, []string) bool) {
		n := 0
		for raw := range bytes.Lines(data) {
			n++
			line := bytes.TrimLeftFunc(raw, unicode.IsSpace)
			if len(line) == 0 || line[0] != '$' {
				continue
			}
			f := strings.Fields(string(line))
			if len(f) >= 2 && strings.EqualFold(f[0], name) {
				col := len(raw) - len(line) + len(f[0]) + 1
				if i := bytes.Index(line[len(f[0]):], []byte(f[1])); i >= 0 {
					col = len(raw) - len(line) + len(f[0]) + i + 1
				}
				if !yield(config.Pos{Line: n, Col: col}, f) {
					return
				}
			}
		}
	}
}

// parseTTL reads a $TTL value: seconds, or BIND units (1h30m, 1d, 2w).
func parseTTL(s string) (uint32, bool) {
	var total, cur uint64
	digits := false
	for _, c := range strings.ToLower(s) {
		switch {
		case c >= '0' && c <= '9':
			cur = cur*10 + uint64(c-'0')
			digits = true
		case digits && strings.ContainsRune("smhdw", c):
			mult := map[rune]uint64{'s': 1, 'm': 60, 'h': 3600, 'd': 86400, 'w': 604800}[c]
			total += cur * mult
			cur, digits = 0, false
		default:
			return 0, false
		}
		if total+cur > 1<<31-1 {
			return 0, false
		}
	}
	return uint32(total + cur), total+cur > 0 || digits
}

// unwrapPath drops a *PathError's wrapper, whose path is printed already.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
