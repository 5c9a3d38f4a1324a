package hosts

import (
	"bytes"
	"fmt"
	"hash/maphash"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// A file read a chunk at a time, whole or in halves, gives what its
// content parsed from memory gives: the same pairs, bad lines, logs and
// hash, whatever the chunk size, with lines cut by chunks, lines longer
// than a chunk, no final newline, CRLF, a byte order mark and an empty
// file.
func TestScanMatchesMemory(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	lines := []string{
		"10.0.0.%d host%d.example.internal",
		"fd00::%x v6-%d.example.internal alias%d",
		"# a comment %d %d",
		"",
		"10.0.0.%d bad_name%d!",
		"10.0.0.%d host%d.example.internal # trailing\r",
		"10.0.0.%d " + strings.Repeat("l", 60) + "%d.example.internal",
	}
	dir := t.TempDir()
	seed := maphash.MakeSeed()
	for i := range 200 {
		var b strings.Builder
		for j := range rng.IntN(120) {
			l := lines[rng.IntN(len(lines))]
			fmt.Fprintf(&b, l+"\n", j%250, j, j)
		}
		data := strings.TrimSuffix(b.String(), "\n"[:rng.IntN(2)])
		if rng.IntN(4) == 0 {
			data = "\uFEFF" + data // a byte order mark
		}
		path := filepath.Join(dir, fmt.Sprintf("h%d", i))
		if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		chunk := []int{7, 64, 1000, readChunk}[rng.IntN(4)]
		parallel := []int{0, 300, 1 << 30}[rng.IntN(3)]
		var wantLog, gotLog bytes.Buffer
		want := parseDataFrom(path, []byte(data), slog.New(slog.NewTextHandler(&wantLog, noTime)), parallel, nil)

		sc, err := scanFile(path, seed, chunk, int64(parallel), nil)
		if err != nil {
			t.Fatal(err)
		}
		if sc.sum != maphash.Bytes(seed, []byte(data)) || sc.size != int64(len(data)) {
			t.Fatalf("file %d: sum %x size %d; want %x, %d", i, sc.sum, sc.size, maphash.Bytes(seed, []byte(data)), len(data))
		}
		if n := strings.Count(data, "\n") + btoi(len(data) > 0 && !strings.HasSuffix(data, "\n")); sc.lines != n {
			t.Fatalf("file %d: %d lines, want %d", i, sc.lines, n)
		}
		got, err := sc.parse(path, slog.New(slog.NewTextHandler(&gotLog, noTime)))
		if err != nil {
			t.Fatal(err)
		}
		sc.close()
		if !slices.Equal(partsPairs(got), partsPairs(want)) || got.bad() != want.bad() || len(got) != len(want) {
			t.Fatalf("file %d (chunk %d, halves from %d): %d parts, %v, %d bad\nfrom memory: %d parts, %v, %d bad",
				i, chunk, parallel, len(got), partsPairs(got), got.bad(), len(want), partsPairs(want), want.bad())
		}
		if gotLog.String() != wantLog.String() {
			t.Fatalf("file %d: logged\n%s\nfrom memory\n%s", i, gotLog.String(), wantLog.String())
		}
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// noTime leaves the time out of log lines.
var noTime = &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
	if a.Key == slog.TimeKey {
		return slog.Attr{}
	}
	return a
}}
