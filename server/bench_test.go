package server

import (
	"context"
	"net"
	"net/netip"
	"testing"

	"github.com/miekg/dns"

	"github.com/dnsd/dnsd/config"
	"github.com/dnsd/dnsd/pipeline"
)

// fixedResolver answers every query with the same prepared record, the
// cheapest possible pipeline, so the benchmark measures the server.
type fixedResolver struct{ rr []dns.RR }

func (f *fixedResolver) Resolve(_ context.Context, req *pipeline.Request) pipeline.Response {
	m := &dns.Msg{Answer: f.rr}
	m.Authoritative = true
	return pipeline.Response{Msg: m, Zone: "example.test.", Source: "fixed"}
}

type nopObserver struct{}

func (nopObserver) Observe(Observation)     {}
func (nopObserver) TCPRejected(string)      {}
func (nopObserver) Transfer(string, string) {}

// BenchmarkServeUDP measures bytes in → bytes out for one UDP query with
// EDNS0 (parse, checks, ACL, resolve, OPT, truncation check, pack).
func BenchmarkServeUDP(b *testing.B) {
	res := &fixedResolver{rr: []dns.RR{&dns.A{
		Hdr: dns.RR_Header{Name: "www.example.test.", Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60},
		A:   net.IPv4(192, 0, 2, 1).To4(),
	}}}
	s := New(Options{Resolver: res, Observer: nopObserver{}})
	s.set.Store(compile(Settings{ACL: config.ACL{Default: true}}))
	q := query("www.example.test.", dns.TypeA)
	q.SetEdns0(1232, false)
	in := pack(b, q)
	client := netip.MustParseAddr("127.0.0.1")
	sc := &scratch{}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if out := s.serveRaw(ctx, sc, protoUDP, client, true, in); len(out) == 0 {
			b.Fatal("no answer")
		}
		s.release(sc)
	}
}
