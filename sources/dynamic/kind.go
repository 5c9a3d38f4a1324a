package dynamic

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/dnsd/dnsd/config"
	"github.com/dnsd/dnsd/pipeline"
	"github.com/dnsd/dnsd/sources/kind"
)

// Kind is the dynamic source kind. Its backends are stores, one per zone
// key (its zones, in any order), kept across reloads: the registry entry
// is the store's path, whatever the source's settings.
type Kind struct {
	settings *config.Settings
}

var _ kind.Kind = (*Kind)(nil)

// NewKind returns the dynamic kind.
func NewKind() *Kind { return &Kind{settings: describe()} }

// Name implements config.KindParser.
func (*Kind) Name() string { return "dynamic" }

// DefaultFallthrough implements config.KindParser: true, a dynamic source
// usually comes first, before the zone's static data.
func (*Kind) DefaultFallthrough() bool { return true }

// Settings implements config.KindParser.
func (k *Kind) Settings() *config.Settings { return k.settings }

// Writable reports that dynamic updates write to every dynamic source.
func (*Kind) Writable(any) bool { return true }

// Build implements kind.Kind. A dry run (dnsd check) does not open the
// store: a running dnsd holds its lock. It returns an empty source.
func (*Kind) Build(_ context.Context, env *kind.Env, z config.Zone, settings any) (pipeline.Source, error) {
	c := settings.(*Config)
	path := StorePath(env.Config.StateDir, z.Names)
	if env.DryRun {
		return &Source{b: dryBackend(path, z.Names), ttl: pipeline.TTLSeconds(c.TTL), maxRecords: c.MaxRecords}, nil
	}
	v, _, err := env.Acquire(fmt.Sprintf("store=%q", path), func() (any, io.Closer, error) {
		b, err := Open(path, z.Names, Options{Logger: env.Logger, Serials: env.Serials, Bulk: env.Bulk})
		if err != nil {
			return nil, nil, err
		}
		return b, b, nil
	})
	if err != nil {
		return nil, err
	}
	b := v.(*Backend)
	if n := b.snapshot().records; n > c.MaxRecords {
		env.Logger.Warn("dynamic store holds more records than max_records: updates that add records are refused", "zone", z.Key, "records", n, "max_records", c.MaxRecords)
	}
	return NewSource(b, c), nil
}

// dryBackend is the backend of a dry run's source: empty, never asked.
func dryBackend(path string, zones []string) *Backend {
	b := &Backend{path: path, zones: zones, lock: make(chan struct{}, 1)}
	b.cur.Store(&index{})
	return b
}

// Orphans returns the stores under cfg's state_dir of zone keys that have
// no dynamic source in cfg (in any view): dnsd never deletes them, and
// `dnsd check` names them. A state_dir without stores has none.
func Orphans(cfg *config.Config) ([]string, error) {
	dir := filepath.Join(cfg.StateDir, "dynamic")
	ents, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing dynamic stores: %w", err)
	}
	listed := map[string]bool{}
	add := func(zs []config.Zone) {
		for _, z := range zs {
			for _, s := range z.Sources {
				if s.Kind == "dynamic" {
					listed[StoreName(z.Names)] = true
				}
			}
		}
	}
	add(cfg.Zones)
	for _, v := range cfg.Views {
		add(v.Zones)
	}
	var out []string
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".db") && !e.IsDir() && !listed[e.Name()] {
			out = append(out, filepath.Join(dir, e.Name()))
		}
	}
	return out, nil
}
