package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"
)

func main() {
	name := flag.String("name", "", "page name (e.g. dnsd)")
	section := flag.String("section", "", "man section (e.g. 8)")
	desc := flag.String("desc", "", "one-line description for NAME")
	version := flag.String("version", "dev", "version shown in the footer")
	manual := flag.String("manual", "System Manager's Manual", "manual name shown in the header")
	flag.Parse()
	if *name == "" || *section == "" || *desc == "" || flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: mkman -name NAME -section N -desc TEXT [-version V] FILE.md[:intro]...")
		os.Exit(2)
	}
	date, err := sourceDate()
	if err != nil {
		fmt.Fprintln(os.Stderr, "mkman:", err)
		os.Exit(1)
	}
	var md []string
	for _, arg := range flag.Args() {
		file, part, _ := strings.Cut(arg, ":")
		text, err := os.ReadFile(file)
		if err != nil {
			fmt.Fprintln(os.Stderr, "mkman:", err)
			os.Exit(1)
		}
		md = append(md, selectPart(string(text), part == "intro"))
	}
	w := bufio.NewWriter(os.Stdout)
	page := Page{Name: *name, Section: *section, Desc: *desc, Version: *version, Manual: *manual, Date: date}
	if err := page.Render(w, md); err != nil {
		fmt.Fprintln(os.Stderr, "mkman:", err)
		os.Exit(1)
	}
	if err := w.Flush(); err != nil {
		fmt.Fprintln(os.Stderr, "mkman:", err)
		os.Exit(1)
	}
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

// selectPart drops the H1 title and, with intro, everything from the
// first H2 on.
func selectPart(md string, intro bool) string {
	var out []string
	for _, line := range strings.Split(md, "\n") {
		if strings.HasPrefix(line, "# ") {
			continue
		}
		if intro && strings.HasPrefix(line, "## ") {
			break
		}
		out = append(out, line)
	}
	return strings.Join(out, "\n")
}

// Page is one man page.
type Page struct {
	Name, Section, Desc, Version, Manual, Date string
}

// Render writes the page: header, NAME, then each Markdown text in order
// (text before a file's first heading goes under DESCRIPTION).
func (p Page) Render(w io.Writer, md []string) error {
	r := &renderer{w: w}
	r.raw(`'\" t`) // tells man(1) to run tbl(1)
	r.raw(fmt.Sprintf(`.TH %s %s %s %s %s`, quoteArg(strings.ToUpper(p.Name)), p.Section, quoteArg(p.Date),
		quoteArg(p.Name+" "+p.Version), quoteArg(p.Manual)))
	r.raw(".SH NAME")
	r.raw(escape(p.Name) + ` \- ` + escape(p.Desc))
	for _, text := range md {
		r.headed = false
		r.markdown(text)
	}
	return r.err
}

type renderer struct {
	w      io.Writer
	err    error
	headed bool // a heading has been written for the current file
}

func (r *renderer) raw(line string) {
	if r.err == nil {
		_, r.err = io.WriteString(r.w, line+"\n")
	}
}

// text writes inline Markdown as roff lines, each safe at line start.
func (r *renderer) text(s string) {
	for _, line := range strings.Split(inline(s), "\n") {
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
				r.headed = true
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
		case strings.HasPrefix(line, "## "):
			flush()
			r.raw(".SH " + quoteArg(plain(strings.ToUpper(line[3:]))))
			r.headed = true
		case strings.HasPrefix(line, "### "), strings.HasPrefix(line, "#### "):
			flush()
			r.raw(".SS " + quoteArg(plain(strings.TrimLeft(line, "# "))))
			r.headed = true
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
			r.raw(".RS 4")
			r.text(strings.TrimPrefix(line, "> "))
			r.raw(".RE")
		default:
			para = append(para, trimmed)
		}
	}
	flush()
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

// table writes a tbl(1) table: a bold header row, then one row per line,
// every cell a text block so long cells fill.
func (r *renderer) table(rows [][]string) {
	n := len(rows[0])
	r.raw(".PP")
	r.raw(".TS")
	r.raw("allbox tab(|);")
	r.raw(strings.TrimSpace(strings.Repeat("lb ", n)))
	r.raw(strings.TrimSpace(strings.Repeat("l ", n-1)+"lx") + ".")
	for ri, row := range rows {
		for len(row) < n {
			row = append(row, "")
		}
		row = row[:n]
		var parts []string
		for _, c := range row {
			t := strings.ReplaceAll(inline(c), "|", `\(ba`)
			if ri == 0 {
				parts = append(parts, t)
				continue
			}
			parts = append(parts, "T{\n"+lineSafe(t)+"\nT}")
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
// emphasis in italics, links as their text (external ones with the URL).
func inline(s string) string {
	// Code spans first: their text is literal. They are swapped for
	// placeholders so the other rules do not touch them.
	var spans []string
	s = codeSpan.ReplaceAllStringFunc(s, func(m string) string {
		spans = append(spans, `\fB`+codeEscape(m[1:len(m)-1])+`\fR`)
		return "\x00" + strconv.Itoa(len(spans)-1) + "\x00"
	})
	s = escape(s)
	s = link.ReplaceAllStringFunc(s, func(m string) string {
		sm := link.FindStringSubmatch(m)
		if strings.HasPrefix(sm[2], "http://") || strings.HasPrefix(sm[2], "https://") {
			return sm[1] + " <" + sm[2] + ">"
		}
		return sm[1]
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
