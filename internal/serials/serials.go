// Package serials keeps the SOA serial dnsd last served for each zone in
// a file under state_dir (state_dir/serials), so that a restart never
// serves a lower one: the daemon hands what it loads to the pipeline as
// floors (pipeline.Options.Floors) and saves the served serials as they
// change.
//
// The file is JSON, written whole to a temporary file in the directory,
// synced and renamed over the old one (the directory synced too), so a
// crash leaves the old file or the new one. The directory is created with
// mode 0750, the file 0640.
package serials

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/dnsd/dnsd/internal/fsutil"
	"github.com/dnsd/dnsd/pipeline"
)

// FileName is the file's name under state_dir.
const FileName = "serials"

const (
	dirMode  = 0o750
	fileMode = 0o640
	maxFile  = 64 << 20
)

// file is the file's content.
type file struct {
	Zones []entry `json:"zones"` // sorted by view, then zone; empty: none kept
}

type entry struct {
	View   string `json:"view,omitempty"` // "" for a top-level zone
	Zone   string `json:"zone"`           // a lower-case FQDN; an entry without one is skipped (never written)
	Serial uint32 `json:"serial"`         // the last served; 0 is a serial like any
}

// Store is the serials of one state directory: those loaded from its file
// and those noted since. It is safe for concurrent use.
type Store struct {
	mu    sync.Mutex
	dir   string
	known map[pipeline.ZoneKey]uint32
	dirty bool // known holds serials the file does not
}

// Open reads dir's serials file. A missing file (or directory) is an
// empty store; a file that cannot be read or parsed is an error, with an
// empty store that saves over it.
func Open(dir string) (*Store, error) {
	s := &Store{dir: dir, known: map[pipeline.ZoneKey]uint32{}}
	m, err := read(dir)
	s.known = m
	return s, err
}

// Dir is the store's state directory.
func (s *Store) Dir() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dir
}

// Path is the file's path.
func (s *Store) Path() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return filepath.Join(s.dir, FileName)
}

func read(dir string) (map[pipeline.ZoneKey]uint32, error) {
	m := map[pipeline.ZoneKey]uint32{}
	path := filepath.Join(dir, FileName)
	data, _, err := fsutil.ReadFile(path, maxFile)
	if errors.Is(err, fs.ErrNotExist) {
		return m, nil
	}
	if err != nil {
		return m, fmt.Errorf("reading %s: %w", path, err)
	}
	var f file
	if err := json.Unmarshal(data, &f); err != nil {
		return m, fmt.Errorf("reading %s: %w", path, err)
	}
	for _, e := range f.Zones {
		if e.Zone == "" {
			continue
		}
		k := pipeline.ZoneKey{View: e.View, Zone: strings.ToLower(e.Zone)}
		if was, ok := m[k]; !ok || pipeline.SerialLess(was, e.Serial) {
			m[k] = e.Serial
		}
	}
	return m, nil
}

// Floors returns a copy of the serials known, for pipeline.Options.Floors.
func (s *Store) Floors() map[pipeline.ZoneKey]uint32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[pipeline.ZoneKey]uint32, len(s.known))
	for k, v := range s.known {
		out[k] = v
	}
	return out
}

// Note records served serials: a zone's is kept when it is above the one
// known (RFC 1982) or none is. Zones not in served keep theirs (a zone
// taken out of the config and put back later starts above it). It
// reports whether anything changed.
func (s *Store) Note(served map[pipeline.ZoneKey]uint32) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	changed := false
	for k, v := range served {
		if was, ok := s.known[k]; !ok || pipeline.SerialLess(was, v) {
			s.known[k] = v
			changed = true
		}
	}
	s.dirty = s.dirty || changed
	return changed
}

// Move makes dir the store's directory (a reload changed state_dir): the
// serials of its file join those known (the higher of two kept) and are
// saved there at the next Save. An error reading the file leaves the
// serials known as they were.
func (s *Store) Move(dir string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if dir == s.dir {
		return nil
	}
	s.dir, s.dirty = dir, true
	m, err := read(dir)
	for k, v := range m {
		if was, ok := s.known[k]; !ok || pipeline.SerialLess(was, v) {
			s.known[k] = v
		}
	}
	return err
}

// Save writes the serials known when the file does not hold them yet.
func (s *Store) Save() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.dirty {
		return nil
	}
	f := file{Zones: make([]entry, 0, len(s.known))}
	for k, v := range s.known {
		f.Zones = append(f.Zones, entry{View: k.View, Zone: k.Zone, Serial: v})
	}
	slices.SortFunc(f.Zones, func(a, b entry) int {
		if c := strings.Compare(a.View, b.View); c != 0 {
			return c
		}
		return strings.Compare(a.Zone, b.Zone)
	})
	data, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return err
	}
	if err := fsutil.WriteAtomic(filepath.Join(s.dir, FileName), append(data, '\n'), dirMode, fileMode); err != nil {
		return err
	}
	s.dirty = false
	return nil
}
