package main

import (
	"io/fs"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The checks of this file hold the reference docs to the tree: what they
// list is what there is.

// fuzzTarget is the declaration scripts/fuzz.sh looks for.
var fuzzTarget = regexp.MustCompile(`(?m)^func (Fuzz[A-Za-z0-9_]+)\(f \*testing\.F\)`)

// repoFiles walks the module's own directories (not .git, testdata or the
// modules of their own under hack/) and calls fn for every file.
func repoFiles(t *testing.T, fn func(path string)) {
	t.Helper()
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "testdata", "hack", "node_modules":
				return filepath.SkipDir
			}
			return nil
		}
		fn(path)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestFuzzingDocListsEveryTarget: docs/fuzzing.md has one row per fuzz
// target of the repository (package and name), and no row for a target
// that is gone.
func TestFuzzingDocListsEveryTarget(t *testing.T) {
	var have []string
	repoFiles(t, func(path string) {
		if !strings.HasSuffix(path, "_test.go") {
			return
		}
		for _, m := range fuzzTarget.FindAllStringSubmatch(readFile(t, path), -1) {
			have = append(have, filepath.ToSlash(filepath.Dir(path))+" "+m[1])
		}
	})
	row := regexp.MustCompile("(?m)^\\| `([^`]+)` \\| `(Fuzz[A-Za-z0-9_]+)` \\|")
	var listed []string
	for _, m := range row.FindAllStringSubmatch(readFile(t, "docs/fuzzing.md"), -1) {
		listed = append(listed, m[1]+" "+m[2])
	}
	slices.Sort(have)
	slices.Sort(listed)
	if len(have) == 0 {
		t.Fatal("no fuzz target found")
	}
	for _, h := range have {
		if !slices.Contains(listed, h) {
			t.Errorf("docs/fuzzing.md does not list fuzz target %s", h)
		}
	}
	for _, l := range listed {
		if !slices.Contains(have, l) {
			t.Errorf("docs/fuzzing.md lists %s, which is not a fuzz target", l)
		}
	}
}

// TestReadmeLayoutListsEveryPackage: README.md's layout table has a row
// for every directory holding a Go package (the top-level one as
// main.go).
func TestReadmeLayoutListsEveryPackage(t *testing.T) {
	readme := readFile(t, "README.md")
	seen := map[string]bool{}
	repoFiles(t, func(path string) {
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return
		}
		dir := filepath.ToSlash(filepath.Dir(path))
		if seen[dir] {
			return
		}
		seen[dir] = true
		want := "| `" + dir + "/` |"
		if dir == "." {
			want = "| `main.go` |"
		}
		if !strings.Contains(readme, want) {
			t.Errorf("README.md's layout table has no row %q", want)
		}
	})
	if len(seen) < 2 {
		t.Fatalf("found only %d packages", len(seen))
	}
}
