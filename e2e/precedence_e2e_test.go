package e2e

import (
	"testing"

	"github.com/miekg/dns"
)

// TestHostsBeforeFilePrecedence: what docs/sources/file.md says of a
// hosts source listed before a file source. The hosts source answers the
// names it has addresses for, with its own records only (a type only the
// zone file has there is NODATA); its empty non-terminals (the apex)
// hide nothing (the file's apex MX answers); a name it does not hold
// reaches the file.
func TestHostsBeforeFilePrecedence(t *testing.T) {
	d := start(t, config{Zones: `  example.internal:
    - hosts: {entries: ["10.0.0.1 web.example.internal"]}
    - file: {path: z.zone}
`}, map[string]string{"z.zone": "$TTL 300\n@ IN SOA ns hostmaster 1 3600 600 86400 60\n@ IN NS ns\nns IN A 10.0.0.53\n" +
		"@ IN MX 10 mail\nweb IN A 10.9.9.9\nweb IN MX 10 mail\nmail IN A 10.0.0.25\n"})
	for _, tc := range []struct {
		name  string
		qtype uint16
		want  []string // answer records, in order
	}{
		{"web.example.internal.", dns.TypeA, []string{"10.0.0.1"}}, // hosts', not the file's 10.9.9.9
		{"web.example.internal.", dns.TypeMX, nil},                 // NODATA: the file's MX is not asked
		{"example.internal.", dns.TypeMX, []string{"10 mail.example.internal."}},
		{"mail.example.internal.", dns.TypeA, []string{"10.0.0.25"}},
	} {
		r := d.ask("udp", tc.name, tc.qtype)
		var got []string
		for _, rr := range r.Answer {
			switch rr := rr.(type) {
			case *dns.A:
				got = append(got, rr.A.String())
			case *dns.MX:
				got = append(got, "10 "+rr.Mx)
			}
		}
		if r.Rcode != dns.RcodeSuccess || len(got) != len(tc.want) || len(got) > 0 && got[0] != tc.want[0] {
			t.Errorf("%s %s: rcode %s answer %q, want NOERROR %q", tc.name, dns.TypeToString[tc.qtype], dns.RcodeToString[r.Rcode], got, tc.want)
		}
	}
}
