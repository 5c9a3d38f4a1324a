package namepat

import "testing"

func TestMatch(t *testing.T) {
	for _, tc := range []struct {
		pattern string
		match   []string
		nomatch []string
	}{
		{"www.corp.internal.", []string{"www.corp.internal.", "WWW.Corp.Internal."}, []string{"corp.internal.", "a.www.corp.internal.", "ww.corp.internal."}},
		{"*.dhcp.corp.internal.", []string{"a.dhcp.corp.internal.", "a.b.dhcp.corp.internal.", "*.dhcp.corp.internal."},
			[]string{"dhcp.corp.internal.", "a.dhcp.corp.internal.x.", "adhcp.corp.internal."}},
		{"_acme-challenge.*.", []string{"_acme-challenge.corp.internal.", "_acme-challenge.www.corp.internal.", "_ACME-challenge.internal."},
			[]string{"_acme-challenge.", "www._acme-challenge.corp.internal.", "corp.internal."}},
		{"a.*.b.*.", []string{"a.x.b.y.", "a.x.y.b.z.", "a.b.b.b.", "a.x.b.b.y.z."}, []string{"a.b.y.", "a.x.b.", "x.a.x.b.y.", "a.x.c.y."}},
		{"*.*.10.in-addr.arpa.", []string{"1.2.10.in-addr.arpa.", "1.2.3.10.in-addr.arpa."}, []string{"2.10.in-addr.arpa.", "10.in-addr.arpa."}},
		{"*.", []string{"a.", "a.b.c."}, []string{"."}},
		{".", []string{"."}, []string{"a."}},
	} {
		for _, n := range tc.match {
			if !Match(tc.pattern, n) {
				t.Errorf("Match(%q, %q) = false, want true", tc.pattern, n)
			}
		}
		for _, n := range tc.nomatch {
			if Match(tc.pattern, n) {
				t.Errorf("Match(%q, %q) = true, want false", tc.pattern, n)
			}
		}
	}
}
