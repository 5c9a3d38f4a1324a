package pipeline

import (
	"strings"

	"github.com/miekg/dns"
)

// ZoneSource returns the first source of zone (a FQDN, any case; the zone
// itself, not a name below it) for which match reports true, in the
// top-level zones and then in each view's; nil when there is none. It
// finds the source that takes a zone's NOTIFYs (package authority).
func (p *Pipeline) ZoneSource(zone string, match func(Source) bool) Source {
	zone = strings.ToLower(dns.Fqdn(zone))
	if s := p.table.zoneSource(zone, match); s != nil {
		return s
	}
	if p.views != nil {
		for _, v := range p.views.list {
			if s := v.table.zoneSource(zone, match); s != nil {
				return s
			}
		}
	}
	return nil
}

func (t *table) zoneSource(zone string, match func(Source) bool) Source {
	z := t.zones[zone]
	if z == nil {
		return nil
	}
	for i := range z.entries {
		if match(z.entries[i].src) {
			return z.entries[i].src
		}
	}
	return nil
}

// ZoneEntries returns the source list of the top-level zone zone (a
// lower-case FQDN, the apex itself), in order, as its queries ask it;
// nil when zone is not a top-level zone. Dynamic updates read the zone
// through it (package authority).
func (p *Pipeline) ZoneEntries(zone string) []SourceEntry {
	z := p.table.zones[zone]
	if z == nil {
		return nil
	}
	out := make([]SourceEntry, len(z.entries))
	for i := range z.entries {
		out[i] = SourceEntry{Source: z.entries[i].src, Fallthrough: z.entries[i].fallsThrough}
	}
	return out
}
