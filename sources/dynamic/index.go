package dynamic

import (
	"maps"
	"slices"
	"strings"

	"github.com/miekg/dns"

	"github.com/dnsd/dnsd/pipeline"
)

// shards is how many maps the index splits its names over: a commit
// clones only the shards of the names it touches (and their parents), so
// its cost follows the size of a shard, not of the zone (about a
// thousand names each at a million records).
const shards = 1024

// entry is what the index holds at a name.
type entry struct {
	rrs   []dns.RR // the records at the name, read-only; nil: an empty non-terminal
	below int      // names with records below this one, within its zone
}

// index is one immutable generation of a store's records: readers load it
// with one atomic load and never lock. Names are lower-case FQDNs.
type index struct {
	shards    [shards]map[string]entry // nil: an empty shard
	names     int                      // names with records
	records   int
	wildcards int    // names with records whose first label is "*"
	serial    uint32 // the source's Serial while this index is served
}

// shardOf picks name's shard (FNV-1a; no allocation).
func shardOf(name string) int {
	h := uint32(2166136261)
	for i := 0; i < len(name); i++ {
		h ^= uint32(name[i])
		h *= 16777619
	}
	return int(h % shards)
}

// get returns the entry at name.
func (ix *index) get(name string) (entry, bool) {
	e, ok := ix.shards[shardOf(name)][name]
	return e, ok
}

// records returns the records at name, nil when it has none.
func (ix *index) rrs(name string) []dns.RR {
	e, _ := ix.get(name)
	return e.rrs
}

// owners returns the names with records in zone, in canonical order.
func (ix *index) owners(zone string) []string {
	out := make([]string, 0, ix.names)
	for _, m := range ix.shards {
		for name, e := range m {
			if len(e.rrs) > 0 && pipeline.InZone(name, zone) {
				out = append(out, name)
			}
		}
	}
	slices.SortFunc(out, pipeline.CanonicalCompare)
	return out
}

// editor makes the next index from one: it clones a shard the first time
// it changes it, and leaves the index it started from as it was.
type editor struct {
	ix     *index
	cloned [shards]bool
	zones  []string // the store's zones: empty non-terminals end at their apex
}

func (ix *index) edit(zones []string) *editor {
	next := *ix
	return &editor{ix: &next, zones: zones}
}

func (e *editor) put(name string, en entry) {
	i := shardOf(name)
	if !e.cloned[i] {
		e.ix.shards[i] = maps.Clone(e.ix.shards[i])
		if e.ix.shards[i] == nil {
			e.ix.shards[i] = make(map[string]entry)
		}
		e.cloned[i] = true
	}
	if len(en.rrs) == 0 && en.below == 0 {
		delete(e.ix.shards[i], name)
		return
	}
	e.ix.shards[i][name] = en
}

// set makes rrs (nil or empty: none) the records at name, a name of one of
// the editor's zones, keeping the counts and the empty non-terminals
// above it.
func (e *editor) set(name string, rrs []dns.RR) {
	old, _ := e.ix.get(name)
	had, has := len(old.rrs) > 0, len(rrs) > 0
	e.ix.records += len(rrs) - len(old.rrs)
	if !has {
		rrs = nil
	}
	e.put(name, entry{rrs: rrs, below: old.below})
	if had == has {
		return
	}
	d := 1
	if !has {
		d = -1
	}
	e.ix.names += d
	if strings.HasPrefix(name, "*.") {
		e.ix.wildcards += d
	}
	top := zoneOf(name, e.zones)
	for p := pipeline.Parent(name); p != "" && pipeline.InZone(p, top); p = pipeline.Parent(p) {
		pe, _ := e.ix.get(p)
		pe.below += d
		e.put(p, pe)
	}
}

// zoneOf returns the most specific of zones that holds name ("" when
// none does).
func zoneOf(name string, zones []string) string {
	best := ""
	for _, z := range zones {
		if pipeline.InZone(name, z) && (best == "" || len(z) > len(best)) {
			best = z
		}
	}
	return best
}
