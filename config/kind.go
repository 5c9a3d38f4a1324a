package config

import (
	"slices"
	"time"

	"gopkg.in/yaml.v3"
)

// KindParser is what the parser knows of one source kind. Each kind's
// package under sources/ implements it beside its backend; the program
// passes the list of kinds to Load, so this package names none of them.
type KindParser interface {
	// Name is the key that selects the kind in a zone's source list.
	Name() string
	// DefaultFallthrough is the source's fallthrough when not written.
	DefaultFallthrough() bool
	// Settings describes the kind's settings mapping (see NewSettings):
	// its keys, schema and defaults, and how it is read. What it reads
	// is Source.Settings, handed back to the kind when the source is
	// built.
	Settings() *Settings
}

// BlockOwner is implemented by kinds that own a top-level block of
// dnsd.yaml besides their sources' settings (the forward kind's cache):
// the parser accepts the key, reads it with the block's Settings into
// Config.Blocks[key], and the schema describes it.
type BlockOwner interface {
	Block() (key string, settings *Settings)
}

// SyncWaiter is implemented by the settings of kinds whose backends load
// asynchronously (a cluster, etcd): SyncWait is how long start-up
// readiness and a reload wait for their first sync (sync_timeout).
type SyncWaiter interface {
	SyncWait() time.Duration
}

// WritableKind is implemented by kinds whose sources dynamic updates may
// write to: Writable reports whether a source with these settings (the
// kind's Settings value) is writable.
type WritableKind interface {
	Writable(settings any) bool
}

// KindParsers is the list of source kinds a config may use.
type KindParsers []KindParser

func (ks KindParsers) lookup(name string) KindParser {
	for _, k := range ks {
		if k.Name() == name {
			return k
		}
	}
	return nil
}

// blocks returns the kinds that own a top-level block, in list order.
func (ks KindParsers) blocks() []BlockOwner {
	var out []BlockOwner
	for _, k := range ks {
		if o, ok := k.(BlockOwner); ok {
			out = append(out, o)
		}
	}
	return out
}

// names returns the kinds' names, sorted.
func (ks KindParsers) names() []string {
	out := make([]string, 0, len(ks))
	for _, k := range ks {
		out = append(out, k.Name())
	}
	slices.Sort(out)
	return out
}

// Block is one settings mapping while it is parsed (a source's, or a
// top-level block a kind owns): the checked mapping (only the known
// keys, no duplicates; empty when written without settings) with the
// parser that reports problems, the mapping's YAML path and the zone key
// it belongs to.
type Block struct {
	*Mapping
	Parser *Parser // always set
	Path   string  // the mapping's YAML path; always set
	Zone   *Zone   // the source's zone key; nil for a top-level block
	// At is the kind's (or block's) key: where problems with the block
	// as a whole (a required key missing) are reported; always set.
	At *yaml.Node
	// subs are the nested mappings read (see Sub).
	subs map[string]*Mapping
}

// Errorf reports a problem at node n (nil: the kind's key) of the block.
func (b *Block) Errorf(n *yaml.Node, path, format string, args ...any) {
	if n == nil {
		n = b.At
	}
	b.Parser.Errorf(n, path, format, args...)
}
