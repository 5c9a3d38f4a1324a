package main

import (
	"bytes"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"testing"
)

// The man pages built from this repository's docs: dnsd.yaml(5) has a
// section for views.md and for every docs/sources/*.md page, in the
// order of their names (so a new kind's page reaches it); no link
// between docs is left as a file name; groff formats both pages without
// a warning.
func TestManPagesOfTheRepository(t *testing.T) {
	root := filepath.Join("..", "..", "..")
	out := t.TempDir()
	if err := run(root, out, "test"); err != nil {
		t.Fatal(err)
	}
	sources, err := filepath.Glob(filepath.Join(root, "docs", "sources", "*.md"))
	if err != nil || len(sources) < 5 {
		t.Fatalf("docs/sources/*.md: %d pages, %v", len(sources), err)
	}
	parts := append([]string{filepath.Join(root, "docs", "views.md")}, sources...)
	yaml := read(t, filepath.Join(out, "dnsd.yaml.5"))
	at := 0
	for _, p := range parts {
		title, _, _ := strings.Cut(read(t, p), "\n")
		sh := ".SH " + quoteArg(plain(strings.ToUpper(strings.TrimPrefix(title, "# ")))) + "\n"
		i := strings.Index(yaml, sh)
		if i < 0 {
			t.Errorf("dnsd.yaml.5 has no section %q for %s", sh, p)
			continue
		}
		if i < at {
			t.Errorf("dnsd.yaml.5: %s's section is out of order", p)
		}
		at = i
	}

	pages, err := manPages(root, "test", "")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pages {
		roff := read(t, filepath.Join(out, p.File()))
		for _, q := range pages {
			for _, d := range q.Docs {
				if name := path.Base(d.Path); strings.Contains(roff, name) {
					t.Errorf("%s names %s, which is in %s(%s)", p.File(), name, q.Name, q.Section)
				}
			}
		}
		if _, err := exec.LookPath("groff"); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatal("no groff (scripts/ci-deps.sh installs it)")
			}
			t.Log("no groff: the pages are not formatted")
			continue
		}
		cmd := exec.Command("groff", "-t", "-man", "-Tutf8", "-ww", "-z")
		cmd.Stdin = strings.NewReader(roff)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Run(); err != nil || stderr.Len() > 0 {
			t.Errorf("groff %s: %v\n%s", p.File(), err, stderr.String())
		}
	}
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
