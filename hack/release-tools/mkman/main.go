package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

func main() {
	root := flag.String("root", ".", "the repository: the docs are read from here")
	out := flag.String("out", "", "directory the man pages are written to")
	version := flag.String("version", "dev", "version shown in the footer")
	flag.Parse()
	if *out == "" || flag.NArg() != 0 {
		fmt.Fprintln(os.Stderr, "usage: mkman -out DIR [-root DIR] [-version V]")
		os.Exit(2)
	}
	if err := run(*root, *out, *version); err != nil {
		fmt.Fprintln(os.Stderr, "mkman:", err)
		os.Exit(1)
	}
}

// run writes every man page into out.
func run(root, out, version string) error {
	date, err := sourceDate()
	if err != nil {
		return err
	}
	pages, err := manPages(root, version, date)
	if err != nil {
		return err
	}
	installed, err := installedFiles(root)
	if err != nil {
		return err
	}
	links := newLinks(pages, installed)
	for _, p := range pages {
		var b bytes.Buffer
		if err := p.Render(&b, links); err != nil {
			return fmt.Errorf("%s: %w", p.File(), err)
		}
		if err := os.WriteFile(filepath.Join(out, p.File()), b.Bytes(), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// sourceDate is SOURCE_DATE_EPOCH as a date, or today without it.
func sourceDate() (string, error) {
	t := time.Now().UTC()
	if s := os.Getenv("SOURCE_DATE_EPOCH"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return "", fmt.Errorf("SOURCE_DATE_EPOCH=%q: %w", s, err)
		}
		t = time.Unix(n, 0).UTC()
	}
	return t.Format("2006-01-02"), nil
}

// Kind is how a Markdown file goes into a page.
type Kind int

const (
	// Body: the H1 title dropped, H2 headings are sections (.SH), deeper
	// ones subsections (.SS).
	Body Kind = iota
	// Intro: as Body, only the text before the first H2.
	Intro
	// Part: the file is one section of the page: its H1 title is the
	// section (.SH), its deeper headings subsections (.SS).
	Part
)

// Doc is one Markdown file of a page.
type Doc struct {
	Path string // the file, relative to the repository (links are resolved from it)
	Kind Kind
	Text string // the whole file
}

// selected is the file's text the page shows, its lines inside code
// blocks kept as they are.
func (d Doc) selected() string {
	var out []string
	inCode := false
	for _, line := range strings.Split(d.Text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			inCode = !inCode
		}
		if !inCode && d.Kind != Part && strings.HasPrefix(line, "# ") {
			continue
		}
		if !inCode && d.Kind == Intro && strings.HasPrefix(line, "## ") {
			break
		}
		out = append(out, line)
	}
	return strings.Join(out, "\n")
}

// Page is one man page.
type Page struct {
	Name, Section, Desc, Version, Manual, Date string
	// Synopsis are the SYNOPSIS lines (roff), one usage each.
	Synopsis []string
	Docs     []Doc
	// Files is the FILES section: paths and what each is.
	Files []File
	// SeeAlso are the other man pages of SEE ALSO, "name(section)".
	SeeAlso []string
	// Repository is where the files the docs link to and the packages
	// do not install are (a URL), said under SEE ALSO with their paths.
	Repository string
}

// File is an entry of a page's FILES section.
type File struct{ Path, What string }

// File is the page's file name, e.g. dnsd.8.
func (p *Page) File() string { return p.Name + "." + p.Section }

// Render writes the page: header, NAME, then each doc in order (text
// before a Body file's first heading goes under DESCRIPTION). Links
// between docs become references to the pages' sections (none: links are
// their text).
func (p *Page) Render(w io.Writer, links *Links) error {
	r := &renderer{w: w, page: p, links: links}
	r.raw(`'\" t`) // tells man(1) to run tbl(1)
	r.raw(fmt.Sprintf(`.TH %s %s %s %s %s`, quoteArg(strings.ToUpper(p.Name)), p.Section, quoteArg(p.Date),
		quoteArg(p.Name+" "+p.Version), quoteArg(p.Manual)))
	r.raw(".SH NAME")
	r.raw(escape(p.Name) + ` \- ` + escape(p.Desc))
	if len(p.Synopsis) > 0 {
		r.raw(".SH SYNOPSIS")
		for i, l := range p.Synopsis {
			if i > 0 {
				r.raw(".br")
			}
			r.raw(lineSafe(l))
		}
	}
	for _, d := range p.Docs {
		r.doc = d
		r.headed = r.described // a file's intro continues a DESCRIPTION

		r.markdown(d.selected())
	}
	if len(p.Files) > 0 {
		r.raw(".SH FILES")
		for _, f := range p.Files {
			r.raw(".TP")
			r.raw(`\fI` + escape(f.Path) + `\fR`)
			r.text(f.What)
		}
	}
	var uninstalled []string
	if links != nil {
		uninstalled = links.uninstalled[p]
	}
	if len(p.SeeAlso) > 0 || len(uninstalled) > 0 {
		r.raw(`.SH "SEE ALSO"`)
		r.raw(".ad l") // lists of long words: left-aligned
		var refs []string
		for _, s := range p.SeeAlso {
			name, sec, _ := strings.Cut(strings.TrimSuffix(s, ")"), "(")
			refs = append(refs, `\fB`+escape(name)+`\fR(`+sec+`)`)
		}
		if len(refs) > 0 {
			r.raw(strings.Join(refs, ",\n"))
		}
		if len(uninstalled) > 0 {
			r.raw(".PP") // paths unhyphenated
			r.raw("The files this page names by their path in the repository are not installed:")
			var paths []string
			for _, u := range uninstalled {
				paths = append(paths, `\%`+u)
			}
			r.raw(strings.Join(paths, ",\n") + ".")
			if p.Repository != "" {
				r.raw("They are in dnsd's source repository:")
				r.raw(".RS 4")
				r.raw(`\%<` + escape(p.Repository) + ">")
				r.raw(".RE")
			} else {
				r.raw("They are in dnsd's source repository.")
			}
			r.raw(".ad")
		}
	}
	return r.err
}

type renderer struct {
	w      io.Writer
	err    error
	page   *Page
	doc    Doc    // the file being rendered
	links  *Links // nil: links are their text
	headed bool   // a heading has been written for the current file
	// described: the section being written is DESCRIPTION.
	described bool
	inCell    bool // the text is a table cell's
}

func (r *renderer) raw(line string) {
	if r.err == nil {
		_, r.err = io.WriteString(r.w, line+"\n")
	}
}

// text writes inline Markdown as roff lines, each safe at line start.
func (r *renderer) text(s string) {
	for _, line := range strings.Split(r.inline(s), "\n") {
		r.raw(lineSafe(line))
	}
}

var (
	orderedItem = regexp.MustCompile(`^(\d+)\. +(.*)$`)
	tableRule   = regexp.MustCompile(`^\|?[\s:|-]+\|?$`)
)

func (r *renderer) markdown(md string) {
	lines := strings.Split(md, "\n")
	var para []string
	flush := func() {
		if len(para) > 0 {
			if !r.headed {
				r.raw(".SH DESCRIPTION")
				r.headed, r.described = true, true
			}
			r.raw(".PP")
			r.text(strings.Join(para, "\n"))
			para = nil
		}
	}
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		trimmed := strings.TrimSpace(line)
		switch {
		case trimmed == "":
			flush()
		case headingLevel(line) > 0:
			flush()
			if section(r.doc.Kind, headingLevel(line)) {
				r.raw(".SH " + quoteArg(plain(strings.ToUpper(headingText(line)))))
			} else {
				r.raw(".SS " + quoteArg(plain(headingText(line))))
			}
			r.headed, r.described = true, false
		case strings.HasPrefix(trimmed, "```"):
			flush()
			indent := len(line) - len(strings.TrimLeft(line, " "))
			r.raw(".PP")
			r.raw(".RS 4")
			r.raw(".nf")
			for i++; i < len(lines) && !strings.HasPrefix(strings.TrimSpace(lines[i]), "```"); i++ {
				l := lines[i]
				if len(l)-len(strings.TrimLeft(l, " ")) >= indent {
					l = l[indent:]
				}
				r.raw(lineSafe(codeEscape(l)))
			}
			r.raw(".fi")
			r.raw(".RE")
		case strings.HasPrefix(trimmed, "|") && i+1 < len(lines) && tableRule.MatchString(strings.TrimSpace(lines[i+1])) && strings.Contains(lines[i+1], "-"):
			flush()
			var rows [][]string
			rows = append(rows, cells(trimmed))
			for i += 2; i < len(lines) && strings.HasPrefix(strings.TrimSpace(lines[i]), "|"); i++ {
				rows = append(rows, cells(strings.TrimSpace(lines[i])))
			}
			i--
			r.table(rows)
		case strings.HasPrefix(line, "* "), strings.HasPrefix(line, "- "), orderedItem.MatchString(line):
			flush()
			tag, item := `\(bu`, line[2:]
			width := "2"
			if m := orderedItem.FindStringSubmatch(line); m != nil {
				tag, item, width = m[1]+".", m[2], "4"
			}
			// Continuation lines are indented; a blank line followed by an
			// indented line continues the item as a new paragraph.
			body := []string{item}
			for i+1 < len(lines) {
				next := lines[i+1]
				if strings.HasPrefix(next, "  ") && strings.TrimSpace(next) != "" && !strings.HasPrefix(strings.TrimSpace(next), "```") {
					body = append(body, strings.TrimSpace(next))
					i++
					continue
				}
				break
			}
			r.raw(".IP " + tag + " " + width)
			r.text(strings.Join(body, "\n"))
		case strings.HasPrefix(line, "> "):
			flush()
			body := []string{strings.TrimPrefix(line, "> ")}
			for i+1 < len(lines) && strings.HasPrefix(lines[i+1], "> ") {
				i++
				body = append(body, strings.TrimPrefix(lines[i], "> "))
			}
			r.raw(".RS 4")
			r.text(strings.Join(body, "\n"))
			r.raw(".RE")
		default:
			para = append(para, trimmed)
		}
	}
	flush()
}

// headingLevel is the level of a Markdown heading line (1 for "# "), 0
// for any other line.
func headingLevel(line string) int {
	n := len(line) - len(strings.TrimLeft(line, "#"))
	if n == 0 || n > 6 || !strings.HasPrefix(line[n:], " ") {
		return 0
	}
	return n
}

// headingText is a heading line's text, Markdown kept.
func headingText(line string) string {
	return strings.TrimSpace(strings.TrimLeft(line, "#"))
}

// section tells whether a heading of the level is a section (.SH) of the
// page, not a subsection (.SS).
func section(k Kind, level int) bool {
	if k == Part {
		return level == 1
	}
	return level <= 2
}

// cells splits a Markdown table row.
func cells(row string) []string {
	row = strings.TrimSuffix(strings.TrimPrefix(row, "|"), "|")
	var out []string
	var cur strings.Builder
	inCode := false
	for i := 0; i < len(row); i++ {
		c := row[i]
		switch {
		case c == '\\' && i+1 < len(row) && row[i+1] == '|':
			cur.WriteByte('|')
			i++
		case c == '`':
			inCode = !inCode
			cur.WriteByte(c)
		case c == '|' && !inCode:
			out = append(out, strings.TrimSpace(cur.String()))
			cur.Reset()
		default:
			cur.WriteByte(c)
		}
	}
	return append(out, strings.TrimSpace(cur.String()))
}

// cellBreaks lets a long name or path in a narrow table column break
// after its separators and between the words of a CamelCase name (\: is
// a break point that prints nothing).
var (
	cellBreaks = strings.NewReplacer("/", `/\:`, "_", `_\:`, ".", `.\:`, ",", `,\:`)
	camelBreak = regexp.MustCompile(`([a-z])([A-Z])`)
)

// table writes a tbl(1) table: a bold header row, then one row per line,
// every cell a text block so long cells fill, left-aligned (a narrow
// column cannot be justified).
func (r *renderer) table(rows [][]string) {
	r.inCell = true
	defer func() { r.inCell = false }()
	n := len(rows[0])
	r.raw(".PP")
	r.raw(".TS")
	r.raw("allbox tab(|);")
	r.raw(strings.TrimSpace(strings.Repeat("lb ", n)))
	if n <= 2 {
		r.raw(strings.TrimSpace(strings.Repeat("l ", n-1)+"lx") + ".") // the last column takes the rest
	} else {
		r.raw(strings.TrimSpace(strings.Repeat("lx ", n)) + ".") // columns of one width
	}
	for ri, row := range rows {
		for len(row) < n {
			row = append(row, "")
		}
		row = row[:n]
		var parts []string
		for _, c := range row {
			t := strings.ReplaceAll(r.inline(c), "|", `\(ba`)
			if ri == 0 {
				parts = append(parts, t)
				continue
			}
			parts = append(parts, "T{\n.na\n"+lineSafe(t)+"\nT}")
		}
		r.raw(strings.Join(parts, "|"))
	}
	r.raw(".TE")
}

var (
	codeSpan = regexp.MustCompile("`([^`]+)`")
	link     = regexp.MustCompile(`\[([^\]]+)\]\(([^)]+)\)`)
	bold     = regexp.MustCompile(`\*\*([^*]+)\*\*`)
	italic   = regexp.MustCompile(`(^|[^*\w])\*([^*\s][^*]*)\*|(^|\W)_([^_\s][^_]*)_(\W|$)`)
)

// inline converts inline Markdown to roff: code and bold in bold,
// emphasis in italics, external links as their text and URL, links
// between docs as references (see Links.render).
func (r *renderer) inline(s string) string {
	// Code spans first: their text is literal. They are swapped for
	// placeholders so the other rules do not touch them.
	var spans, literal []string
	s = codeSpan.ReplaceAllStringFunc(s, func(m string) string {
		code := codeEscape(m[1 : len(m)-1])
		if r.inCell {
			code = camelBreak.ReplaceAllString(cellBreaks.Replace(code), `$1\:$2`)
		}
		spans = append(spans, `\fB`+code+`\fR`)
		literal = append(literal, m[1:len(m)-1])
		return "\x00" + strconv.Itoa(len(spans)-1) + "\x00"
	})
	s = escape(s)
	s = link.ReplaceAllStringFunc(s, func(m string) string {
		sm := link.FindStringSubmatch(m)
		if strings.HasPrefix(sm[2], "http://") || strings.HasPrefix(sm[2], "https://") {
			return sm[1] + " <" + sm[2] + ">"
		}
		if r.links == nil {
			return sm[1]
		}
		text := sm[1]
		for i, l := range literal {
			text = strings.ReplaceAll(text, "\x00"+strconv.Itoa(i)+"\x00", l)
		}
		out, err := r.links.render(r.page, r.doc.Path, sm[1], text, sm[2])
		if err != nil && r.err == nil {
			r.err = err
		}
		return out
	})
	s = bold.ReplaceAllString(s, `\fB$1\fR`)
	s = italic.ReplaceAllStringFunc(s, func(m string) string {
		sm := italic.FindStringSubmatch(m)
		if sm[2] != "" {
			return sm[1] + `\fI` + sm[2] + `\fR`
		}
		return sm[3] + `\fI` + sm[4] + `\fR` + sm[5]
	})
	for i, sp := range spans {
		s = strings.Replace(s, "\x00"+strconv.Itoa(i)+"\x00", sp, 1)
	}
	return s
}

// escape makes text literal for roff: backslashes doubled as \e and
// anything outside ASCII as a \[uXXXX] glyph.
func escape(s string) string {
	var b strings.Builder
	for _, c := range s {
		switch {
		case c == '\\':
			b.WriteString(`\e`)
		case c > 0x7e:
			fmt.Fprintf(&b, `\[u%04X]`, c)
		default:
			b.WriteRune(c)
		}
	}
	return b.String()
}

// codeEscape is escape for code: hyphens become \- so that options and
// commands copy and paste as typed.
func codeEscape(s string) string {
	return strings.ReplaceAll(escape(s), "-", `\-`)
}

// lineSafe protects a roff line that starts with a control character.
func lineSafe(line string) string {
	if strings.HasPrefix(line, ".") || strings.HasPrefix(line, "'") {
		return `\&` + line
	}
	return line
}

// plain is a heading's text without Markdown, escaped.
func plain(s string) string {
	s = strings.NewReplacer("`", "", "**", "").Replace(strings.TrimSpace(s))
	s = link.ReplaceAllString(s, "$1")
	return escape(s)
}

// quoteArg quotes a macro argument.
func quoteArg(s string) string {
	return `"` + strings.ReplaceAll(s, `"`, `\(dq`) + `"`
}
