package e2e

import (
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/dnsd/dnsd/internal/dnstest"
	"github.com/miekg/dns"
)

// edeOf returns the response's Extended DNS Errors as "code:text" strings,
// and whether it had an OPT at all.
func edeOf(r *dns.Msg) ([]string, bool) {
	opt := r.IsEdns0()
	if opt == nil {
		return nil, false
	}
	var out []string
	for _, o := range opt.Option {
		if e, ok := o.(*dns.EDNS0_EDE); ok {
			out = append(out, fmt.Sprintf("%d:%s", e.InfoCode, e.ExtraText))
		}
	}
	return out, true
}

// ednsQuery asks name with EDNS0 (edns true) or without, over UDP from
// the given local address ("" for any).
func ednsQuery(t *testing.T, addr, from, name string, edns bool) *dns.Msg {
	t.Helper()
	c := &dns.Client{Timeout: 5 * time.Second}
	if from != "" {
		c.Dialer = &net.Dialer{LocalAddr: &net.UDPAddr{IP: net.ParseIP(from)}}
	}
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), dns.TypeA)
	if edns {
		m.SetEdns0(1232, false)
	}
	r, _, err := c.Exchange(m, addr)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return r
}

// wantEDE checks one response: rcode, and exactly one EDE with code and a
// text containing text.
func wantEDE(t *testing.T, what string, r *dns.Msg, rcode int, code uint16, text string) {
	t.Helper()
	ede, _ := edeOf(r)
	if r.Rcode != rcode || len(ede) != 1 || !strings.HasPrefix(ede[0], fmt.Sprintf("%d:", code)) || !strings.Contains(ede[0], text) {
		t.Errorf("%s: %s with EDE %v, want %s with EDE %d containing %q", what, dns.RcodeToString[r.Rcode], ede, dns.RcodeToString[rcode], code, text)
	}
}

// Extended DNS Errors say why: not synced (14), no upstream (22), ACL
// (18), busy (18 "busy"), stale (3); an upstream's EDE is passed on; a
// client without EDNS0 gets no OPT at all.
func TestExtendedDNSErrors(t *testing.T) {
	// The upstream answers slow.example.com after 1 s, says why for
	// filtered.example.com, answers the rest with a 1 s TTL.
	up := dnstest.StartUpstream(t, func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(r)
		q := r.Question[0]
		// sayWhy sends m with an EDE saying why.
		sayWhy := func(code uint16, text string) {
			m.SetEdns0(1232, false)
			m.IsEdns0().Option = append(m.IsEdns0().Option, &dns.EDNS0_EDE{InfoCode: code, ExtraText: text})
			_ = w.WriteMsg(m)
		}
		switch q.Name {
		case "slow.example.com.":
			time.Sleep(time.Second)
		case "filtered.example.com.":
			m.Rcode = dns.RcodeNameError
			sayWhy(dns.ExtendedErrorCodeFiltered, "blocked by policy")
			return
		case "bogus.example.com.":
			m.Rcode = dns.RcodeServerFailure
			sayWhy(dns.ExtendedErrorCodeDNSBogus, "bad signature")
			return
		case "sinkhole.example.com.":
			m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 300}, A: net.ParseIP("192.0.2.66")})
			sayWhy(dns.ExtendedErrorCodeFiltered, "sinkholed")
			return
		}
		if q.Qtype == dns.TypeA {
			m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 1}, A: net.ParseIP("192.0.2.1")})
		}
		_ = w.WriteMsg(m)
	})
	dead := freePort(t)
	s := startYAML(t, fmt.Sprintf(`listen: ["LISTEN"]
acl: {allow: [127.0.0.1/32]}
zones:
  etcd.internal:
    - etcd: {endpoints: ["http://127.0.0.1:%d"], sync_timeout: 100ms}
  alias.internal:
    - file: {records: ["tofiltered CNAME filtered.example.com.", "tosinkhole CNAME sinkhole.example.com.", "tostale CNAME stale.example.com.", "toother CNAME other.example.com."]}
  .:
    - forward: {upstreams: [%q], timeout: 300ms, max_concurrent: 1}
`, dead, up.Addr), nil)

	wantEDE(t, "unsynced etcd", ednsQuery(t, s.addr, "", "db.etcd.internal", true), dns.RcodeServerFailure, dns.ExtendedErrorCodeNotReady, "etcd")
	if r := ednsQuery(t, s.addr, "", "db.etcd.internal", false); r.IsEdns0() != nil || r.Rcode != dns.RcodeServerFailure {
		t.Errorf("without EDNS0: %v, want SERVFAIL and no OPT", r)
	}
	wantEDE(t, "ACL", ednsQuery(t, s.addr, "127.0.0.2", "x.example.com", true), dns.RcodeRefused, dns.ExtendedErrorCodeProhibited, "")
	wantEDE(t, "upstream's own EDE", ednsQuery(t, s.addr, "", "filtered.example.com", true), dns.RcodeNameError, dns.ExtendedErrorCodeFiltered, "blocked by policy")
	// The same at the end of a local CNAME chain.
	wantEDE(t, "upstream's own EDE through a CNAME", ednsQuery(t, s.addr, "", "tofiltered.alias.internal", true), dns.RcodeNameError, dns.ExtendedErrorCodeFiltered, "blocked by policy")
	// Every upstream failed, the one upstream saying why: SERVFAIL with
	// our EDE 22 and, after it, the upstream's own.
	r := ednsQuery(t, s.addr, "", "bogus.example.com", true)
	if ede, _ := edeOf(r); r.Rcode != dns.RcodeServerFailure || len(ede) != 2 || !strings.HasPrefix(ede[0], "22:") || ede[1] != "6:bad signature" {
		t.Errorf("an upstream's SERVFAIL with EDE 6: %s with EDE %v, want SERVFAIL with 22 then 6", dns.RcodeToString[r.Rcode], ede)
	}
	// An answer with an upstream's EDE is cached like any other (TTL
	// 300), the EDE with it.
	before := up.Queries()
	for i := range 3 {
		r := ednsQuery(t, s.addr, "", "sinkhole.example.com", true)
		wantEDE(t, fmt.Sprintf("an answer with the upstream's EDE, asked %d times", i+1), r, dns.RcodeSuccess, dns.ExtendedErrorCodeFiltered, "sinkholed")
		if dnstest.RData(r) != "NOERROR:192.0.2.66" {
			t.Errorf("sinkhole.example.com: %s", dnstest.RData(r))
		}
	}
	if n := up.Queries() - before; n != 1 {
		t.Errorf("an answer with an EDE, asked 3 times, reached the upstream %d times, want 1 (cached)", n)
	}
	wantEDE(t, "upstream's EDE on an answer through a CNAME", ednsQuery(t, s.addr, "", "tosinkhole.alias.internal", true), dns.RcodeSuccess, dns.ExtendedErrorCodeFiltered, "sinkholed")

	// max_concurrent 1: a second client while slow.example.com is waited for.
	done := make(chan struct{})
	go func() { defer close(done); ednsQuery(t, s.addr, "", "slow.example.com", true) }()
	time.Sleep(200 * time.Millisecond)
	wantEDE(t, "over max_concurrent", ednsQuery(t, s.addr, "", "other.example.com", true), dns.RcodeRefused, dns.ExtendedErrorCodeProhibited, "busy")
	wantEDE(t, "over max_concurrent through a CNAME", ednsQuery(t, s.addr, "", "toother.alias.internal", true), dns.RcodeRefused, dns.ExtendedErrorCodeProhibited, "busy")
	<-done

	// Stale: cached with a 1 s TTL, then the upstream goes away.
	if r := ednsQuery(t, s.addr, "", "stale.example.com", true); dnstest.RData(r) != "NOERROR:192.0.2.1" {
		t.Fatalf("stale.example.com: %v", r)
	}
	up.Stop()
	time.Sleep(1500 * time.Millisecond)
	r = ednsQuery(t, s.addr, "", "stale.example.com", true)
	if dnstest.RData(r) != "NOERROR:192.0.2.1" {
		t.Fatalf("expired entry, upstream gone: %v, want the stale answer", r)
	}
	wantEDE(t, "served stale", r, dns.RcodeSuccess, dns.ExtendedErrorCodeStaleAnswer, "")
	r = ednsQuery(t, s.addr, "", "tostale.alias.internal", true)
	if got := dnstest.RData(r); !strings.HasSuffix(got, "192.0.2.1") {
		t.Errorf("stale answer through a CNAME: %s", got)
	}
	wantEDE(t, "served stale through a CNAME", r, dns.RcodeSuccess, dns.ExtendedErrorCodeStaleAnswer, "")
	wantEDE(t, "no upstream", ednsQuery(t, s.addr, "", "never-seen.example.com", true), dns.RcodeServerFailure, dns.ExtendedErrorCodeNoReachableAuthority, "forward")
}
