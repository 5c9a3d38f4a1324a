package hosts

import (
	"net/netip"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/dnsd/dnsd/config"
	"github.com/dnsd/dnsd/internal/quote"
	"github.com/dnsd/dnsd/pipeline"
)

// Config is a hosts source's settings (its block in dnsd.yaml).
type Config struct {
	// Files are readable regular files, ~ expanded and relative paths
	// resolved against the config file's directory; default none.
	Files []string `dnsd:"files" doc:"hosts files, watched for changes." item:"A hosts file (relative to dnsd.yaml's directory)."`
	// Entries are the inline entries; default none.
	Entries []Entry `dnsd:"entries" doc:"Inline entries \"IP name [name...]\"; a name without a dot gets the key's first zone appended; a first label \"*\" makes a wildcard (*.apps)."`
	// TTL of the answers: default 1h, 0..7d, whole seconds.
	TTL time.Duration `dnsd:"ttl" default:"1h" dur:"ttl" doc:"TTL of the answers (whole seconds)."`
	// Reverse: answer PTR queries; default true.
	Reverse bool `dnsd:"reverse" default:"true" doc:"Answer PTR queries for these addresses."`
}

// describe describes the hosts block: files, entries, ttl, reverse.
func describe() *config.Settings {
	return config.NewSettings(config.Description[Config]{
		Schema: config.Schema{
			Description: "/etc/hosts-format files and inline entries; needs files, entries or both.", Type: "object",
			AnyOf: []*config.Schema{
				{Required: []string{"files"}, Properties: map[string]*config.Schema{"files": {Type: "array", MinItems: config.Ptr(1)}}},
				{Required: []string{"entries"}, Properties: map[string]*config.Schema{"entries": {Type: "array", MinItems: config.Ptr(1)}}},
			},
		},
		Items:  map[string]*config.Schema{"entries": config.PatternSchema("IP name [name...]", `^\s*[0-9A-Fa-f:.]+\s+\S`)},
		Fields: map[string]func(*config.Block, *Config){"files": parseFiles, "entries": parseEntries},
		Check: func(b *config.Block, _ *Config) {
			if b.EmptyList("files") && b.EmptyList("entries") {
				b.Errorf(nil, b.Path, "hosts needs files, entries or both")
			}
		},
	})
}

// Entry is one inline entry, with names already completed (a name without
// a dot gets the zone key's first zone appended) and lower-cased.
type Entry struct {
	Line  string     // as written; never empty
	Addr  netip.Addr // always set
	Names []string   // lower-case FQDNs; never empty
	Pos   config.Pos // where the entry is written; always set
}

// parseFiles reads files: readable, not a secret named elsewhere, no
// duplicates.
func parseFiles(b *config.Block, h *Config) {
	vals, nodes, fpath, _ := b.Strings("files")
	seen := map[string]int{}
	for i, s := range vals {
		ipath := config.IndexPath(fpath, i)
		full, ok := b.Parser.ReadableFile(nodes[i], ipath, s)
		if !ok {
			continue
		}
		if b.Parser.SecretFile(full) {
			b.Errorf(nodes[i], ipath, "file %s is a key, password or certificate file named elsewhere in the config, not a hosts file", full)
			continue
		}
		if first, dup := seen[full]; dup {
			b.Errorf(nodes[i], ipath, "duplicate file %s (already at line %d)", full, first)
			continue
		}
		seen[full] = nodes[i].Line
		h.Files = append(h.Files, full)
	}
}

// parseEntries reads entries (see parseEntry).
func parseEntries(b *config.Block, h *Config) {
	evals, enodes, epath, _ := b.Strings("entries")
	for i, s := range evals {
		if e, ok := parseEntry(b, enodes[i], config.IndexPath(epath, i), s); ok {
			h.Entries = append(h.Entries, e)
		}
	}
}

// parseEntry parses an inline hosts entry "IP name [name...] [# comment]".
// A name without a dot gets the key's first zone appended (its first
// forward zone when the key begins with reverse ones, "10.0.0.0/8
// example.internal": a host name is never meant under in-addr.arpa);
// names outside the key's zones are ignored by the source. A name whose
// first label is "*" is a wildcard ("*" alone: a wildcard at that zone).
func parseEntry(b *config.Block, n *yaml.Node, path, s string) (Entry, bool) {
	z := b.Zone
	e := Entry{Line: s, Pos: b.Parser.Pos(n)}
	line := s
	if i := strings.IndexByte(line, '#'); i >= 0 {
		line = line[:i]
	}
	f := strings.Fields(line)
	if len(f) < 2 {
		b.Errorf(n, path, "bad entry %s: expected \"IP name [name...]\"", quote.QS(s))
		return e, false
	}
	addr, err := netip.ParseAddr(f[0])
	if err != nil || addr.Zone() != "" {
		b.Errorf(n, path, "bad entry %s: %s is not an IP address", quote.QS(s), quote.QS(f[0]))
		return e, false
	}
	e.Addr = addr.Unmap()
	ok := true
	for _, name := range f[1:] {
		full := name
		if !strings.Contains(name, ".") && len(z.Names) > 0 {
			first := hostZone(z.Names)
			full = name + "." + first
			if first == "." {
				full = name + "."
			}
		}
		norm, err := config.NormalizeWildcardName(full)
		if err != nil {
			b.Errorf(n, path, "bad entry %s: bad name: %v", quote.QS(s), err)
			ok = false
			continue
		}
		e.Names = append(e.Names, norm)
	}
	return e, ok
}

// hostZone is the zone a dotless entry name goes into: the first of
// zones that is not a reverse zone, else the first.
func hostZone(zones []string) string {
	for _, z := range zones {
		if !pipeline.Reverse(z) {
			return z
		}
	}
	return zones[0]
}
