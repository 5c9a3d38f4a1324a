package config

import (
	"bytes"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/dnsd/dnsd/internal/fsutil"
)

// maxConfigSize bounds dnsd.yaml (a config is kilobytes; this only keeps
// a wrong path from being read into memory whole).
const maxConfigSize = 64 << 20

// Load reads, parses and validates the config file at path and applies
// defaults. A file that cannot be read gives an error naming it; an invalid
// file gives an ErrorList with every problem found. A path that is not a
// regular file (a FIFO, a device, a directory) is an error found without
// reading it, so a start or a reload never blocks on it.
func Load(path string) (*Config, error) {
	data, _, err := fsutil.ReadFile(path, maxConfigSize)
	if err != nil {
		return nil, fmt.Errorf("reading config %s: %w", path, unwrapPathErr(err))
	}
	return Parse(path, data)
}

// Parse is Load on bytes already read from file. file names the source in
// error positions, and relative paths inside the config (hosts files, TLS
// material, ...) are resolved against its directory. Parse checks that
// those files are readable but never touches the network.
func Parse(file string, data []byte) (*Config, error) {
	p := &parser{file: file, dir: filepath.Dir(file)}
	cfg := p.parse(data)
	if len(p.errs) > 0 {
		p.errs.sort()
		return nil, p.errs
	}
	return cfg, nil
}

// parser holds the state of one Parse call.
type parser struct {
	file string
	dir  string // directory of file, base of relative paths
	errs ErrorList
}

// yamlLine extracts the line from yaml.v3 syntax errors ("yaml: line 3: ...").
var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

func (p *parser) parse(data []byte) *Config {
	root, err := p.decode(data)
	if err != nil {
		msg := strings.TrimPrefix(err.Error(), "yaml: ")
		line := 1
		if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
			if n, aerr := strconv.Atoi(m[1]); aerr == nil && n > 0 {
				line, msg = n, m[2]
			}
		}
		p.errs = append(p.errs, &Error{Pos: Pos{File: p.file, Line: line, Col: 1}, Msg: "invalid YAML: " + msg})
		return nil
	}
	return p.config(root)
}

// decode reads exactly one YAML document. It returns a nil node for an
// empty document.
func (p *parser) decode(data []byte) (root *yaml.Node, err error) {
	// yaml.v3 is not supposed to panic, but a config file must never take
	// the daemon down on reload: turn a panic into a syntax error.
	defer func() {
		if r := recover(); r != nil {
			root, err = nil, fmt.Errorf("yaml: parser failure: %v", r)
		}
	}()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		return nil, err
	}
	var next yaml.Node
	switch err := dec.Decode(&next); {
	case errors.Is(err, io.EOF):
	case err != nil:
		return nil, err
	default:
		return nil, fmt.Errorf("yaml: line %d: a second YAML document (---) is not allowed: dnsd.yaml is one document", next.Line)
	}
	if doc.Kind == yaml.DocumentNode && len(doc.Content) == 1 {
		return doc.Content[0], nil
	}
	return &doc, nil
}

// errorf records a problem at node n.
func (p *parser) errorf(n *yaml.Node, path, format string, args ...any) {
	p.errs = append(p.errs, &Error{Pos: p.pos(n), Path: path, Msg: fmt.Sprintf(format, args...)})
}

// errorAt records a problem at an explicit position.
func (p *parser) errorAt(pos Pos, path, format string, args ...any) {
	p.errs = append(p.errs, &Error{Pos: pos, Path: path, Msg: fmt.Sprintf(format, args...)})
}

func (p *parser) pos(n *yaml.Node) Pos {
	if n == nil || n.Line == 0 {
		return Pos{File: p.file, Line: 1, Col: 1}
	}
	return Pos{File: p.file, Line: n.Line, Col: n.Column}
}

// ---- YAML paths ----

var plainKey = regexp.MustCompile(`^[a-z_][a-z0-9_]*$`)

// keyPath appends a mapping key to a YAML path, quoting keys that are not
// plain identifiers: zones."example.internal".
func keyPath(path, key string) string {
	if !plainKey.MatchString(key) {
		key = strconv.Quote(key)
	}
	if path == "" {
		return key
	}
	return path + "." + key
}

func indexPath(path string, i int) string { return path + "[" + strconv.Itoa(i) + "]" }

// ---- node helpers ----

// deref follows aliases (*anchor) to the node they name.
func deref(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && i < 64; i++ {
		n = n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool {
	n = deref(n)
	return n == nil || n.Kind == 0 || (n.Kind == yaml.ScalarNode && n.Tag == "!!null")
}

// describe names what a node is, for "expected X, got Y" messages.
func describe(n *yaml.Node) string {
	n = deref(n)
	switch {
	case n == nil || n.Kind == 0:
		return "nothing"
	case n.Kind == yaml.MappingNode:
		return "a mapping"
	case n.Kind == yaml.SequenceNode:
		return "a list"
	case n.Kind == yaml.DocumentNode:
		return "a document"
	}
	switch n.Tag {
	case "!!null":
		return "nothing (null)"
	case "!!bool":
		return "the boolean " + n.Value
	case "!!int", "!!float":
		return "the number " + n.Value
	case "!!str":
		return "the string " + strconv.Quote(n.Value)
	}
	return fmt.Sprintf("a %s value %q", n.Tag, n.Value)
}

// field is one key of a mapping with its value.
type field struct {
	key, val *yaml.Node
}

// mapping is a checked YAML mapping: every key known, none duplicated.
type mapping struct {
	p      *parser
	path   string
	node   *yaml.Node // the mapping (nil when it was null)
	fields map[string]field
}

// mapping checks that n is a mapping (null counts as empty) whose keys are
// all in known, reporting unknown, duplicate and non-string keys. It
// returns nil when n is not a mapping at all.
func (p *parser) mapping(n *yaml.Node, path string, known ...string) *mapping {
	m := &mapping{p: p, path: path, fields: map[string]field{}}
	if isNull(n) {
		return m
	}
	n = deref(n)
	if n.Kind != yaml.MappingNode {
		p.errorf(n, path, "expected a mapping, got %s", describe(n))
		return nil
	}
	m.node = n
	merged := map[string]field{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind == yaml.ScalarNode && k.Tag == "!!merge" {
			p.merge(v, path, known, merged)
			continue
		}
		key, ok := p.key(k, path)
		if !ok {
			continue
		}
		if prev, dup := m.fields[key]; dup {
			p.errorf(k, keyPath(path, key), "duplicate key (first at line %d)", prev.key.Line)
			continue
		}
		if !slices.Contains(known, key) {
			p.errorf(k, keyPath(path, key), "unknown key %q (known: %s)", key, strings.Join(sorted(known), ", "))
			continue
		}
		m.fields[key] = field{key: k, val: v}
	}
	for key, f := range merged {
		if _, set := m.fields[key]; !set {
			m.fields[key] = f
		}
	}
	return m
}

// merge applies a YAML merge key (<<: *anchor or <<: [*a, *b]); keys
// written in the mapping itself win over merged ones.
func (p *parser) merge(v *yaml.Node, path string, known []string, into map[string]field) {
	v = deref(v)
	var srcs []*yaml.Node
	switch v.Kind {
	case yaml.MappingNode:
		srcs = []*yaml.Node{v}
	case yaml.SequenceNode:
		srcs = v.Content
	default:
		p.errorf(v, path, "<< merges a mapping or a list of mappings, got %s", describe(v))
		return
	}
	for _, s := range srcs {
		sm := p.mapping(s, path, known...)
		if sm == nil {
			continue
		}
		for key, f := range sm.fields {
			if _, set := into[key]; !set {
				into[key] = f
			}
		}
	}
}

// key returns a mapping key as a string; keys must be scalars.
func (p *parser) key(k *yaml.Node, path string) (string, bool) {
	k = deref(k)
	if k.Kind != yaml.ScalarNode {
		p.errorf(k, path, "a key must be a string, got %s", describe(k))
		return "", false
	}
	return k.Value, true
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// get returns the value node of key (nil when absent or null) and its path.
func (m *mapping) get(key string) (*yaml.Node, string) {
	path := keyPath(m.path, key)
	f, ok := m.fields[key]
	if !ok || isNull(f.val) {
		return nil, path
	}
	return deref(f.val), path
}

// emptyList reports whether key is absent, null or an empty list.
func (m *mapping) emptyList(key string) bool {
	n, _ := m.get(key)
	return n == nil || (n.Kind == yaml.SequenceNode && len(n.Content) == 0)
}

// has reports whether key was written (even with a null value).
func (m *mapping) has(key string) bool {
	_, ok := m.fields[key]
	return ok
}

// keyNode returns the key node of key, or the mapping itself.
func (m *mapping) keyNode(key string) *yaml.Node {
	if f, ok := m.fields[key]; ok {
		return f.key
	}
	return m.node
}

// scalar checks that n is a scalar and returns its text.
func (p *parser) scalar(n *yaml.Node, path string) (string, bool) {
	if n.Kind != yaml.ScalarNode {
		p.errorf(n, path, "expected a string, got %s", describe(n))
		return "", false
	}
	return n.Value, true
}

// str sets *dst to the string at key, when present.
func (m *mapping) str(key string, dst *string) *yaml.Node {
	n, path := m.get(key)
	if n == nil {
		return nil
	}
	if s, ok := m.p.scalar(n, path); ok {
		*dst = s
	}
	return n
}

// boolean sets *dst to the boolean at key, when present.
func (m *mapping) boolean(key string, dst *bool) *yaml.Node {
	n, path := m.get(key)
	if n == nil {
		return nil
	}
	if n.Kind != yaml.ScalarNode || n.Tag != "!!bool" {
		m.p.errorf(n, path, "expected true or false, got %s", describe(n))
		return n
	}
	var b bool
	if err := n.Decode(&b); err != nil {
		m.p.errorf(n, path, "expected true or false, got %s", describe(n))
		return n
	}
	*dst = b
	return n
}

// integer sets *dst to the integer at key, when present and in [lo, hi].
func (m *mapping) integer(key string, dst *int, lo, hi int) *yaml.Node {
	n, path := m.get(key)
	if n == nil {
		return nil
	}
	var v int64
	if n.Kind != yaml.ScalarNode || n.Tag != "!!int" || n.Decode(&v) != nil {
		m.p.errorf(n, path, "expected an integer, got %s", describe(n))
		return n
	}
	if v < int64(lo) || v > int64(hi) {
		m.p.errorf(n, path, "%d is out of range: must be %s", v, rangeText(lo, hi))
		return n
	}
	*dst = int(v)
	return n
}

func rangeText(lo, hi int) string {
	switch {
	case hi == maxInt:
		return fmt.Sprintf(">= %d", lo)
	default:
		return fmt.Sprintf("between %d and %d", lo, hi)
	}
}

const maxInt = int(^uint(0) >> 1)

// durLimit constrains a duration: Min (inclusive), Max (0 = none) and
// whether it must be a whole number of seconds (DNS TTLs).
type durLimit struct {
	Min, Max time.Duration
	Seconds  bool
}

var (
	nonNegative = durLimit{}
	positive    = durLimit{Min: time.Nanosecond}
)

// duration sets *dst to the Go duration at key, when present and valid.
func (m *mapping) duration(key string, dst *time.Duration, lim durLimit) *yaml.Node {
	n, path := m.get(key)
	if n == nil {
		return nil
	}
	if n.Kind != yaml.ScalarNode {
		m.p.errorf(n, path, "expected a duration such as 500ms, 5s or 1h, got %s", describe(n))
		return n
	}
	d, err := time.ParseDuration(n.Value)
	if err != nil {
		m.p.errorf(n, path, "bad duration %q: %v (use Go syntax: 500ms, 5s, 1h)", n.Value, strings.TrimPrefix(err.Error(), "time: "))
		return n
	}
	switch {
	case d < 0:
		m.p.errorf(n, path, "duration %s must not be negative", n.Value)
	case d < lim.Min && lim.Min == time.Nanosecond:
		m.p.errorf(n, path, "duration must be greater than 0")
	case d < lim.Min:
		m.p.errorf(n, path, "duration %s is too short: must be at least %s", n.Value, lim.Min)
	case lim.Max > 0 && d > lim.Max:
		m.p.errorf(n, path, "duration %s is too long: must be at most %s", n.Value, lim.Max)
	case lim.Seconds && d%time.Second != 0:
		m.p.errorf(n, path, "duration %s must be a whole number of seconds (it is a DNS TTL)", n.Value)
	default:
		*dst = d
	}
	return n
}

// enum sets *dst to the string at key, when it is one of allowed.
func (m *mapping) enum(key string, dst *string, allowed ...string) *yaml.Node {
	var s string
	n := m.str(key, &s)
	if n == nil || n.Kind != yaml.ScalarNode {
		return n
	}
	if !slices.Contains(allowed, s) {
		_, path := m.get(key)
		m.p.errorf(n, path, "unknown value %q (known: %s)", s, strings.Join(allowed, ", "))
		return n
	}
	*dst = s
	return n
}

// list returns the items of the list at key (aliases resolved). present
// is false when the key is absent or null; a value that is not a list is
// reported and gives present=true with no items.
func (m *mapping) list(key string) (items []*yaml.Node, path string, present bool) {
	n, path := m.get(key)
	if n == nil {
		return nil, path, false
	}
	return m.p.list(n, path), path, true
}

// list returns the items of a sequence node, reporting anything else.
func (p *parser) list(n *yaml.Node, path string) []*yaml.Node {
	if n.Kind != yaml.SequenceNode {
		hint := ""
		if n.Kind == yaml.ScalarNode {
			hint = fmt.Sprintf(" (write [%s] for a list of one)", strconv.Quote(n.Value))
		}
		p.errorf(n, path, "expected a list, got %s%s", describe(n), hint)
		return nil
	}
	items := make([]*yaml.Node, len(n.Content))
	for i, it := range n.Content {
		items[i] = deref(it)
	}
	return items
}

// strings returns the strings of the list at key, each with its node;
// items that are not scalars are reported and skipped.
func (m *mapping) strings(key string) (vals []string, nodes []*yaml.Node, path string, present bool) {
	items, path, present := m.list(key)
	for i, it := range items {
		ipath := indexPath(path, i)
		if it.Kind != yaml.ScalarNode || isNull(it) {
			m.p.errorf(it, ipath, "expected a string, got %s", describe(it))
			continue
		}
		vals = append(vals, it.Value)
		nodes = append(nodes, it)
	}
	return vals, nodes, path, present
}

// ---- files ----

// path expands ~ and resolves a relative path against the config file's
// directory.
func (p *parser) filePath(n *yaml.Node, path, s string) (string, bool) {
	if s == "~" || strings.HasPrefix(s, "~/") {
		home, err := os.UserHomeDir()
		if err != nil {
			p.errorf(n, path, "cannot expand ~ in %q: %v", s, err)
			return "", false
		}
		s = filepath.Join(home, s[1:])
	} else if strings.HasPrefix(s, "~") {
		p.errorf(n, path, "%q: only ~ and ~/ are expanded (~user is not supported)", s)
		return "", false
	}
	if !filepath.IsAbs(s) {
		s = filepath.Join(p.dir, s)
	}
	return s, true
}

// readableFile resolves s (see filePath) and checks that it is a regular
// file that can be opened for reading. The check never blocks: FIFOs and
// devices are rejected before any open.
func (p *parser) readableFile(n *yaml.Node, path, s string) (string, bool) {
	if s == "" {
		p.errorf(n, path, "empty file name")
		return "", false
	}
	full, ok := p.filePath(n, path, s)
	if !ok {
		return "", false
	}
	f, _, err := fsutil.Open(full)
	if err != nil {
		p.errorf(n, path, "file %s: %v", full, unwrapPathErr(err))
		return "", false
	}
	f.Close()
	return full, true
}

// checkKeyPair checks that cert and key (readable files) hold a PEM
// certificate chain and its private key.
func (p *parser) checkKeyPair(n *yaml.Node, path, cert, key string) {
	if _, err := fsutil.LoadKeyPair(cert, key); err != nil {
		p.errorf(n, path, "cert %s and key %s: %v", cert, key, strings.TrimPrefix(err.Error(), "tls: "))
	}
}

// checkCA checks that file (readable) holds at least one PEM certificate.
func (p *parser) checkCA(n *yaml.Node, path, file string) {
	data, _, err := fsutil.ReadFile(file, maxConfigSize)
	if err != nil {
		p.errorf(n, path, "file %s: %v", file, unwrapPathErr(err))
		return
	}
	if !x509.NewCertPool().AppendCertsFromPEM(data) {
		p.errorf(n, path, "file %s: no PEM certificate found", file)
	}
}

// unwrapPathErr drops the *PathError wrapper, whose path we print already.
func unwrapPathErr(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// optFile reads an optional file name at key: "" or absent means unset.
// When set it must be readable; the resolved path is stored in *dst.
func (m *mapping) optFile(key string, dst *string) *yaml.Node {
	var s string
	n := m.str(key, &s)
	if n == nil || s == "" {
		return n
	}
	_, path := m.get(key)
	if full, ok := m.p.readableFile(n, path, s); ok {
		*dst = full
	}
	return n
}
