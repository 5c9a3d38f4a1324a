package main

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The man pages built from this repository's docs: dnsd.yaml(5) has a
// section for views.md and for every docs/sources/*.md page, in the
// order of their names (so a new kind's page reaches it); no link
// between docs is left as a file name; both pages have NAME, SYNOPSIS,
// DESCRIPTION, FILES and SEE ALSO once each, FILES only what is
// installed, SEE ALSO where the files they name and no package installs
// are; groff and man format both pages without a warning.
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
	installed, err := installedFiles(root)
	if err != nil {
		t.Fatal(err)
	}
	var dsts []string
	for _, d := range installed {
		dsts = append(dsts, d)
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
		// The sections every man page has, once each, in their place.
		at := 0
		for _, sh := range []string{".SH NAME\n", ".SH SYNOPSIS\n", ".SH DESCRIPTION\n", ".SH FILES\n", ".SH \"SEE ALSO\"\n"} {
			if n := strings.Count(roff, sh); n != 1 {
				t.Errorf("%s: %d %q, want 1", p.File(), n, strings.TrimSpace(sh))
			}
			if i := strings.Index(roff, sh); i < at {
				t.Errorf("%s: %q out of order", p.File(), strings.TrimSpace(sh))
			} else {
				at = i
			}
		}
		// FILES names what the packages install (and the default state_dir).
		for _, f := range p.Files {
			if !slices.Contains(dsts, f.Path) && f.Path != "/var/lib/dnsd" {
				t.Errorf("%s: FILES names %s, which the packages do not install", p.File(), f.Path)
			}
		}
		// SEE ALSO lists the files the page names that are not
		// installed, and they exist in the repository.
		_, see, _ := strings.Cut(roff, ".SH \"SEE ALSO\"\n")
		for _, m := range regexp.MustCompile(`\\%([a-z][^,<\s]*[^.,\s])`).FindAllStringSubmatch(see, -1) {
			if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(m[1]))); err != nil {
				t.Errorf("%s: SEE ALSO lists %s: %v", p.File(), m[1], err)
			}
		}
		for _, name := range []string{"docs/performance.md", "docs/reliability.md"} {
			if strings.Contains(roff, name) && !strings.Contains(see, `\%`+name) {
				t.Errorf("%s names %s, not installed, without saying where it is", p.File(), name)
			}
		}
		for src := range installed {
			if strings.Contains(see, `\%`+src) {
				t.Errorf("%s: SEE ALSO lists %s as not installed", p.File(), src)
			}
		}
		groffClean(t, roff)
		manClean(t, filepath.Join(out, p.File()))
	}
}

// manClean: man(1) formats the page without a warning (--warnings).
func manClean(t *testing.T, page string) {
	t.Helper()
	if _, err := exec.LookPath("man"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("no man (scripts/ci-deps.sh installs it)")
		}
		t.Log("no man: the page is not formatted with it")
		return
	}
	cmd := exec.Command("man", "--warnings", "-l", page)
	cmd.Env = append(os.Environ(), "MANWIDTH=80", "MAN_KEEP_FORMATTING=")
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = io.Discard, &stderr
	if err := cmd.Run(); err != nil || stderr.Len() > 0 {
		t.Errorf("man --warnings -l %s: %v\n%s", page, err, stderr.String())
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
