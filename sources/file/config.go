package file

import (
	"time"

	"gopkg.in/yaml.v3"

	"github.com/dnsd/dnsd/config"
)

// DefaultTTL is the TTL of records that name none, when the file has no
// $TTL.
const DefaultTTL = time.Hour

// Config is a file source's settings (its block in dnsd.yaml).
type Config struct {
	// Path is the zone file (resolved, readable); default "": inline
	// records only.
	Path string `dnsd:"path,file" doc:"Zone file ($ORIGIN defaults to the zone, $TTL, $INCLUDE relative to the file), watched for changes."`
	// Records are inline records in zone-file syntax, relative to
	// Origin; default none.
	Records []Record `dnsd:"records" doc:"Inline records in zone-file syntax, relative to the key's first zone (\"www 300 IN CNAME web\")." item:"A record." pattern:"\\S"`
	// Origin is the zone key's first zone: the file's $ORIGIN until it
	// sets one, and the origin of inline records. "" only when the zone key has no zone (always set otherwise).
	Origin string
	// Zones are the zone key's zones; records outside them are ignored. Never empty.
	Zones []string

	// secrets are the files the config names as key, password,
	// certificate or kubeconfig files.
	secrets config.Secrets

	// parsed is the zone as the config check read it, so that a backend
	// opened by the build right after starts from it instead of parsing
	// it again. The build lets go of it (takeParsed) either way, so a
	// config does not keep a zone alive beside its backend's.
	parsed *zone
}

// takeParsed returns the zone the config check read, once.
func (c *Config) takeParsed() *zone {
	z := c.parsed
	c.parsed = nil
	return z
}

// Record is one inline record as written.
type Record struct {
	Text string     // as written; never empty
	Pos  config.Pos // where the record is written; always set
}

// describe describes the file block: path, records.
func (k *Kind) describe() *config.Settings {
	return config.NewSettings(config.Description[Config]{
		Schema: config.Schema{
			Description: "An RFC 1035 zone file and/or inline records; needs path, records or both.", Type: "object",
			AnyOf: []*config.Schema{
				{Required: []string{"path"}, Properties: map[string]*config.Schema{"path": {Type: "string", Pattern: "."}}},
				{Required: []string{"records"}, Properties: map[string]*config.Schema{"records": {Type: "array", MinItems: config.Ptr(1)}}},
			},
		},
		Fields: map[string]func(*config.Block, *Config){"records": parseRecords},
		Check:  k.check,
	})
}

// parseRecords reads records, each with its position.
func parseRecords(b *config.Block, c *Config) {
	vals, nodes, _, _ := b.Strings("records")
	for i, s := range vals {
		c.Records = append(c.Records, Record{Text: s, Pos: b.Parser.Pos(nodes[i])})
	}
}

// check parses the zone once, so a zone file that does not parse is a
// config error with its FILE:LINE (paced when the config is loaded while
// another serves: see PaceParses).
func (k *Kind) check(b *config.Block, c *Config) {
	c.Zones, c.secrets = b.Zone.Names, b.Parser.SecretFiles()
	if len(b.Zone.Names) > 0 {
		c.Origin = b.Zone.Names[0]
	}
	var path string // as written
	if n, _ := b.Get("path"); n != nil && n.Kind == yaml.ScalarNode {
		path = n.Value
	}
	if b.EmptyList("records") && path == "" {
		b.Errorf(nil, b.Path, "file needs path, records or both")
		return
	}
	if c.Origin == "" || (path != "" && c.Path == "") {
		return // errors reported already
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
}
