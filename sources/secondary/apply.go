package secondary

import (
	"fmt"
	"strings"

	"github.com/miekg/dns"
)

// A transfer's records, read into a copy.

// copyOf is a zone copy: its SOA and its other records.
type copyOf struct {
	soa *dns.SOA
	rrs []dns.RR
}

// fromAXFR reads an AXFR (or an AXFR-form IXFR): SOA, records, SOA.
func fromAXFR(rrs []dns.RR) (*copyOf, error) {
	if len(rrs) < 2 {
		return nil, fmt.Errorf("a transfer of %d records: no closing SOA", len(rrs))
	}
	soa := rrs[0].(*dns.SOA)
	last, ok := rrs[len(rrs)-1].(*dns.SOA)
	if !ok || last.Serial != soa.Serial {
		return nil, fmt.Errorf("the transfer does not end with the zone's SOA")
	}
	body := make([]dns.RR, 0, len(rrs)-2)
	for _, rr := range rrs[1 : len(rrs)-1] {
		if _, isSOA := rr.(*dns.SOA); isSOA {
			return nil, fmt.Errorf("a SOA inside the transfer")
		}
		body = append(body, rr)
	}
	return &copyOf{soa: soa, rrs: body}, nil
}

// rrKey names a record regardless of its TTL and of the case of its
// owner: what an IXFR deletion matches.
func rrKey(rr dns.RR) string {
	h := rr.Header()
	c := dns.Copy(rr)
	ch := c.Header()
	ch.Name, ch.Ttl = strings.ToLower(h.Name), 0
	return c.String()
}

// fromIXFR applies an incremental IXFR (new SOA, then for each version
// its old SOA, deletions, new SOA, additions, then the new SOA) to cur.
// Every difference must start from the version before it and delete only
// records the copy holds; else the transfer cannot be applied (and an
// AXFR is asked for).
func fromIXFR(cur *copyOf, rrs []dns.RR) (*copyOf, error) {
	final := rrs[0].(*dns.SOA)
	if len(rrs) < 3 {
		return nil, fmt.Errorf("an IXFR of %d records", len(rrs))
	}
	held := make(map[string]int, len(cur.rrs))
	for i, rr := range cur.rrs {
		held[rrKey(rr)] = i
	}
	gone := make(map[int]bool)
	var added []dns.RR
	addedAt := make(map[string]int)
	serial := cur.soa.Serial
	var to *dns.SOA
	i := 1
	for i < len(rrs)-1 {
		from, ok := rrs[i].(*dns.SOA)
		if !ok || from.Serial != serial {
			return nil, fmt.Errorf("an IXFR difference that does not start from serial %d", serial)
		}
		for i++; i < len(rrs); i++ {
			if _, isSOA := rrs[i].(*dns.SOA); isSOA {
				break
			}
			k := rrKey(rrs[i])
			if j, ok := addedAt[k]; ok && added[j] != nil {
				added[j] = nil // added by an earlier difference, deleted by this one
				delete(addedAt, k)
				continue
			}
			j, ok := held[k]
			if !ok || gone[j] {
				return nil, fmt.Errorf("an IXFR deletes a record the copy does not hold: %s", rrs[i])
			}
			gone[j] = true
		}
		if i >= len(rrs)-1 {
			return nil, fmt.Errorf("an IXFR difference without its new SOA")
		}
		to = rrs[i].(*dns.SOA)
		for i++; i < len(rrs); i++ {
			if _, isSOA := rrs[i].(*dns.SOA); isSOA {
				break
			}
			k := rrKey(rrs[i])
			if j, ok := held[k]; ok && !gone[j] {
				continue // held already
			}
			if j, ok := addedAt[k]; ok && added[j] != nil {
				continue
			}
			addedAt[k] = len(added)
			added = append(added, rrs[i])
		}
		serial = to.Serial
	}
	if to == nil || serial != final.Serial {
		return nil, fmt.Errorf("an IXFR that does not reach serial %d", final.Serial)
	}
	out := make([]dns.RR, 0, len(cur.rrs)-len(gone)+len(added))
	for j, rr := range cur.rrs {
		if !gone[j] {
			out = append(out, rr)
		}
	}
	for _, rr := range added {
		if rr != nil {
			out = append(out, rr)
		}
	}
	return &copyOf{soa: final, rrs: out}, nil
}
