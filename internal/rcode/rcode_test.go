package rcode

import (
	"testing"

	"github.com/miekg/dns"
)

func TestLabel(t *testing.T) {
	for rc, want := range map[int]string{
		dns.RcodeSuccess:   "NOERROR",
		dns.RcodeNameError: "NXDOMAIN",
		dns.RcodeBadVers:   "BADVERS",
		4095:               "other",
	} {
		if got := Label(rc); got != want {
			t.Errorf("Label(%d) = %q, want %q", rc, got, want)
		}
	}
}
