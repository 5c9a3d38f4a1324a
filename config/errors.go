package config

import (
	"cmp"
	"slices"
	"strings"
)

// Error is one problem in a config file, at a position and a YAML path
// such as `zones."example.internal"[0].hosts.ttl`.
type Error struct {
	Pos  Pos    // where the problem is; always set
	Path string // "" for problems of the document as a whole
	Msg  string // what is wrong; never empty
}

// Error formats the problem as FILE:LINE:COL: yaml.path: message.
func (e *Error) Error() string {
	if e.Path == "" {
		return e.Pos.String() + ": " + e.Msg
	}
	return e.Pos.String() + ": " + e.Path + ": " + e.Msg
}

// ErrorList is every problem found in a config file, sorted by position.
// Load and Parse return it (as error) whenever the file is not valid.
type ErrorList []*Error

// Error joins all problems, one per line.
func (l ErrorList) Error() string {
	var b strings.Builder
	for i, e := range l {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(e.Error())
	}
	return b.String()
}

// Unwrap lets errors.As find the individual *Error values.
func (l ErrorList) Unwrap() []error {
	errs := make([]error, len(l))
	for i, e := range l {
		errs[i] = e
	}
	return errs
}

// sort orders the list by line, then column; problems at the same
// position keep the order they were found in.
func (l ErrorList) sort() {
	slices.SortStableFunc(l, func(a, b *Error) int {
		if c := cmp.Compare(a.Pos.Line, b.Pos.Line); c != 0 {
			return c
		}
		return cmp.Compare(a.Pos.Col, b.Pos.Col)
	})
}
