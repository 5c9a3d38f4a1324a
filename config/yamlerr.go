package config

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// yaml.v3 reports a syntax error as one string, "yaml: line N: problem",
// with no column, and N means different things. For a problem its
// scanner finds (a tab, a stray character) it is the 1-based line of the
// problem. For a problem its parser finds in a list or map (not closed, a
// key indented wrongly) it is the 0-based line where that list or map
// begins — unless that is the first line, when it is the 0-based line of
// the problem instead; a parser problem outside any list or map gives the
// 0-based line of the problem. syntaxError turns all of these into a
// FILE:LINE:COL position an operator can go to.

// parserProblems are the problems yaml.v3's parser reports, with what the
// position then points at ("" for a problem reported at its own place).
// No scanner problem has one of these texts.
var parserProblems = map[string]string{
	"did not find expected ',' or ']'":       "the [ list that begins here is not closed",
	"did not find expected ',' or '}'":       "the { map that begins here is not closed",
	"did not find expected '-' indicator":    "in the list that begins here, an entry is indented wrongly",
	"did not find expected key":              "in the map that begins here, a key is indented wrongly",
	"did not find expected node content":     "a value is missing in what begins here",
	"found undefined tag handle":             "a tag is not defined in what begins here",
	"did not find expected <document start>": "",
	"did not find expected <stream-start>":   "",
	"found duplicate %YAML directive":        "",
	"found duplicate %TAG directive":         "",
	"found incompatible YAML document":       "",
}

// badChar reports the first byte of data that is not UTF-8 (a file saved
// in Latin-1, say) or the first character YAML does not allow (a control
// character, NUL), where it is; nil when there is none. yaml.v3 reports
// both without a position.
func badChar(file string, data []byte) *Error {
	line, start := 1, 0
	for i := 0; i < len(data); {
		r, n := utf8.DecodeRune(data[i:])
		at := func() Pos { return Pos{File: file, Line: line, Col: utf8.RuneCount(data[start:i]) + 1} }
		if r == utf8.RuneError && n <= 1 {
			return &Error{Pos: at(),
				Msg: fmt.Sprintf("invalid YAML: byte 0x%02X is not UTF-8 (dnsd.yaml must be UTF-8; was it saved in another encoding?)", data[i])}
		}
		if !yamlChar(r) {
			return &Error{Pos: at(), Msg: fmt.Sprintf("invalid YAML: control character %U is not allowed", r)}
		}
		if data[i] == '\n' {
			line, start = line+1, i+1
		}
		i += n
	}
	return nil
}

// yamlChar reports whether YAML allows r in a file (YAML 1.2 §5.1, as
// yaml.v3 checks it).
func yamlChar(r rune) bool {
	return r == '\t' || r == '\n' || r == '\r' || r >= 0x20 && r <= 0x7E || r == 0x85 ||
		r >= 0xA0 && r <= 0xD7FF || r >= 0xE000 && r <= 0xFFFD || r >= 0x10000 && r <= 0x10FFFF
}

// syntaxError positions the error err that decode gave for data. For a
// parser problem it decodes data again behind one empty line, so that
// the list or map the problem is in never begins on the first line, and
// takes the line yaml.v3 gives then.
func syntaxError(file string, data []byte, err error, decode func([]byte) error) *Error {
	pos := Pos{File: file, Line: 1, Col: 1}
	line, problem := yamlProblem(err)
	msg := problem
	if what, ok := parserProblems[problem]; ok {
		if l, p := yamlProblem(decode(append([]byte{'\n'}, data...))); p == problem && l > 0 {
			pos.Line = l
			pos.Col = constructColumn(lineOf(data, l), problem)
			if what != "" {
				msg += " (" + what + ")"
			}
		} else {
			pos.Line = line + 1
		}
	} else if line > 0 {
		pos.Line = line
	} else if name, ok := strings.CutPrefix(problem, "unknown anchor '"); ok {
		// Reported without a line: find the alias.
		if name, ok = strings.CutSuffix(name, "' referenced"); ok {
			if l, col, found := findAlias(data, name); found {
				pos.Line, pos.Col = l, col
			}
		}
	}
	if last := lineCount(data); pos.Line > last {
		// A problem at the end of the input ("listen: [" and nothing
		// after): its last line.
		pos.Line, pos.Col = last, 1
	}
	// A tab in the indentation: yaml.v3 says "found character that
	// cannot start any token", without naming it.
	text := lineOf(data, pos.Line)
	indent := text[:len(text)-len(strings.TrimLeft(text, " \t"))]
	if i := strings.IndexByte(indent, '\t'); i >= 0 {
		pos.Col = i + 1
		msg += " (a tab indents this line: YAML indents with spaces only)"
	}
	return &Error{Pos: pos, Msg: "invalid YAML: " + msg}
}

// lineCount is how many lines data has for YAML: every line break (LF,
// CR not before LF, NEL, LS, PS) starts one.
func lineCount(data []byte) int {
	s := string(data)
	return 1 + strings.Count(s, "\n") + strings.Count(s, "\r") - strings.Count(s, "\r\n") +
		strings.Count(s, "\u0085") + strings.Count(s, "\u2028") + strings.Count(s, "\u2029")
}

// yamlProblem splits a yaml.v3 error into its line (0 when it gives none)
// and the problem.
func yamlProblem(err error) (line int, problem string) {
	if err == nil {
		return 0, ""
	}
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		if num, p, ok := strings.Cut(rest, ": "); ok {
			if n, aerr := strconv.Atoi(num); aerr == nil && n >= 0 {
				return n, p
			}
		}
	}
	return 0, msg
}

// lineOf returns the 1-based line n of data ("" past its end).
func lineOf(data []byte, n int) string {
	for i := 1; len(data) > 0; i++ {
		line, rest, _ := bytes.Cut(data, []byte{'\n'})
		if i == n {
			return string(line)
		}
		data = rest
	}
	return ""
}

// constructColumn is the 1-based column, on line, of the construct a
// parser problem is in: for a flow list or map not closed, the opening
// bracket left open (outside quotes); otherwise the line's first
// character that is not a space.
func constructColumn(line, problem string) int {
	open, close := byte(0), byte(0)
	switch {
	case strings.HasSuffix(problem, "']'"):
		open, close = '[', ']'
	case strings.HasSuffix(problem, "'}'"):
		open, close = '{', '}'
	}
	if open != 0 {
		var stack []int
		quote := byte(0)
		for i := 0; i < len(line); i++ {
			c := line[i]
			switch {
			case quote != 0:
				if c == quote {
					quote = 0
				} else if c == '\\' && quote == '"' {
					i++
				}
			case c == '"' || c == '\'':
				quote = c
			case c == '#' && (i == 0 || line[i-1] == ' '):
				i = len(line)
			case c == open:
				stack = append(stack, i)
			case c == close && len(stack) > 0:
				stack = stack[:len(stack)-1]
			}
		}
		if len(stack) > 0 {
			return stack[len(stack)-1] + 1
		}
	}
	return len(line) - len(strings.TrimLeft(line, " \t")) + 1
}

// findAlias finds the first "*name" in data that stands as an alias (not
// inside a word), as a 1-based line and column.
func findAlias(data []byte, name string) (line, col int, ok bool) {
	needle := "*" + name
	for i, l := range strings.Split(string(data), "\n") {
		from := 0
		for {
			j := strings.Index(l[from:], needle)
			if j < 0 {
				break
			}
			j += from
			end := j + len(needle)
			if (j == 0 || strings.ContainsRune(" \t[{,:-", rune(l[j-1]))) &&
				(end == len(l) || strings.ContainsRune(" \t]},#", rune(l[end]))) {
				return i + 1, j + 1, true
			}
			from = j + 1
		}
	}
	return 0, 0, false
}
