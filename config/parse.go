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
	"github.com/dnsd/dnsd/internal/quote"
)

// maxConfigSize bounds dnsd.yaml (a config is kilobytes; this only keeps
// a wrong path from being read into memory whole).
const maxConfigSize = 64 << 20

// Load reads, parses and validates the config file at path and applies
// defaults. A file that cannot be read gives an error naming it; an invalid
// file gives an ErrorList with every problem found. A path that is not a
// regular file (a FIFO, a device, a directory) is an error found without
// reading it, so a start or a reload never blocks on it.
func Load(path string, kinds KindParsers) (*Config, error) {
	data, _, err := fsutil.ReadFile(path, maxConfigSize)
	if err != nil {
		return nil, fmt.Errorf("reading config %s: %w", path, unwrapPathErr(err))
	}
	return Parse(path, data, kinds)
}

// Parse is Load on bytes already read from file. file names the source in
// error positions, and relative paths inside the config (hosts files, TLS
// material, ...) are resolved against its directory. Parse checks that
// those files are readable but never touches the network. kinds are the
// source kinds zones may use.
func Parse(file string, data []byte, kinds KindParsers) (*Config, error) {
	p := &Parser{file: file, dir: filepath.Dir(file), kinds: kinds}
	cfg := p.parse(data)
	if len(p.errs) > 0 {
		p.errs.sort()
		return nil, p.errs
	}
	return cfg, nil
}

// Parser holds the state of one Parse call.
type Parser struct {
	file  string
	dir   string // directory of file, base of relative paths
	kinds KindParsers
	errs  ErrorList
	// secrets: the key, password, certificate and kubeconfig files that
	// dnsd.yaml names, cleaned and with links resolved (see SecretFile).
	secrets map[string]bool
}

func (p *Parser) parse(data []byte) *Config {
	if e := badChar(p.file, data); e != nil {
		p.errs = append(p.errs, e) // yaml.v3 would say so without a line
		return nil
	}
	root, err := p.decode(data)
	if err != nil {
		p.errs = append(p.errs, syntaxError(p.file, data, err, func(b []byte) error {
			_, err := p.decode(b)
			return err
		}))
		return nil
	}
	return p.config(root)
}

// decode reads exactly one YAML document. It returns a nil node for an
// empty document.
func (p *Parser) decode(data []byte) (root *yaml.Node, err error) {
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

// Errorf records a problem at node n.
func (p *Parser) Errorf(n *yaml.Node, path, format string, args ...any) {
	p.errs = append(p.errs, &Error{Pos: p.Pos(n), Path: path, Msg: fmt.Sprintf(format, args...)})
}

// ErrorAt records a problem at an explicit position.
func (p *Parser) ErrorAt(pos Pos, path, format string, args ...any) {
	p.errs = append(p.errs, &Error{Pos: pos, Path: path, Msg: fmt.Sprintf(format, args...)})
}

func (p *Parser) Pos(n *yaml.Node) Pos {
	if n == nil || n.Line == 0 {
		return Pos{File: p.file, Line: 1, Col: 1}
	}
	return Pos{File: p.file, Line: n.Line, Col: n.Column}
}

// ---- YAML paths ----

var plainKey = regexp.MustCompile(`^[a-z_][a-z0-9_]*$`)

// KeyPath appends a mapping key to a YAML path, quoting keys that are not
// plain identifiers: zones."example.internal".
func KeyPath(path, key string) string {
	if !plainKey.MatchString(key) {
		key = strconv.Quote(key)
	}
	if path == "" {
		return key
	}
	return path + "." + key
}

func IndexPath(path string, i int) string { return path + "[" + strconv.Itoa(i) + "]" }

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

// Describe names what a node is, for "expected X, got Y" messages.
func Describe(n *yaml.Node) string {
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
		return "the string " + quote.QS(n.Value)
	}
	return fmt.Sprintf("a %s value %s", n.Tag, quote.QS(n.Value))
}

// field is one key of a mapping with its value.
type field struct {
	key, val *yaml.Node
}

// Mapping is a checked YAML Mapping: every key known, none duplicated.
type Mapping struct {
	p      *Parser
	path   string
	node   *yaml.Node // the mapping (nil when it was null)
	fields map[string]field
}

// Mapping checks that n is a Mapping (null counts as empty) whose keys are
// all in known, reporting unknown, duplicate and non-string keys. It
// returns nil when n is not a Mapping at all.
func (p *Parser) Mapping(n *yaml.Node, path string, known ...string) *Mapping {
	m := &Mapping{p: p, path: path, fields: map[string]field{}}
	if isNull(n) {
		return m
	}
	n = deref(n)
	if n.Kind != yaml.MappingNode {
		p.Errorf(n, path, "expected a mapping, got %s", Describe(n))
		return nil
	}
	m.node = n
	for _, kv := range p.pairs(n, path) {
		k, v := kv[0], kv[1]
		key, ok := p.key(k, path)
		if !ok {
			continue
		}
		if prev, dup := m.fields[key]; dup {
			p.Errorf(k, KeyPath(path, key), "duplicate key (first at line %d)", prev.key.Line)
			continue
		}
		if !slices.Contains(known, key) {
			p.Errorf(k, KeyPath(path, key), "unknown key %s (known: %s)", quote.QS(key), strings.Join(sorted(known), ", "))
			continue
		}
		m.fields[key] = field{key: k, val: v}
	}
	return m
}

// pairs lists the key/value pairs of mapping n with YAML merge keys
// (<<: *anchor, <<: [*a, *b]) applied: the merged mappings' pairs where
// n does not write the key itself (nor an earlier merged mapping), in
// order. Every mapping of the file is read through it (Mapping, zones,
// a source item).
func (p *Parser) pairs(n *yaml.Node, path string) [][2]*yaml.Node {
	var out [][2]*yaml.Node
	own := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if k := n.Content[i]; !(k.Kind == yaml.ScalarNode && k.Tag == "!!merge") {
			own[k.Value] = true
		}
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode || k.Tag != "!!merge" {
			out = append(out, [2]*yaml.Node{k, v})
			continue
		}
		v = deref(v)
		srcs := []*yaml.Node{v}
		if v.Kind == yaml.SequenceNode {
			srcs = v.Content
		}
		for _, src := range srcs {
			if src = deref(src); src.Kind != yaml.MappingNode {
				p.Errorf(src, path, "<< merges a mapping or a list of mappings, got %s", Describe(src))
				continue
			}
			for _, kv := range p.pairs(src, path) {
				if !own[kv[0].Value] {
					own[kv[0].Value] = true
					out = append(out, kv)
				}
			}
		}
	}
	return out
}

// key returns a mapping key as a string; keys must be scalars.
func (p *Parser) key(k *yaml.Node, path string) (string, bool) {
	k = deref(k)
	if k.Kind != yaml.ScalarNode {
		p.Errorf(k, path, "a key must be a string, got %s", Describe(k))
		return "", false
	}
	return k.Value, true
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// Get returns the value node of key (nil when absent or null) and its path.
func (m *Mapping) Get(key string) (*yaml.Node, string) {
	path := KeyPath(m.path, key)
	f, ok := m.fields[key]
	if !ok || isNull(f.val) {
		return nil, path
	}
	return deref(f.val), path
}

// EmptyList reports whether key is absent, null or an empty list.
func (m *Mapping) EmptyList(key string) bool {
	n, _ := m.Get(key)
	return n == nil || (n.Kind == yaml.SequenceNode && len(n.Content) == 0)
}

// Has reports whether key was written (even with a null value).
func (m *Mapping) Has(key string) bool {
	_, ok := m.fields[key]
	return ok
}

// KeyNode returns the key node of key, or the mapping itself.
func (m *Mapping) KeyNode(key string) *yaml.Node {
	if f, ok := m.fields[key]; ok {
		return f.key
	}
	return m.node
}

// scalar checks that n is a scalar and returns its text.
func (p *Parser) scalar(n *yaml.Node, path string) (string, bool) {
	if n.Kind != yaml.ScalarNode {
		p.Errorf(n, path, "expected a string, got %s", Describe(n))
		return "", false
	}
	return n.Value, true
}

// Str sets *dst to the string at key, when present.
func (m *Mapping) Str(key string, dst *string) *yaml.Node {
	n, path := m.Get(key)
	if n == nil {
		return nil
	}
	if s, ok := m.p.scalar(n, path); ok {
		*dst = s
	}
	return n
}

// Bool sets *dst to the Bool at key, when present.
func (m *Mapping) Bool(key string, dst *bool) *yaml.Node {
	n, path := m.Get(key)
	if n == nil {
		return nil
	}
	if n.Kind != yaml.ScalarNode || n.Tag != "!!bool" {
		m.p.Errorf(n, path, "expected true or false, got %s", Describe(n))
		return n
	}
	var b bool
	if err := n.Decode(&b); err != nil {
		m.p.Errorf(n, path, "expected true or false, got %s", Describe(n))
		return n
	}
	*dst = b
	return n
}

// Int sets *dst to the Int at key, when present and in [lo, hi].
func (m *Mapping) Int(key string, dst *int, lo, hi int) *yaml.Node {
	n, path := m.Get(key)
	if n == nil {
		return nil
	}
	var v int64
	if n.Kind != yaml.ScalarNode || n.Tag != "!!int" || n.Decode(&v) != nil {
		m.p.Errorf(n, path, "expected an integer, got %s", Describe(n))
		return n
	}
	if v < int64(lo) || v > int64(hi) {
		m.p.Errorf(n, path, "%d is out of range: must be %s", v, rangeText(lo, hi))
		return n
	}
	*dst = int(v)
	return n
}

func rangeText(lo, hi int) string {
	switch {
	case hi == MaxInt:
		return fmt.Sprintf(">= %d", lo)
	default:
		return fmt.Sprintf("between %d and %d", lo, hi)
	}
}

const MaxInt = int(^uint(0) >> 1)

// DurLimit constrains a duration: Min (inclusive), Max (0 = none) and
// whether it must be a whole number of seconds (DNS TTLs).
type DurLimit struct {
	Min, Max time.Duration // zero: no lower bound (but 0), no upper bound
	Seconds  bool          // false: any precision
}

// Positive admits durations above zero.
var Positive = DurLimit{Min: time.Nanosecond}

// Duration sets *dst to the Go Duration at key, when present and valid.
func (m *Mapping) Duration(key string, dst *time.Duration, lim DurLimit) *yaml.Node {
	n, path := m.Get(key)
	if n == nil {
		return nil
	}
	if n.Kind != yaml.ScalarNode {
		m.p.Errorf(n, path, "expected a duration such as 500ms, 5s or 1h, got %s", Describe(n))
		return n
	}
	d, err := time.ParseDuration(n.Value)
	if err != nil {
		m.p.Errorf(n, path, "bad duration %s: %v (%s)", quote.QS(n.Value), strings.TrimPrefix(err.Error(), "time: "), durationHint(n.Value))
		return n
	}
	switch {
	case d < 0:
		m.p.Errorf(n, path, "duration %s must not be negative", n.Value)
	case d < lim.Min && lim.Min == time.Nanosecond:
		m.p.Errorf(n, path, "duration must be greater than 0")
	case d < lim.Min:
		m.p.Errorf(n, path, "duration %s is too short: must be at least %s", n.Value, lim.Min)
	case lim.Max > 0 && d > lim.Max:
		m.p.Errorf(n, path, "duration %s is too long: must be at most %s", n.Value, lim.Max)
	case lim.Seconds && d%time.Second != 0:
		m.p.Errorf(n, path, "duration %s must be a whole number of seconds (it is a DNS TTL)", n.Value)
	default:
		*dst = d
	}
	return n
}

// Enum sets *dst to the string at key, when it is one of allowed.
func (m *Mapping) Enum(key string, dst *string, allowed ...string) *yaml.Node {
	var s string
	n := m.Str(key, &s)
	if n == nil || n.Kind != yaml.ScalarNode {
		return n
	}
	if !slices.Contains(allowed, s) {
		_, path := m.Get(key)
		m.p.Errorf(n, path, "unknown value %s (known: %s)", quote.QS(s), strings.Join(allowed, ", "))
		return n
	}
	*dst = s
	return n
}

// List returns the items of the List at key (aliases resolved). present
// is false when the key is absent or null; a value that is not a List is
// reported and gives present=true with no items.
func (m *Mapping) List(key string) (items []*yaml.Node, path string, present bool) {
	n, path := m.Get(key)
	if n == nil {
		return nil, path, false
	}
	return m.p.List(n, path), path, true
}

// List returns the items of a sequence node, reporting anything else.
func (p *Parser) List(n *yaml.Node, path string) []*yaml.Node {
	if n.Kind != yaml.SequenceNode {
		hint := ""
		if n.Kind == yaml.ScalarNode {
			hint = fmt.Sprintf(" (write [%s] for a list of one)", strconv.Quote(n.Value))
		}
		p.Errorf(n, path, "expected a list, got %s%s", Describe(n), hint)
		return nil
	}
	items := make([]*yaml.Node, len(n.Content))
	for i, it := range n.Content {
		items[i] = deref(it)
	}
	return items
}

// Strings returns the Strings of the list at key, each with its node;
// items that are not scalars are reported and skipped.
func (m *Mapping) Strings(key string) (vals []string, nodes []*yaml.Node, path string, present bool) {
	items, path, present := m.List(key)
	for i, it := range items {
		ipath := IndexPath(path, i)
		if it.Kind != yaml.ScalarNode || isNull(it) {
			m.p.Errorf(it, ipath, "expected a string, got %s", Describe(it))
			continue
		}
		vals = append(vals, it.Value)
		nodes = append(nodes, it)
	}
	return vals, nodes, path, present
}

// Count is how many strings Strings(key) returns, without reporting
// anything.
func (m *Mapping) Count(key string) int {
	n, _ := m.Get(key)
	if n == nil || n.Kind != yaml.SequenceNode {
		return 0
	}
	count := 0
	for _, it := range n.Content {
		if it = deref(it); it.Kind == yaml.ScalarNode && !isNull(it) {
			count++
		}
	}
	return count
}

// ---- files ----

// path expands ~ and resolves a relative path against the config file's
// directory.
func (p *Parser) filePath(n *yaml.Node, path, s string) (string, bool) {
	if s == "~" || strings.HasPrefix(s, "~/") {
		home, err := os.UserHomeDir()
		if err != nil {
			p.Errorf(n, path, "cannot expand ~ in %s: %v", quote.QS(s), err)
			return "", false
		}
		s = filepath.Join(home, s[1:])
	} else if strings.HasPrefix(s, "~") {
		p.Errorf(n, path, "%s: only ~ and ~/ are expanded (~user is not supported)", quote.QS(s))
		return "", false
	}
	if !filepath.IsAbs(s) {
		s = filepath.Join(p.dir, s)
	}
	return s, true
}

// ReadableFile resolves s (see filePath) and checks that it is a regular
// file that can be opened for reading. The check never blocks: FIFOs and
// devices are rejected before any open.
func (p *Parser) ReadableFile(n *yaml.Node, path, s string) (string, bool) {
	if s == "" {
		p.Errorf(n, path, "empty file name")
		return "", false
	}
	full, ok := p.filePath(n, path, s)
	if !ok {
		return "", false
	}
	f, _, err := fsutil.Open(full)
	if err != nil {
		p.Errorf(n, path, "file %s: %v", shownPath(full), unwrapPathErr(err))
		return "", false
	}
	f.Close()
	return full, true
}

// CheckKeyPair checks that cert and key (readable files) hold a PEM
// certificate chain and its private key.
func (p *Parser) CheckKeyPair(n *yaml.Node, path, cert, key string) {
	if _, err := fsutil.LoadKeyPair(cert, key); err != nil {
		p.Errorf(n, path, "cert %s and key %s: %v", cert, key, strings.TrimPrefix(err.Error(), "tls: "))
	}
}

// CheckCA checks that file (readable) holds at least one PEM certificate.
func (p *Parser) CheckCA(n *yaml.Node, path, file string) {
	data, _, err := fsutil.ReadFile(file, maxConfigSize)
	if err != nil {
		p.Errorf(n, path, "file %s: %v", file, unwrapPathErr(err))
		return
	}
	if !x509.NewCertPool().AppendCertsFromPEM(data) {
		p.Errorf(n, path, "file %s: no PEM certificate found", file)
	}
}

// unwrapPathErr drops the *PathError wrapper, whose path we print already.
// shownPath is a resolved file name as an error shows it: absolute, so
// that a relative name in dnsd.yaml (resolved against the file's
// directory, not the working directory) says where it was looked for.
func shownPath(full string) string {
	if abs, err := filepath.Abs(full); err == nil {
		return abs
	}
	return full
}

// durationDays matches a duration written with days or weeks, units Go
// durations do not have: "1d", "2w", "1d12h".
var durationDays = regexp.MustCompile(`^(?:(\d+)w)?(?:(\d+)d)?((?:\d+(?:\.\d+)?(?:h|m|s|ms|us|µs|ns))*)$`)

// durationHint is what a bad duration's error suggests: for days and
// weeks the hours to write instead ("write 24h"), else Go's syntax.
func durationHint(v string) string {
	if m := durationDays.FindStringSubmatch(v); m != nil && (m[1] != "" || m[2] != "") {
		w, _ := strconv.Atoi(m[1])
		d, _ := strconv.Atoi(m[2])
		total := time.Duration(w*7+d) * 24 * time.Hour
		if m[3] != "" {
			rest, _ := time.ParseDuration(m[3])
			total += rest
		}
		// 36h0m0s -> 36h, 24h30m0s -> 24h30m
		shown := strings.TrimSuffix(strings.TrimSuffix(total.String(), "0s"), "0m")
		return "durations have no days or weeks: write " + shown
	}
	return "use Go syntax: 500ms, 5s, 1h"
}

func unwrapPathErr(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// OptFile reads an optional file name at key: "" or absent means unset.
// When set it must be readable; the resolved path is stored in *dst.
func (m *Mapping) OptFile(key string, dst *string) *yaml.Node {
	var s string
	n := m.Str(key, &s)
	if n == nil || s == "" {
		return n
	}
	_, path := m.Get(key)
	if full, ok := m.p.ReadableFile(n, path, s); ok {
		*dst = full
	}
	return n
}
