package file

import (
	"time"

	"github.com/dnsd/dnsd/config"
)

// DefaultTTL is the TTL of records that name none, when the file has no
// $TTL.
const DefaultTTL = time.Hour

// Config is a file source's settings (its block in dnsd.yaml).
type Config struct {
	// Path is the zone file (resolved, readable); "" = inline records only.
	Path string
	// Records are inline records in zone-file syntax, relative to Origin.
	Records []Record
	// Origin is the zone key's first zone: the file's $ORIGIN until it
	// sets one, and the origin of inline records.
	Origin string
	// Zones are the zone key's zones; records outside them are ignored.
	Zones []string

	// secrets are the files the config names as key, password,
	// certificate or kubeconfig files.
	secrets config.Secrets

	// parsed is the zone as ParseSettings read it, so that a backend
	// opened by the build right after starts from it instead of parsing
	// it again. The build lets go of it (takeParsed) either way, so a
	// config does not keep a zone alive beside its backend's.
	parsed *zone
}

// takeParsed returns the zone ParseSettings read, once.
func (c *Config) takeParsed() *zone {
	z := c.parsed
	c.parsed = nil
	return z
}

// Record is one inline record as written.
type Record struct {
	Text string
	Pos  config.Pos
}

// ParseSettings reads a file block and parses the zone once, so a zone
// file that does not parse is a config error with its FILE:LINE (paced
// when the config is loaded while another serves: see PaceParses).
func (k *Kind) ParseSettings(b *config.SourceBlock) any {
	c := &Config{Zones: b.Zone.Names, secrets: b.Parser.SecretFiles()}
	if len(b.Zone.Names) > 0 {
		c.Origin = b.Zone.Names[0]
	}
	m := b.Mapping
	var path string
	if n := m.Str("path", &path); n != nil && path != "" { // "" is unset, as for every file key
		if full, ok := b.Parser.ReadableFile(n, config.KeyPath(b.Path, "path"), path); ok {
			c.Path = full
		}
	}
	vals, nodes, _, _ := m.Strings("records")
	for i, s := range vals {
		c.Records = append(c.Records, Record{Text: s, Pos: b.Parser.Pos(nodes[i])})
	}
	if m.EmptyList("records") && path == "" {
		b.Errorf(nil, b.Path, "file needs path, records or both")
		return c
	}
	if c.Origin == "" || (path != "" && c.Path == "") {
		return c // errors reported already
	}
	z, err := load(c, k.parses)
	if err != nil {
		var pe *parseError
		if asParseError(err, &pe) {
			b.Parser.ErrorAt(pe.pos, b.Path, "%s", pe.msg)
		} else {
			b.Errorf(nil, b.Path, "%v", err)
		}
	}
	c.parsed = z
	return c
}
