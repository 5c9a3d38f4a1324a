package server

import (
	"context"
	"net/netip"
	"testing"

	"github.com/miekg/dns"

	"github.com/dnsd/dnsd/config"
	"github.com/dnsd/dnsd/pipeline"
)

// FuzzServeRaw feeds raw bytes through the packet handler: it must never
// panic, and whatever it answers must unpack and echo the query's ID.
func FuzzServeRaw(f *testing.F) {
	seed := func(m *dns.Msg) {
		b, err := m.Pack()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, false)
		f.Add(b, true)
	}
	seed(query("example.test.", dns.TypeA))
	m := query("Big.Example.Test.", dns.TypeTXT)
	m.SetEdns0(4096, true)
	seed(m)
	m = query("example.test.", dns.TypeA)
	m.SetEdns0(1232, false)
	m.IsEdns0().SetVersion(3)
	seed(m)
	f.Add(rawMsg(1, 0x0100, 2, 0, 0, 0, rawQuestion("a.", 1, 1), rawQuestion("b.", 1, 1)), false)
	f.Add([]byte{0, 1, 2}, false)

	res := &fakeResolver{fn: func(_ context.Context, req *pipeline.Request) pipeline.Response {
		r := answerA(req, 60) // large enough to need truncation over UDP
		r.Msg.Extra = append(r.Msg.Extra, &dns.TXT{Hdr: dns.RR_Header{Name: req.Name, Rrtype: dns.TypeTXT, Class: dns.ClassINET}, Txt: []string{"x"}})
		return r
	}}
	s := New(Options{Resolver: res})
	s.set.Store(compile(Settings{ACL: config.ACL{Default: true}, Limits: config.Limits{RatePerClient: 1000}}))
	client := netip.MustParseAddr("10.0.0.1")
	sc := &scratch{}
	f.Fuzz(func(t *testing.T, in []byte, tcp bool) {
		proto := protoUDP
		if tcp {
			proto = protoTCP
		}
		out := s.serveRaw(context.Background(), sc, proto, client, false, in)
		defer s.release(sc)
		if out == nil {
			return
		}
		r := new(dns.Msg)
		if err := r.Unpack(out); err != nil {
			t.Fatalf("response does not unpack: %v", err)
		}
		if len(in) < 2 || r.Id != uint16(in[0])<<8|uint16(in[1]) || !r.Response {
			t.Fatalf("response id %d QR=%v for query id bytes %x", r.Id, r.Response, in[:min(2, len(in))])
		}
		if proto == protoUDP && len(out) > 1232 {
			t.Fatalf("UDP response of %d bytes exceeds our buffer", len(out))
		}
	})
}
