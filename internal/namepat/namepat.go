// Package namepat matches owner names against the patterns of dynamic
// update policies, in which a label "*" stands for one or more whole
// labels.
package namepat

import (
	"slices"
	"strings"
)

// Match reports whether the owner name matches pattern, an owner-name
// pattern of an update item (config.Update.Names): label by label, compared case-insensitively, where a
// pattern label "*" stands for one or more whole labels of name. Both
// are FQDNs ("." is the root); a "*" label of name itself is a plain
// label. "*.dhcp.corp.internal." matches a.dhcp.corp.internal. and
// a.b.dhcp.corp.internal., not dhcp.corp.internal.
func Match(pattern, name string) bool {
	pl, nl := labels(pattern), labels(name)
	if !slices.Contains(pl, "*") {
		return len(pl) == len(nl) && strings.EqualFold(strings.TrimSuffix(pattern, "."), strings.TrimSuffix(name, "."))
	}
	// m[j]: pl[i:] matches nl[j:], filled from the last pattern label back.
	m := make([]bool, len(nl)+1)
	m[len(nl)] = true
	for i := len(pl) - 1; i >= 0; i-- {
		next := m[len(nl)]
		m[len(nl)] = false
		for j := len(nl) - 1; j >= 0; j-- {
			cur := m[j] // pl[i+1:] matches nl[j:]
			if pl[i] == "*" {
				// One label, then either pl[i+1:] or more of this "*".
				m[j] = m[j+1] || next
			} else {
				m[j] = strings.EqualFold(pl[i], nl[j]) && next
			}
			next = cur
		}
	}
	return m[0]
}

// labels splits an FQDN into its labels; the root has none.
func labels(name string) []string {
	name = strings.TrimSuffix(name, ".")
	if name == "" {
		return nil
	}
	return strings.Split(name, ".")
}
