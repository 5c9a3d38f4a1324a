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
	settings *config.Settings
	// parses: how the config check gives way on one processor when the
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
func NewKind() *Kind {
	k := &Kind{}
	k.settings = k.describe()
	return k
}

// Name implements config.KindParser.
func (*Kind) Name() string { return "file" }

// DefaultFallthrough implements config.KindParser.
func (*Kind) DefaultFallthrough() bool { return true }

// Settings implements config.KindParser.
func (k *Kind) Settings() *config.Settings { return k.settings }

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
	v, _, err := env.Acquire(backendKey(c), func() (any, io.Closer, error) {
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

// backendKey identifies c's backend: the zone file, the zones and the
// inline records. The inline records enter it as their count and a hash
// in a last " inline=" part, which the registry leaves out of the
// backend's name in logs and metrics (sources.Name): what is left, the
// path and the zones, is what an operator looks for.
func backendKey(c *Config) string {
	key := fmt.Sprintf("path=%q zones=%q", c.Path, strings.Join(c.Zones, " "))
	if len(c.Records) == 0 {
		return key
	}
	h := fnv.New64a()
	for _, r := range c.Records {
		h.Write([]byte(r.Text))
		h.Write([]byte{0})
	}
	return key + fmt.Sprintf(" inline=%d/%x", len(c.Records), h.Sum64())
}
