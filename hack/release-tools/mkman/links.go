package main

import (
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"
	"unicode"
)

// Links turns a link from one doc to another into what a man page can
// show: a reference to a section of the same page (\fIHEADING\fR), of
// another page (\fIHeading\fR in \fBdnsd\fR(8)), or, for a file no page
// includes, the file's path in the repository.
type Links struct {
	docs map[string]*target // by the doc's path
	// installed maps a repository file the packages install to its
	// installed path.
	installed map[string]string
	// uninstalled lists, per page, the files it links to that no page
	// holds and the packages do not install (roff, in the order of the
	// first link), for its SEE ALSO.
	uninstalled map[*Page][]string
}

type target struct {
	page     *Page
	title    string             // the section a Part doc is; "" for the others
	headings map[string]heading // by GitHub anchor
}

type heading struct {
	shown string // as the page shows it, roff; "" for a title the page drops
	text  string // the Markdown text, code marks dropped
}

// newLinks indexes the pages' docs; installed maps the repository files
// the packages install to their installed paths (nil: none).
func newLinks(pages []*Page, installed map[string]string) *Links {
	l := &Links{docs: map[string]*target{}, installed: installed, uninstalled: map[*Page][]string{}}
	for _, p := range pages {
		for _, d := range p.Docs {
			t := &target{page: p, headings: map[string]heading{}}
			l.docs[d.Path] = t
			if d.Kind == Intro {
				continue // its headings are not on the page
			}
			inCode := false
			for _, line := range strings.Split(d.Text, "\n") {
				if strings.HasPrefix(strings.TrimSpace(line), "```") {
					inCode = !inCode
				}
				n := headingLevel(line)
				if inCode || n == 0 {
					continue
				}
				text := headingText(line)
				h := heading{shown: plain(text), text: strings.ReplaceAll(text, "`", "")}
				switch {
				case d.Kind == Body && n == 1:
					h.shown = ""
				case section(d.Kind, n):
					h.shown = plain(strings.ToUpper(text))
				}
				if d.Kind == Part && n == 1 {
					t.title = h.shown
				}
				t.headings[anchor(text, t.headings)] = h
			}
		}
	}
	return l
}

// anchor is the fragment name GitHub gives a heading: lower case,
// punctuation dropped, spaces as hyphens, a repeated one numbered.
func anchor(text string, seen map[string]heading) string {
	var b strings.Builder
	for _, r := range strings.ToLower(text) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	a := b.String()
	for i, base := 1, a; ; i++ {
		if _, ok := seen[a]; !ok {
			return a
		}
		a = base + "-" + strconv.Itoa(i)
	}
}

// render is the roff for a link on page from the doc at path from: text
// is the link's text as roff, plainText the same without markup, href
// its target. A link whose text names the target (a file name, a doc's
// name, the heading, the man page) becomes the reference; any other keeps its text,
// the reference after it in parentheses. A link within one doc is its
// text.
func (l *Links) render(page *Page, from, text, plainText, href string) (string, error) {
	file, frag, _ := strings.Cut(href, "#")
	to := from
	if file != "" {
		to = path.Clean(path.Join(path.Dir(from), file))
	}
	plainText = strings.TrimSpace(plainText)
	names := strings.Contains(plainText, ".md") || strings.Contains(plainText, "/") ||
		strings.EqualFold(plainText, strings.TrimSuffix(path.Base(to), path.Ext(to)))
	t, ok := l.docs[to]
	if !ok {
		shown := escape(to)
		if strings.HasSuffix(file, "/") {
			shown += "/" // a directory
		}
		// A file the packages install is named by its repository path,
		// as the docs do next to where it is installed; any other is
		// listed under SEE ALSO, with where to find it.
		if _, ok := l.installed[to]; !ok && !slices.Contains(l.uninstalled[page], shown) {
			l.uninstalled[page] = append(l.uninstalled[page], shown)
		}
		switch {
		case strings.TrimSuffix(plainText, "/") == to:
			return text, nil
		case names:
			return shown, nil
		}
		return text + " (" + shown + ")", nil
	}
	if to == from {
		return text, nil
	}
	shown := t.title
	if frag != "" {
		h, ok := t.headings[frag]
		if !ok {
			return text, fmt.Errorf("%s: link to %s: no such heading", from, href)
		}
		if h.shown != "" {
			shown = h.shown
		}
		names = names || strings.EqualFold(plainText, h.text)
	}
	names = names || plainText == t.page.Name+"("+t.page.Section+")"
	var ref string
	if shown != "" {
		ref = `\fI` + shown + `\fR`
		if t.title != "" && shown != t.title {
			ref += ` under \fI` + t.title + `\fR`
		}
	}
	if t.page != page {
		p := `\fB` + escape(t.page.Name) + `\fR(` + t.page.Section + `)`
		if ref == "" {
			ref = p
		} else {
			ref += " in " + p
		}
	}
	switch {
	case ref == "":
		return text, nil
	case names:
		return ref, nil
	}
	return text + " (" + ref + ")", nil
}
