package pipeline

// Forwards reports whether a query for name (a lower-case FQDN) can reach
// a forward source: walking the sources of the zone matching name in
// order, a forward source for which takes is true (takes nil: any) is
// reached; any other source is passed only when it falls through. The
// forward response cache uses it after a reload to drop the entries that
// no query can be answered from any more.
func (p *Pipeline) Forwards(name string, takes func(Source) bool) bool {
	if p.table.forwards(name, takes) {
		return true
	}
	if p.views != nil {
		for _, v := range p.views.list {
			if v.table.forwards(name, takes) {
				return true
			}
		}
	}
	return false
}

func (t *table) forwards(name string, takes func(Source) bool) bool {
	z := t.match(name)
	if z == nil {
		return false
	}
	for i := range z.entries {
		e := &z.entries[i]
		if !e.local && (takes == nil || takes(e.src)) {
			return true
		}
		if !e.fallsThrough {
			return false
		}
	}
	return false
}
