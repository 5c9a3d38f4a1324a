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

	"github.com/dnsd/dnsd/internal/fsutil"
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

// A line over fsutil.MaxLine is a bad line at its FILE:LINE, whatever the
// chunk size and wherever chunks cut it; the lines around it are served,
// and the log line that names it does not quote it.
func TestLongLineSkipped(t *testing.T) {
	dir := t.TempDir()
	seed := maphash.MakeSeed()
	long := strings.Repeat("1", fsutil.MaxLine+1)
	for _, c := range []struct {
		name string
		data string
		bad  []int // lines
	}{
		{"alone", long, []int{1}},
		{"middle", "10.0.0.1 a.example.internal\n" + long + "\n10.0.0.2 b.example.internal\n", []int{2}},
		{"huge", "10.0.0.1 a.example.internal\n10.0.0.9 " + strings.Repeat("x", 5*readChunk/2) + "\n10.0.0.2 b.example.internal", []int{2}},
		{"two", long + "\n" + long + "z\n10.0.0.2 b.example.internal\n" + long, []int{1, 2, 4}},
		{"at max", "10.0.0.1 a.example.internal\n" + strings.Repeat("#", fsutil.MaxLine) + "\n10.0.0.2 b.example.internal\n", nil},
	} {
		path := filepath.Join(dir, c.name)
		if err := os.WriteFile(path, []byte(c.data), 0o644); err != nil {
			t.Fatal(err)
		}
		for _, chunk := range []int{7, 1000, 70 << 10, readChunk} {
			var log bytes.Buffer
			sc, err := scanFile(path, seed, chunk, 1<<30, nil)
			if err != nil {
				t.Fatal(err)
			}
			got, err := sc.parse(path, slog.New(slog.NewTextHandler(&log, noTime)))
			sc.close()
			if err != nil {
				t.Fatal(err)
			}
			wantPairs := strings.Count(c.data, ".example.internal")
			if n := got.pairs(); n != wantPairs || got.bad() != len(c.bad) {
				t.Fatalf("%s, chunk %d: %d pairs, %d bad; want %d, %d\n%s", c.name, chunk, n, got.bad(), wantPairs, len(c.bad), log.String())
			}
			for _, l := range c.bad {
				if want := fmt.Sprintf("at=%s:%d reason=%q", path, l, fsutil.ErrLongLine.Error()); !strings.Contains(log.String(), want) {
					t.Fatalf("%s, chunk %d: log lacks %s:\n%s", c.name, chunk, want, log.String())
				}
			}
			for l := range strings.Lines(log.String()) {
				if len(l) > 1024 {
					t.Fatalf("%s, chunk %d: a log line of %d bytes", c.name, chunk, len(l))
				}
			}
		}
	}
}

// A hosts source pointed at a key or certificate logs that it is not a
// hosts file, never a line of it.
func TestKeyFileNotQuoted(t *testing.T) {
	const key = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7"
	for _, data := range []string{
		"-----BEGIN PRIVATE KEY-----\n" + key + "\n-----END PRIVATE KEY-----\n",
		"10.0.0.1 a.example.internal\n-----BEGIN EC PRIVATE KEY-----\n" + key + "\n-----END EC PRIVATE KEY-----\n",
		"key \"xfr\" {\n\talgorithm hmac-sha256;\n\tsecret \"" + key + "\";\n};\n",
	} {
		var log bytes.Buffer
		parseData("k.pem", []byte(data), slog.New(slog.NewTextHandler(&log, noTime)))
		if strings.Contains(log.String(), key[:20]) || strings.Contains(log.String(), "BEGIN") {
			t.Fatalf("the key was logged:\n%s", log.String())
		}
		if !strings.Contains(log.String(), "not a hosts file") {
			t.Fatalf("log does not say it is not a hosts file:\n%s", log.String())
		}
	}
}
