package hosts

import (
	"path/filepath"
	"testing"
	"time"
)

// A hosts file replaced by junk in which not one line parses keeps its
// last good data; a file with some good lines is applied without its bad
// ones; a good file afterwards is applied as usual.
func TestGarbageFileKeepsLastGoodData(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hosts")
	writeFile(t, path, "10.0.0.1 web.example.internal\n")
	b := openBackend(t, path)
	s := NewSource(b, nil, time.Hour, true, nil)
	expect(t, s, name, "A 10.0.0.1")

	writeFile(t, path, "\x7fELF\x02\x01\x01\x00\x00\x00\n\x00\x00\x03\x00>\x00\x01\n\xff\xfe garbage ~~~\n")
	never(t, s, name, "A 10.0.0.1")

	writeFile(t, path, "\x00\x01 junk\n10.0.0.2 web.example.internal\n")
	eventually(t, s, name, "A 10.0.0.2")

	writeFile(t, path, "10.0.0.3 web.example.internal\n")
	eventually(t, s, name, "A 10.0.0.3")
}
