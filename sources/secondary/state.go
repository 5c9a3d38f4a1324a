package secondary

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/miekg/dns"

	"github.com/dnsd/dnsd/internal/fsutil"
)

// The copy of a zone is kept in two files under StateDir/secondary: the
// zone as an RFC 1035 zone file (<zone>.zone, SOA first) and what dnsd
// knows of it beside the records (<zone>.meta, JSON): its serial, when a
// primary last confirmed it and when it expires. Both are written whole
// and renamed into place, the zone first; a copy whose files disagree
// (a crash between the two renames) or do not parse is ignored.

const (
	dirMode  = 0o750
	fileMode = 0o640
	// maxCopy bounds a saved zone file (as the file source bounds one).
	maxCopy = 512 << 20
)

// meta is the <zone>.meta file.
type meta struct {
	Zone      string    `json:"zone"`      // the zone (FQDN); never empty in a file
	Serial    uint32    `json:"serial"`    // the copy's SOA serial; 0 is a serial like any
	Primary   string    `json:"primary"`   // the primary it came from last; never empty in a file
	Refreshed time.Time `json:"refreshed"` // the last successful refresh; never zero in a file
	Expires   time.Time `json:"expires"`   // Refreshed + the SOA expire; never zero in a file
}

// saved is a copy read back.
type saved struct {
	meta meta
	soa  *dns.SOA
	rrs  []dns.RR // without the SOA
}

// fileBase is the zone's file name without extension: the zone without
// its trailing dot, bytes other than letters, digits, '-', '_' and '.'
// written %XX ("." is "root").
func fileBase(zone string) string {
	zone = strings.TrimSuffix(zone, ".")
	if zone == "" {
		return "root"
	}
	var b strings.Builder
	for i := 0; i < len(zone); i++ {
		c := zone[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '-', c == '_', c == '.' && i > 0:
			b.WriteByte(c)
		default:
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// paths returns the zone file and meta file of zone's copy under dir.
func paths(dir, zone string) (zoneFile, metaFile string) {
	base := filepath.Join(dir, "secondary", fileBase(zone))
	return base + ".zone", base + ".meta"
}

// saveZone writes the copy's records (soa first) and then its meta.
func saveZone(dir string, soa *dns.SOA, rrs []dns.RR, m meta) error {
	zf, _ := paths(dir, m.Zone)
	var b bytes.Buffer
	fmt.Fprintf(&b, "; dnsd's copy of %s, serial %d, transferred from %s at %s.\n", m.Zone, m.Serial, m.Primary, m.Refreshed.UTC().Format(time.RFC3339))
	b.WriteString("; Written by dnsd; the .meta file beside it says when it expires. Edits are lost.\n$ORIGIN .\n")
	b.WriteString(soa.String())
	b.WriteByte('\n')
	for _, rr := range rrs {
		b.WriteString(rr.String())
		b.WriteByte('\n')
	}
	if err := fsutil.WriteAtomic(zf, b.Bytes(), dirMode, fileMode); err != nil {
		return err
	}
	return saveMeta(dir, m)
}

// saveMeta writes the copy's meta file alone (a refresh that found the
// serial unchanged).
func saveMeta(dir string, m meta) error {
	_, mf := paths(dir, m.Zone)
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return fmt.Errorf("copy of %s: %w", m.Zone, err)
	}
	return fsutil.WriteAtomic(mf, append(data, '\n'), dirMode, fileMode)
}

// errNoCopy: the state directory holds no copy of the zone.
var errNoCopy = errors.New("no saved copy")

// load reads zone's copy under dir back. errNoCopy when there is none;
// any other error is a copy that cannot be used.
func load(dir, zone string) (*saved, error) {
	zf, mf := paths(dir, zone)
	mdata, _, err := fsutil.ReadFile(mf, 1<<16)
	if errors.Is(err, os.ErrNotExist) {
		return nil, errNoCopy
	}
	if err != nil {
		return nil, err
	}
	var s saved
	if err := json.Unmarshal(mdata, &s.meta); err != nil {
		return nil, fmt.Errorf("%s: %w", mf, err)
	}
	if !strings.EqualFold(s.meta.Zone, zone) {
		return nil, fmt.Errorf("%s: the copy of %q, not of %s", mf, s.meta.Zone, zone)
	}
	zdata, _, err := fsutil.ReadFile(zf, maxCopy)
	if err != nil {
		return nil, err
	}
	zp := dns.NewZoneParser(bytes.NewReader(zdata), ".", zf)
	for rr, ok := zp.Next(); ok; rr, ok = zp.Next() {
		if soa, isSOA := rr.(*dns.SOA); isSOA && s.soa == nil {
			s.soa = soa
			continue
		}
		s.rrs = append(s.rrs, rr)
	}
	if err := zp.Err(); err != nil {
		return nil, err
	}
	switch {
	case s.soa == nil:
		return nil, fmt.Errorf("%s: no SOA record", zf)
	case !strings.EqualFold(s.soa.Hdr.Name, zone):
		return nil, fmt.Errorf("%s: the SOA is of %s, not of %s", zf, s.soa.Hdr.Name, zone)
	case s.soa.Serial != s.meta.Serial:
		return nil, fmt.Errorf("%s: serial %d, but %s says %d", zf, s.soa.Serial, mf, s.meta.Serial)
	}
	return &s, nil
}
