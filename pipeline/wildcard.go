package pipeline

// Wildcard synthesis (RFC 4592), done once here for every local source
// kind. Sources store wildcard records under their literal owner
// ("*.apps.example.internal.") and say whether they hold any (Wildcarder);
// the pipeline decides which names a wildcard answers, over the union of
// the zone's local sources:
//
//   - A wildcard answers only a name that no local source asked knows: a
//     name that exists (records or empty non-terminal) in any of them is
//     never synthesized, and neither is a name below an existing name
//     other than the wildcard's parent.
//   - The closest encloser is the longest ancestor of the name, no higher
//     than the zone apex (which always exists), that one of the sources
//     knows. The wildcard is "*." + closest encloser; the first source
//     that knows it answers, in source order.
//   - The wildcard's records are the answer (owners rewritten to the query
//     name on a copy by the answer code): type selection, NODATA, CNAME
//     chasing and minimal ANY work as for any existing name.

// wildcard looks for a wildcard answer for name in z, asking the local
// sources among z.entries[:n] (every one of them said NotMine for name).
// ok is false when no wildcard matches: resolution goes on as before. A
// source failing during the search gives its Failed outcome (ok true), as
// any failure does: a name must not leak to a forward source because a
// local one could not say whether it exists.
func (r *resolution) wildcard(z *zone, name string, n int) (o outcome, ok bool) {
	if name == z.name || name == z.nsName || name == z.nsUp {
		return outcome{}, false // they exist whatever the sources say
	}
	entries := z.entries[:n]
	q := &r.buf.q
	defer func() { q.Name = name }()

	ce := z.name
	for up := Parent(name); up != z.name && up != ""; up = Parent(up) {
		if up == z.nsUp { // exists whatever the sources say
			ce = up
			break
		}
		q.Name = up
		found, fo, failed := r.known(entries, q, false)
		if failed {
			return fo, true
		}
		if found {
			ce = up
			break
		}
	}
	q.Name = "*." + ce
	if ce == "." {
		q.Name = "*."
	}
	found, fo, failed := r.known(entries, q, true)
	if !found && !failed {
		return outcome{}, false
	}
	if found {
		fo.wild = q.Name
	}
	return fo, true
}

// known asks entries, in order, about q.Name: the first local source that
// has it (Found) or fails decides. wildOnly asks only the sources that
// hold wildcards now.
func (r *resolution) known(entries []entry, q *Question, wildOnly bool) (found bool, o outcome, failed bool) {
	for i := range entries {
		e := &entries[i]
		if !e.local || wildOnly && (e.wild == nil || !e.wild.Wildcards()) {
			continue
		}
		res := e.src.Lookup(r.ctx, q)
		switch res.Status {
		case Found:
			return true, outcome{status: Found, rrs: res.RRs, e: e, decided: true}, false
		case Failed:
			err := res.Err
			if err == nil {
				err = errNoReason
			}
			return false, outcome{status: Failed, err: err, e: e, decided: true}, true
		}
	}
	return false, outcome{}, false
}

// Parent returns the name one label up from name (an FQDN in presentation
// form, escapes allowed): "a.b." gives "b.", "a." gives ".", "." gives "".
func Parent(name string) string {
	for i := 0; i < len(name); i++ {
		switch name[i] {
		case '\\':
			i++ // the escaped character is part of the label
		case '.':
			if i == len(name)-1 {
				if i == 0 {
					return ""
				}
				return "."
			}
			return name[i+1:]
		}
	}
	return ""
}
