package main

import (
	"os/exec"
	"strings"
	"testing"
)

func render(t *testing.T, md string) string {
	t.Helper()
	var b strings.Builder
	p := Page{Name: "x", Section: "8", Desc: "a test", Version: "1", Manual: "M", Date: "2026-01-01"}
	if err := p.Render(&b, []string{md}); err != nil {
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
		".TS\nallbox tab(|);\nlb lb\nl lx.\na|b\nT{\n\\fBx\\(bay\\fR\nT}|T{\nlink and web <https://example.org>\nT}\n.TE",
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
