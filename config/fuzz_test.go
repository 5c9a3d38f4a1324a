package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzParse checks that Parse never panics and that every failure is an
// ErrorList whose positions lie within the input.
func FuzzParse(f *testing.F) {
	seeds, _ := filepath.Glob("testdata/*/*.yaml")
	for _, s := range seeds {
		data, err := os.ReadFile(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte("zones:\n  a 10.0.0.0/9 ::/3:\n    - hosts: &h {entries: [\"1.2.3.4 a\"]}\n  b:\n    - hosts: {<<: *h, ttl: 1s}\n"))
	f.Add([]byte("\xef\xbb\xbfzones: {\"\\u00e9\": [forward]}\r\n"))
	// Relative paths in the fixtures resolve against testdata/good.
	const file = "testdata/good/fuzz.yaml"
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Parse(file, data)
		if err == nil {
			if cfg == nil {
				t.Fatal("nil config without error")
			}
			return
		}
		var list ErrorList
		if !errors.As(err, &list) || len(list) == 0 {
			t.Fatalf("error is not a non-empty ErrorList: %T %v", err, err)
		}
		s := string(data)
		maxLine := 1 + strings.Count(s, "\n") + strings.Count(s, "\r") +
			strings.Count(s, "\u0085") + strings.Count(s, "\u2028") + strings.Count(s, "\u2029")
		for _, e := range list {
			if e.Pos.File != file || e.Pos.Line < 1 || e.Pos.Line > maxLine || e.Pos.Col < 1 {
				t.Fatalf("position %v outside the input (%d lines): %v", e.Pos, maxLine, e)
			}
			if e.Msg == "" {
				t.Fatalf("empty message at %v", e.Pos)
			}
		}
	})
}
