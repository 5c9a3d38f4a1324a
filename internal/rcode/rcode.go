package rcode

import "github.com/miekg/dns"

// Label is a response code's metric label: its name, else "other". 16 is
// BADVERS: a response's code (OPT-extended) is never BADSIG, the name
// miekg/dns gives 16, which only a TSIG record's error field means.
func Label(rc int) string {
	if rc == dns.RcodeBadVers {
		return "BADVERS"
	}
	if s, ok := dns.RcodeToString[rc]; ok {
		return s
	}
	return "other"
}
