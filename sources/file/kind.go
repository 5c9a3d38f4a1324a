package file

import (
	"context"
	"fmt"
	"hash/fnv"
	"io"
	"strings"

	"github.com/dnsd/dnsd/config"
	"github.com/dnsd/dnsd/internal/pacing"
	"github.com/dnsd/dnsd/pipeline"
	"github.com/dnsd/dnsd/sources/kind"
)

// Kind is the file source kind.
type Kind struct {
	// parses: how ParseSettings gives way on one processor when the
	// config is loaded while another serves (nil: it does not).
	parses *pacing.Pacing
}

var (
	_ kind.Kind       = (*Kind)(nil)
	_ kind.ParsePacer = (*Kind)(nil)
)

// PaceParses implements kind.ParsePacer: the zone files this kind parses
// give way with pace (see package pacing).
func (k *Kind) PaceParses(pace *pacing.Pacing) { k.parses = pace }

// NewKind returns the file kind.
func NewKind() *Kind { return &Kind{} }

// Name implements config.SourceKind.
func (*Kind) Name() string { return "file" }

// DefaultFallthrough implements config.SourceKind.
func (*Kind) DefaultFallthrough() bool { return true }

// Keys implements config.SourceKind.
func (*Kind) Keys() []string { return []string{"path", "records"} }

// Schema implements config.SourceKind.
func (*Kind) Schema() *config.Schema {
	return &config.Schema{
		Description: "An RFC 1035 zone file and/or inline records; needs path, records or both.", Type: "object", AdditionalProperties: false,
		AnyOf: []*config.Schema{
			{Required: []string{"path"}, Properties: map[string]*config.Schema{"path": {Type: "string", Pattern: "."}}},
			{Required: []string{"records"}, Properties: map[string]*config.Schema{"records": {Type: "array", MinItems: config.Ptr(1)}}},
		},
		Properties: map[string]*config.Schema{
			"path":    config.FileSchema("Zone file ($ORIGIN defaults to the zone, $TTL, $INCLUDE relative to the file), watched for changes."),
			"records": config.ListSchema("Inline records in zone-file syntax, relative to the key's first zone (\"www 300 IN CNAME web\").", config.PatternSchema("A record.", `\S`)),
		},
	}
}

// Build implements kind.Kind. One backend per zone file, records and
// zones, kept across reloads that do not change them.
func (*Kind) Build(_ context.Context, env *kind.Env, _ config.Zone, settings any) (pipeline.Source, error) {
	c := settings.(*Config)
	if env.DryRun {
		b, err := Open(c, false, env.Logger, env.Serials, nil)
		if err != nil {
			return nil, err
		}
		return NewSource(b), nil
	}
	h := fnv.New64a()
	for _, r := range c.Records {
		h.Write([]byte(r.Text))
		h.Write([]byte{0})
	}
	key := fmt.Sprintf("path=%q zones=%q records=%d/%x", c.Path, strings.Join(c.Zones, " "), len(c.Records), h.Sum64())
	v, _, err := env.Acquire(key, func() (any, io.Closer, error) {
		b, err := Open(c, true, env.Logger, env.Serials, env.Bulk)
		if err != nil {
			return nil, nil, err
		}
		return b, b, nil
	})
	c.takeParsed() // a running backend was kept: the parse only checked the file
	if err != nil {
		return nil, err
	}
	return NewSource(v.(*Backend)), nil
}
