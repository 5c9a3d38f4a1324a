package main

import (
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
)

func render(t *testing.T, md string) string {
	t.Helper()
	var b strings.Builder
	p := Page{Name: "x", Section: "8", Desc: "a test", Version: "1", Manual: "M", Date: "2026-01-01",
		Docs: []Doc{{Path: "x.md", Text: md}}}
	if err := p.Render(&b, nil); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func TestRoffEscaping(t *testing.T) {
	out := render(t, "# Title\n\nText with a \\ backslash, `-config PATH` and **bold**.\n"+
		".starts with a dot\n'starts with a quote\nnon-ASCII — ≤ µs\n\n"+
		"## Section `one`\n\n```\n.dot in code\n\\n stays\n```\n\n"+
		"| a | b |\n|---|---|\n| `x|y` | [link](other.md) and [web](https://example.org) |\n\n"+
		"- item one\n  continued\n1. first\n")
	for _, want := range []string{
		`.TH "X" 8 "2026-01-01" "x 1" "M"`,
		`.SH NAME` + "\n" + `x \- a test`,
		`.SH DESCRIPTION`,
		`Text with a \e backslash, \fB\-config PATH\fR and \fBbold\fR.`,
		"\n\\&.starts with a dot\n",
		"\n\\&'starts with a quote\n",
		`\[u2014] \[u2264] \[u00B5]s`,
		`.SH "SECTION ONE"`,
		".nf\n\\&.dot in code\n\\en stays\n.fi",
		".TS\nallbox tab(|);\nlb lb\nl lx.\na|b\nT{\n.na\n\\fBx\\(bay\\fR\nT}|T{\n.na\nlink and web <https://example.org>\nT}\n.TE",
		".IP \\(bu 2\nitem one\ncontinued",
		".IP 1. 4\nfirst",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	for i, line := range strings.Split(out, "\n") {
		for _, c := range line {
			if c > 0x7e {
				t.Errorf("line %d is not ASCII: %q", i+1, line)
				break
			}
		}
	}
	if _, err := exec.LookPath("groff"); err == nil {
		cmd := exec.Command("groff", "-t", "-man", "-Tutf8", "-ww", "-Wbreak")
		cmd.Stdin = strings.NewReader(out)
		if msg, err := cmd.CombinedOutput(); err != nil || strings.Contains(string(msg), "warning") {
			t.Errorf("groff: %v\n%s", err, msg)
		}
	}
}

// A "# " line inside a code block is code (a YAML or shell comment), not
// the file's title.
func TestCodeCommentsKept(t *testing.T) {
	out := render(t, "# Title\n\n```yaml\n# a comment\nkey: 1\n```\n\nText.\n")
	if !strings.Contains(out, ".nf\n# a comment\nkey: 1\n.fi") {
		t.Errorf("the code block lost its comment:\n%s", out)
	}
	if strings.Contains(out, "Title") {
		t.Errorf("the title is in the page:\n%s", out)
	}
}

// One DESCRIPTION, however many files have text before their first
// heading.
func TestOneDescription(t *testing.T) {
	var b strings.Builder
	p := Page{Name: "x", Section: "8", Desc: "a test", Docs: []Doc{
		{Path: "README.md", Kind: Intro, Text: "# x\n\nIntro.\n\n## Later\n\nNot shown.\n"},
		{Path: "docs/ops.md", Text: "# Ops\n\nMore intro.\n\n## Install\n\nText.\n"},
	}}
	if err := p.Render(&b, nil); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if n := strings.Count(out, ".SH DESCRIPTION"); n != 1 {
		t.Errorf("%d DESCRIPTION sections, want 1:\n%s", n, out)
	}
	if strings.Contains(out, "Not shown") || !strings.Contains(out, "More intro.") || !strings.Contains(out, `.SH "INSTALL"`) {
		t.Errorf("wrong parts of the files:\n%s", out)
	}
}

// Links between docs become references to where the text is in the man
// pages; links to files no page holds become their paths.
func TestLinks(t *testing.T) {
	a := &Page{Name: "a", Section: "8", Desc: "a", Docs: []Doc{
		{Path: "README.md", Kind: Intro, Text: "# a\n\nSee [b's page](docs/b.md), [`b(5)`](docs/b.md) and [docs/](docs/).\n"},
		{Path: "docs/ops.md", Text: "# Ops\n\n## Capacity\n\nSee [Limits](b.md#limits), [sources/s.md](sources/s.md#the-cache), " +
			"[the figures](perf.md#x), [perf.md](perf.md) and [`contrib/unit`](../contrib/unit), [here](#capacity).\n"},
	}}
	b := &Page{Name: "b", Section: "5", Desc: "b", Docs: []Doc{
		{Path: "docs/b.md", Text: "# B\n\n## Top\n\n### Limits\n\nSee [s](sources/s.md), [sizing](ops.md#capacity) and [the cache](sources/s.md#the-cache).\n"},
		{Path: "docs/sources/s.md", Kind: Part, Text: "# The `s` source\n\n## The cache\n\nSee [Limits](../b.md#limits).\n"},
	}}
	links := newLinks([]*Page{a, b}, nil)
	want := map[*Page][]string{
		a: {
			`See b's page (\fBb\fR(5)), \fBb\fR(5) and docs/.`,
			`See \fILimits\fR in \fBb\fR(5), \fIThe cache\fR under \fITHE S SOURCE\fR in \fBb\fR(5), ` +
				`the figures (docs/perf.md), docs/perf.md and \fBcontrib/unit\fR, here.`,
		},
		b: {
			`See \fITHE S SOURCE\fR, sizing (\fICAPACITY\fR in \fBa\fR(8)) and \fIThe cache\fR under \fITHE S SOURCE\fR.`,
			`.SH "THE S SOURCE"` + "\n" + `.SS "The cache"` + "\n.PP\n" + `See \fILimits\fR.`,
		},
	}
	for _, p := range []*Page{a, b} {
		var out strings.Builder
		if err := p.Render(&out, links); err != nil {
			t.Fatal(err)
		}
		for _, w := range want[p] {
			if !strings.Contains(out.String(), w) {
				t.Errorf("%s lacks %q:\n%s", p.File(), w, out.String())
			}
		}
	}

	bad := &Page{Name: "c", Section: "1", Docs: []Doc{{Path: "c.md", Text: "# C\n\nSee [gone](docs/b.md#gone).\n"}}}
	err := bad.Render(io.Discard, newLinks([]*Page{bad, b}, nil))
	if err == nil || !strings.Contains(err.Error(), "c.md: link to docs/b.md#gone: no such heading") {
		t.Errorf("a link to a heading that does not exist: %v", err)
	}
}

// SYNOPSIS follows NAME, FILES and SEE ALSO end the page, and links to
// files no page holds and the packages do not install are listed under
// SEE ALSO with the repository (an installed one is not).
func TestSynopsisFilesSeeAlso(t *testing.T) {
	p := &Page{Name: "x", Section: "8", Desc: "a test", Repository: "https://example.org/x",
		Synopsis: []string{`\fBx\fR [\fB\-c\fR \fIPATH\fR]`, `\fBx check\fR`},
		Docs: []Doc{{Path: "docs/ops.md", Text: "# Ops\n\nIntro, see [perf.md](perf.md) and [the unit](../contrib/x.service).\n\n" +
			"## Install\n\nSee [`docs/perf.md`](perf.md) again.\n"}},
		Files:   []File{{"/etc/x.yaml", "The `config`."}},
		SeeAlso: []string{"x.yaml(5)", "systemctl(1)"}}
	var b strings.Builder
	if err := p.Render(&b, newLinks([]*Page{p}, map[string]string{"contrib/x.service": "/usr/lib/systemd/system/x.service"})); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	order := []string{".SH NAME", ".SH SYNOPSIS\n\\fBx\\fR [\\fB\\-c\\fR \\fIPATH\\fR]\n.br\n\\fBx check\\fR\n", ".SH DESCRIPTION",
		`.SH "INSTALL"`, ".SH FILES\n.TP\n\\fI/etc/x.yaml\\fR\nThe \\fBconfig\\fR.\n",
		".SH \"SEE ALSO\"\n.ad l\n\\fBx.yaml\\fR(5),\n\\fBsystemctl\\fR(1)\n", "not installed:\n\\%docs/perf.md.\n", "\\%<https://example.org/x>"}
	at := 0
	for _, w := range order {
		i := strings.Index(out, w)
		if i < at {
			t.Errorf("%q missing or out of order:\n%s", w, out)
			continue
		}
		at = i
	}
	if strings.Count(out, ".SH DESCRIPTION") != 1 || strings.Contains(out[strings.Index(out, ".SH \"SEE ALSO\""):], "x.service") {
		t.Errorf("one DESCRIPTION, and no installed file under SEE ALSO:\n%s", out)
	}
	groffClean(t, out)
}

// groffClean: groff formats roff without a warning of any kind (-ww), at
// the width man(1) uses on an 80-column terminal.
func groffClean(t *testing.T, roff string) {
	t.Helper()
	if _, err := exec.LookPath("groff"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("no groff (scripts/ci-deps.sh installs it)")
		}
		t.Log("no groff: the page is not formatted")
		return
	}
	cmd := exec.Command("groff", "-t", "-man", "-Tutf8", "-ww", "-z", "-rLL=78n")
	cmd.Stdin = strings.NewReader(roff)
	if msg, err := cmd.CombinedOutput(); err != nil || len(msg) > 0 {
		t.Errorf("groff: %v\n%s", err, msg)
	}
}

// A quote of several lines is one indented paragraph, filled as one.
func TestQuoteOneParagraph(t *testing.T) {
	out := render(t, "# Title\n\nText.\n\n> **Warning.** The first line\n> and the second.\n\nAfter.\n")
	if want := ".RS 4\n\\fBWarning.\\fR The first line\nand the second.\n.RE"; !strings.Contains(out, want) {
		t.Errorf("output lacks %q:\n%s", want, out)
	}
}
