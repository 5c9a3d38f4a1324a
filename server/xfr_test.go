package server

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/dnsd/dnsd/authority"
	"github.com/dnsd/dnsd/config"
	"github.com/dnsd/dnsd/internal/dnstest"
	"github.com/dnsd/dnsd/pipeline"
)

// listSource is a local source of n A records that lists them.
type listSource struct{ rrs []dns.RR }

func (l *listSource) Lookup(_ context.Context, q *pipeline.Question) pipeline.Result {
	for _, rr := range l.rrs {
		if rr.Header().Name == q.Name {
			return pipeline.Result{Status: pipeline.Found, RRs: []dns.RR{rr}}
		}
	}
	return pipeline.Result{Status: pipeline.NotMine}
}
func (l *listSource) Kind() string   { return "hosts" }
func (l *listSource) TTL() uint32    { return 60 }
func (l *listSource) Serial() uint32 { return 7 }
func (l *listSource) List(_ string, yield func(dns.RR) bool) error {
	for _, rr := range l.rrs {
		if !yield(rr) {
			break
		}
	}
	return nil
}

func TestIsTransfer(t *testing.T) {
	for _, tc := range []struct {
		msg  func() *dns.Msg
		want bool
	}{
		{func() *dns.Msg { return query("example.test.", dns.TypeAXFR) }, true},
		{func() *dns.Msg { return query("example.test.", dns.TypeIXFR) }, true},
		{func() *dns.Msg { return query("example.test.", dns.TypeA) }, false},
		{func() *dns.Msg { m := query("example.test.", dns.TypeAXFR); m.Opcode = dns.OpcodeNotify; return m }, false},
		{func() *dns.Msg { m := query("example.test.", dns.TypeAXFR); m.Response = true; return m }, false},
		{func() *dns.Msg {
			m := query("example.test.", dns.TypeAXFR)
			m.Question = append(m.Question, m.Question[0])
			return m
		}, false},
	} {
		m := tc.msg()
		if got := isTransfer(pack(t, m)); got != tc.want {
			t.Errorf("%v: isTransfer = %t", m.Question, got)
		}
	}
	for _, b := range [][]byte{nil, make([]byte, 12), {0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 63}} {
		if isTransfer(b) {
			t.Errorf("%x: isTransfer", b)
		}
	}
}

// TestTransferTLS: a signed AXFR over DNS over TLS, in several signed
// messages, with a real pipeline behind the server; over UDP it is
// REFUSED.
func TestTransferTLS(t *testing.T) {
	src := &listSource{}
	for i := range 4000 {
		src.rrs = append(src.rrs, &dns.A{Hdr: dns.RR_Header{Name: fmt.Sprintf("host-%d.example.test.", i), Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60}, A: []byte{10, 0, byte(i >> 8), byte(i)}})
	}
	const secret = "c2VjcmV0LXNlY3JldC1zZWNyZXQ="
	p, err := pipeline.New([]pipeline.ZoneSpec{{Names: []string{"example.test."}, Sources: []pipeline.SourceEntry{{Source: src}}}},
		pipeline.Options{})
	if err != nil {
		t.Fatal(err)
	}
	auth := zonesOf(t, p, authority.TransferSpec{
		Zones: []string{"example.test."}, Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")},
		Key: &authority.TSIGKey{Name: "k.", Algorithm: dns.HmacSHA512, Secret: secret},
	})
	srvTLS, cliTLS := selfSigned(t)
	rec := &recorder{}
	s := New(Options{Resolver: p, Authority: auth, Observer: rec})
	if err := s.Apply(context.Background(), []config.Listen{{Proto: "tls", Addr: "127.0.0.1:0"}, {Proto: "udp", Addr: "127.0.0.1:0"}}, Settings{ACL: config.ACL{Default: true}, TLS: srvTLS}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Shutdown(context.Background()) })
	ts := &testServer{Server: s, rec: rec}

	conn, err := tls.Dial("tcp", ts.addr(t, "tcp"), cliTLS)
	if err != nil {
		t.Fatal(err)
	}
	tr := &dns.Transfer{Conn: &dns.Conn{Conn: conn}, TsigSecret: map[string]string{"k.": secret}, ReadTimeout: 5 * time.Second}
	m := new(dns.Msg)
	m.SetAxfr("example.test.")
	m.SetTsig("k.", dns.HmacSHA512, 300, time.Now().Unix())
	ch, err := tr.In(m, "")
	if err != nil {
		t.Fatal(err)
	}
	n, msgs := 0, 0
	for env := range ch {
		if env.Error != nil {
			t.Fatalf("after %d records: %v", n, env.Error)
		}
		n += len(env.RR)
		msgs++
	}
	// SOA, 4000 records, the apex NS (no addresses: no NSAddrs), SOA.
	if n != 4003 || msgs < 2 {
		t.Errorf("%d records in %d messages, want 4003 in several", n, msgs)
	}

	r := dnstest.Exchange(t, "udp", ts.addr(t, "udp"), query("example.test.", dns.TypeAXFR))
	if r.Rcode != dns.RcodeRefused || len(r.Answer) != 0 {
		t.Errorf("AXFR over UDP: %v", r)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if rec.transfers["example.test. success"] != 1 {
		t.Errorf("transfers observed: %v", rec.transfers)
	}
}

// FuzzIsTransfer: the raw check never takes a message that miekg/dns
// does not see as an AXFR or IXFR query (a compressed question name may
// be missed: it then gets the normal path's REFUSED).
func FuzzIsTransfer(f *testing.F) {
	for _, qt := range []uint16{dns.TypeAXFR, dns.TypeIXFR, dns.TypeA} {
		m := query("example.test.", qt)
		b, _ := m.Pack()
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if !isTransfer(b) {
			return
		}
		m := new(dns.Msg)
		if err := m.Unpack(b); err != nil {
			return // serveTransfer drops it as malformed, as serveRaw would
		}
		if m.Response || m.Opcode != dns.OpcodeQuery || len(m.Question) != 1 ||
			(m.Question[0].Qtype != dns.TypeAXFR && m.Question[0].Qtype != dns.TypeIXFR) {
			t.Fatalf("isTransfer took %v", m)
		}
	})
}
