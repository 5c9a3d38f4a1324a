package hosts

import (
	"context"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/dnsd/dnsd/config"
	"github.com/dnsd/dnsd/pipeline"
	"github.com/dnsd/dnsd/sources/kind"
)

// Kind is the hosts source kind. Its backends read and watch files; one
// read of the same files (in any order) serves every ttl: the registry
// entry of a source is a View of that shared backend for the source's
// ttl, so a reload that changes only ttl reads no file.
type Kind struct {
	settings *config.Settings
	files    kind.Shared[*Backend]
}

var _ kind.Kind = (*Kind)(nil)

// NewKind returns the hosts kind.
func NewKind() *Kind { return &Kind{settings: describe()} }

// Name implements config.KindParser.
func (*Kind) Name() string { return "hosts" }

// DefaultFallthrough implements config.KindParser.
func (*Kind) DefaultFallthrough() bool { return true }

// Settings implements config.KindParser.
func (k *Kind) Settings() *config.Settings { return k.settings }

// Build implements kind.Kind.
func (k *Kind) Build(_ context.Context, env *kind.Env, z config.Zone, settings any) (pipeline.Source, error) {
	h := settings.(*Config)
	if n, example := entriesOutside(h.Entries, z.Names); n > 0 {
		env.Logger.Warn("hosts entries' names outside the zone are ignored", "zone", z.Key, "names", n, "example", example)
	}
	if len(h.Files) == 0 {
		return NewSource(nil, h.Entries, h.TTL, h.Reverse, env.Serials).Within(z.Names), nil
	}
	files := filesKey(h.Files)
	v, fresh, err := env.Acquire(files+" ttl="+h.TTL.String(), func() (any, io.Closer, error) {
		b, release, opened, err := k.files.Acquire(files, func() (*Backend, error) {
			return OpenBackend(h.Files, h.TTL, Options{Logger: env.Logger, Serials: env.Serials, Bulk: env.Bulk, Paced: env.Serving})
		})
		if err != nil {
			return nil, nil, err
		}
		view := b.View(h.TTL)
		return view, &kind.View[*View]{Value: view, Release: release, Opened: opened}, nil
	})
	if err != nil {
		return nil, err
	}
	view := v.(*View)
	if fresh {
		if n, example := view.Backend().Outside(z.Names, env.Serving); n > 0 {
			env.Logger.Info("hosts names outside the zone are ignored", "zone", z.Key, "names", n, "example", example, "files", h.Files)
		}
	}
	return NewViewSource(view, h.Entries, h.TTL, h.Reverse, env.Serials).Within(z.Names), nil
}

// entriesOutside counts the names of inline entries outside zones (which
// the source ignores, as it does such names in its files), with one of
// them.
func entriesOutside(entries []Entry, zones []string) (n int, example string) {
	for _, e := range entries {
		for _, name := range e.Names {
			if len(zones) > 0 && !inZones(name, zones) {
				if n == 0 {
					example = name
				}
				n++
			}
		}
	}
	return n, example
}

// filesKey identifies a hosts backend: the same files, in any order. It
// is also the backend's name in metrics (dnsd_source_synced) and logs, so
// it is printable: the paths joined by commas, a path with a comma, a
// quote or an unprintable character quoted, so that no two sets of files
// have the same key.
func filesKey(files []string) string {
	files = slices.Clone(files)
	slices.Sort(files)
	var b strings.Builder
	b.WriteString("files=")
	for i, f := range files {
		if i > 0 {
			b.WriteByte(',')
		}
		if strings.ContainsAny(f, ",\"") || strconv.Quote(f) != `"`+f+`"` {
			f = strconv.Quote(f)
		}
		b.WriteString(f)
	}
	return b.String()
}

// Readers reports how many backends read and watch hosts files (one per
// set of files, whatever the ttls of the sources over it).
func (k *Kind) Readers() int { return k.files.Len() }
