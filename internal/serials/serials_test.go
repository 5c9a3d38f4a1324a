package serials

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/dnsd/dnsd/pipeline"
)

var (
	top  = pipeline.ZoneKey{Zone: "example."}
	lan  = pipeline.ZoneKey{View: "lan", Zone: "example."}
	rev  = pipeline.ZoneKey{Zone: "20.10.in-addr.arpa."}
	none = map[pipeline.ZoneKey]uint32{}
)

// Serials noted are saved and read back by the next Open (a restart); a
// lower serial (RFC 1982) never replaces a higher one; a zone not noted
// keeps its serial; the file and the directory it makes have modes 0640
// and 0750, and no temporary file is left.
func TestSaveOpen(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	s, err := Open(dir)
	if err != nil || len(s.Floors()) != 0 {
		t.Fatalf("Open of a missing directory: %v, %v", s.Floors(), err)
	}
	if !s.Note(map[pipeline.ZoneKey]uint32{top: 2026120302, lan: 7, rev: 1796323627}) {
		t.Fatal("Note: nothing changed")
	}
	if err := s.Save(); err != nil {
		t.Fatal(err)
	}
	if s.Note(map[pipeline.ZoneKey]uint32{top: 2026120301, lan: 7}) {
		t.Error("a lower serial and the same one changed something")
	}
	if !s.Note(map[pipeline.ZoneKey]uint32{lan: 7 + 1<<31 - 1}) { // above across half the space
		t.Error("a higher serial changed nothing")
	}
	if err := s.Save(); err != nil {
		t.Fatal(err)
	}
	again, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	got := again.Floors()
	if got[top] != 2026120302 || got[lan] != 7+1<<31-1 || got[rev] != 1796323627 || len(got) != 3 {
		t.Errorf("read back %v", got)
	}
	fi, err := os.Stat(filepath.Join(dir, FileName))
	if err != nil || fi.Mode().Perm() != 0o640 {
		t.Errorf("file: %v, %v", fi.Mode(), err)
	}
	if di, err := os.Stat(dir); err != nil || di.Mode().Perm() != 0o750 {
		t.Errorf("directory: %v, %v", di.Mode(), err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("directory holds %v", ents)
	}
	// Nothing new: no write.
	if err := os.Chmod(dir, 0o500); err != nil {
		t.Fatal(err)
	}
	defer os.Chmod(dir, 0o750)
	again.Note(none)
	if err := again.Save(); err != nil {
		t.Errorf("Save with nothing new wrote: %v", err)
	}
}

// A file that does not parse is an error, with an empty store that
// saves over it.
func TestBadFile(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, FileName), []byte("{not json"), 0o640); err != nil {
		t.Fatal(err)
	}
	s, err := Open(dir)
	if err == nil || len(s.Floors()) != 0 {
		t.Fatalf("Open of a bad file: %v, %v", s.Floors(), err)
	}
	s.Note(map[pipeline.ZoneKey]uint32{top: 5})
	if err := s.Save(); err != nil {
		t.Fatal(err)
	}
	if again, err := Open(dir); err != nil || again.Floors()[top] != 5 {
		t.Errorf("after saving over it: %v, %v", again.Floors(), err)
	}
}

// Move to another state directory keeps the serials known, takes the
// higher of the new file's, and saves them there.
func TestMove(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	old, _ := Open(b)
	old.Note(map[pipeline.ZoneKey]uint32{top: 100, rev: 50})
	if err := old.Save(); err != nil {
		t.Fatal(err)
	}
	s, _ := Open(a)
	s.Note(map[pipeline.ZoneKey]uint32{top: 90, lan: 3})
	if err := s.Move(b); err != nil {
		t.Fatal(err)
	}
	if err := s.Save(); err != nil {
		t.Fatal(err)
	}
	got, _ := Open(b)
	if f := got.Floors(); f[top] != 100 || f[rev] != 50 || f[lan] != 3 {
		t.Errorf("after the move: %v", f)
	}
}
