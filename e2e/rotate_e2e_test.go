package e2e

import (
	"fmt"
	"strings"
	"testing"

	"github.com/dnsd/dnsd/internal/dnstest"
	"github.com/miekg/dns"
)

// rotate: true puts each address of a name first in turn, for local and
// for cached forwarded answers; without it local answers keep file order.
func TestRotateAnswers(t *testing.T) {
	up := dnstest.StartUpstream(t, func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(r)
		for i := 1; i <= 3; i++ {
			rr, _ := dns.NewRR(fmt.Sprintf("%s 300 IN A 192.0.2.%d", r.Question[0].Name, i))
			m.Answer = append(m.Answer, rr)
		}
		_ = w.WriteMsg(m)
	})
	hosts := "10.0.0.1 web.example.internal\n10.0.0.2 web.example.internal\n10.0.0.3 web.example.internal\n"
	conf := func(rotate bool) string {
		return fmt.Sprintf("listen: [\"LISTEN\"]\nrotate: %t\nzones:\n  example.internal:\n    - hosts: {files: [example.hosts]}\n  .:\n    - forward: {upstreams: [%q]}\n", rotate, up.Addr)
	}
	firsts := func(addr, name string) map[string]int {
		out := map[string]int{}
		for i := 0; i < 6; i++ {
			r := dnstest.Ask(t, addr, name, dns.TypeA)
			if len(r.Answer) != 3 {
				t.Fatalf("%s: %v", name, r)
			}
			out[strings.Fields(r.Answer[0].String())[4]]++
		}
		return out
	}
	s := startYAML(t, conf(true), map[string]string{"example.hosts": hosts})
	for _, name := range []string{"web.example.internal.", "cdn.example.com."} {
		if f := firsts(s.addr, name); len(f) != 3 {
			t.Errorf("rotate: true, %s: first addresses %v, want all three in turn", name, f)
		}
	}
	s.reload(t, conf(false), true, 1)
	if f := firsts(s.addr, "web.example.internal."); len(f) != 1 || f["10.0.0.1"] != 6 {
		t.Errorf("rotate: false: first addresses %v, want the file's first every time", f)
	}
}
