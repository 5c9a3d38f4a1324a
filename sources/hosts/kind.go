package hosts

import (
	"context"
	"io"
	"net/netip"
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
	in, inExample, inServed := entriesOutside(h.Entries, z.Names, h.Reverse && reverseOnly(z.Names))
	if len(h.Files) == 0 {
		if !inServed {
			allOutside(env, z, h, in, inExample)
		} else if in > 0 {
			env.Logger.Warn("hosts entries' names outside the zone are ignored", "zone", z.Key, "names", in, "example", inExample)
		}
		return NewSource(nil, h.Entries, h.TTL, h.Reverse, env.Serials).Within(z.Names), nil
	}
	files := filesKey(h.Files)
	v, _, err := env.Acquire(files+" ttl="+h.TTL.String(), func() (any, io.Closer, error) {
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
	warned := false
	if b := view.Backend(); b.firstCheck(z.Names, h.Reverse) {
		// Counted once per backend and zone key, not at every reload.
		n, example, served := b.Outside(z.Names, h.Reverse && reverseOnly(z.Names), env.Serving)
		switch {
		case !served && !inServed && n+in > 0:
			if n == 0 || in > 0 && inExample < example {
				example = inExample
			}
			allOutside(env, z, h, n+in, example)
			warned = true
		case n > 0:
			env.Logger.Info("hosts names outside the zone are ignored", "zone", z.Key, "names", n, "example", example, "files", h.Files)
		}
	}
	if in > 0 && !warned {
		env.Logger.Warn("hosts entries' names outside the zone are ignored", "zone", z.Key, "names", in, "example", inExample)
	}
	return NewViewSource(view, h.Entries, h.TTL, h.Reverse, env.Serials).Within(z.Names), nil
}

// allOutside warns that none of a hosts source's names is served: n
// names, in none of the zone key's forward zones, none with an address in
// one of its reverse zones (or reverse is off).
func allOutside(env *kind.Env, z config.Zone, h *Config, n int, example string) {
	args := []any{"zone", z.Key, "names", n, "example", example}
	if len(h.Files) > 0 {
		args = append(args, "files", strings.Join(h.Files, ","))
	}
	why := "no name is in the zone key's zones and no address in its reverse zones"
	if !h.Reverse {
		why = "no name is in the zone key's zones (reverse is off)"
	}
	env.Warn("hosts entries are all outside the zone key, nothing of them is served: "+why, args...)
}

// entriesOutside counts the names of inline entries that the source never
// serves (as Backend.Outside counts those of its files), with one of
// them, and reports whether it serves any entry.
func entriesOutside(entries []Entry, zones []string, reverse bool) (n int, example string, served bool) {
	var prefixes []netip.Prefix
	if reverse {
		prefixes = reversePrefixes(zones)
	}
	for _, e := range entries {
		ptr := containsAddr(prefixes, e.Addr)
		for _, name := range e.Names {
			if len(zones) == 0 || inZones(name, zones) || ptr && !strings.HasPrefix(name, "*.") && name != "*." {
				served = true
				continue
			}
			if n == 0 {
				example = name
			}
			n++
		}
	}
	return n, example, served
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
