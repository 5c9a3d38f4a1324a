package server

import (
	"context"
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/miekg/dns"

	"github.com/dnsd/dnsd/config"
	"github.com/dnsd/dnsd/pipeline"
)

// FuzzEDNS sends a query for x.example.test. A whose OPT record (or lack
// of one) is built from the input — UDP size, extended rcode, version, DO
// and the other flag bits, any option bytes, a root or other owner — over
// UDP or TCP, to a resolver that answers n A records with a given rcode,
// sometimes with an OPT of its own (as a forwarded answer has). The
// response must be what the EDNS0 rules say:
//   - a query miekg/dns cannot unpack (e.g. a malformed option) gets no
//     response;
//   - otherwise the response unpacks and has the query's ID, and exactly
//     one OPT when the query had one, none when it had none (and then a
//     4-bit rcode);
//   - our OPT advertises our buffer size, version 0, the client's DO bit
//     and no other flag;
//   - an OPT owned by a name other than the root is FORMERR; a version
//     above 0 is BADVERS; else the resolver's answer, with the DO bit
//     passed on to it;
//   - over UDP the response fits in max(512, min(client size, our size))
//     (512 without EDNS) and is truncated (TC=1) exactly when answers were
//     left out; over TCP nothing is left out.
func FuzzEDNS(f *testing.F) {
	// hasOPT, rootOwner, size, extRcode, version, do, z, options, tcp, n, rcode, upstreamOPT
	f.Add(true, true, uint16(1232), uint8(0), uint8(0), true, uint16(0), []byte(nil), false, uint8(1), uint16(0), false)
	f.Add(true, true, uint16(4096), uint8(0), uint8(0), false, uint16(0), []byte(nil), false, uint8(200), uint16(0), false)
	f.Add(true, true, uint16(0), uint8(0), uint8(0), false, uint16(0), []byte(nil), false, uint8(40), uint16(0), false)
	f.Add(true, true, uint16(600), uint8(0), uint8(0), true, uint16(0x7fff), []byte(nil), false, uint8(40), uint16(0), true)
	f.Add(true, true, uint16(65535), uint8(0), uint8(0), false, uint16(0), []byte(nil), true, uint8(255), uint16(0), false)
	f.Add(true, true, uint16(1232), uint8(0), uint8(1), true, uint16(0), []byte(nil), false, uint8(1), uint16(0), false)
	f.Add(true, true, uint16(1232), uint8(0), uint8(255), false, uint16(0), []byte(nil), true, uint8(1), uint16(0), false)
	f.Add(true, false, uint16(1232), uint8(0), uint8(0), false, uint16(0), []byte(nil), false, uint8(1), uint16(0), false)
	f.Add(true, true, uint16(1232), uint8(1), uint8(0), false, uint16(0), []byte(nil), false, uint8(1), uint16(dns.RcodeBadCookie), false)
	f.Add(false, true, uint16(0), uint8(0), uint8(0), false, uint16(0), []byte(nil), false, uint8(1), uint16(dns.RcodeBadCookie), false)
	f.Add(false, true, uint16(0), uint8(0), uint8(0), false, uint16(0), []byte(nil), false, uint8(60), uint16(0), true)
	f.Add(false, true, uint16(0), uint8(0), uint8(0), false, uint16(0), []byte(nil), true, uint8(255), uint16(dns.RcodeNameError), false)
	// Options: a cookie, a client subnet, padding, an unknown code, and
	// malformed ones (length past the end, a truncated header, a bad
	// subnet family).
	f.Add(true, true, uint16(1232), uint8(0), uint8(0), true, uint16(0), []byte{0, 10, 0, 8, 1, 2, 3, 4, 5, 6, 7, 8}, false, uint8(1), uint16(0), false)
	f.Add(true, true, uint16(1232), uint8(0), uint8(0), false, uint16(0), []byte{0, 8, 0, 7, 0, 1, 24, 0, 192, 0, 2}, false, uint8(1), uint16(0), false)
	f.Add(true, true, uint16(1232), uint8(0), uint8(0), false, uint16(0), []byte{0, 12, 0, 4, 0, 0, 0, 0}, false, uint8(1), uint16(0), false)
	f.Add(true, true, uint16(1232), uint8(0), uint8(0), false, uint16(0), []byte{0xfd, 0xe9, 0, 3, 'a', 'b', 'c'}, true, uint8(1), uint16(0), false)
	f.Add(true, true, uint16(1232), uint8(0), uint8(0), false, uint16(0), []byte{0, 10, 0, 9, 1}, false, uint8(1), uint16(0), false)
	f.Add(true, true, uint16(1232), uint8(0), uint8(0), false, uint16(0), []byte{0, 10, 0}, false, uint8(1), uint16(0), false)
	f.Add(true, true, uint16(1232), uint8(0), uint8(0), false, uint16(0), []byte{0, 8, 0, 4, 0, 9, 0, 0}, false, uint8(1), uint16(0), false)
	f.Add(true, true, uint16(1232), uint8(0), uint8(0), false, uint16(0), []byte{0, 15, 0, 2, 0, 18}, false, uint8(1), uint16(dns.RcodeRefused), false)

	var n int            // answers the resolver gives; set per input
	var rcode int        // the resolver's rcode
	var upstreamOPT bool // the resolver's answer carries an OPT
	res := &fakeResolver{fn: func(_ context.Context, req *pipeline.Request) pipeline.Response {
		r := answerA(req, n)
		r.Msg.Rcode = rcode
		if upstreamOPT {
			o := &dns.OPT{Hdr: dns.RR_Header{Name: ".", Rrtype: dns.TypeOPT}}
			o.SetUDPSize(4096)
			o.SetDo()
			o.Option = []dns.EDNS0{&dns.EDNS0_PADDING{Padding: make([]byte, 8)}}
			r.Msg.Extra = append(r.Msg.Extra, o)
		}
		return r
	}}
	s := New(Options{Resolver: res})
	s.set.Store(compile(Settings{ACL: config.ACL{Default: true}}))
	const ours = defaultUDPBuffer
	client := netip.MustParseAddr("10.0.0.1")
	sc := &scratch{}

	f.Fuzz(func(t *testing.T, hasOPT, rootOwner bool, size uint16, extRcode, version uint8, do bool, z uint16, options []byte, tcp bool, answers uint8, rc uint16, upOPT bool) {
		n, rcode, upstreamOPT = int(answers), int(rc&0xFFF), upOPT

		// The query, by hand: options need not be well-formed.
		body := rawQuestion("x.example.test.", dns.TypeA, dns.ClassINET)
		ar := uint16(0)
		if hasOPT {
			ar = 1
			if rootOwner {
				body = append(body, 0)
			} else {
				body = append(body, 1, 'x', 0)
			}
			flags := uint32(z & 0x7fff)
			if do {
				flags |= 1 << 15
			}
			body = binary.BigEndian.AppendUint16(body, dns.TypeOPT)
			body = binary.BigEndian.AppendUint16(body, size)
			body = binary.BigEndian.AppendUint32(body, uint32(extRcode)<<24|uint32(version)<<16|flags)
			body = binary.BigEndian.AppendUint16(body, uint16(len(options)))
			body = append(body, options...)
		}
		in := rawMsg(0xBEEF, 0x0100, 1, 0, 0, ar, body)
		proto := protoUDP
		if tcp {
			proto = protoTCP
		}

		res.mu.Lock()
		res.do = res.do[:0]
		res.names = res.names[:0]
		res.mu.Unlock()
		out := s.serveRaw(context.Background(), sc, proto, client, false, in)
		defer s.release(sc)

		if _, err := unpackRef(in); err != nil {
			if out != nil {
				t.Fatalf("an unparseable query (%v) was answered: % x", err, in)
			}
			return
		}
		if out == nil {
			t.Fatalf("no response to a valid query: % x", in)
		}
		r := new(dns.Msg)
		if err := r.Unpack(out); err != nil {
			t.Fatalf("response does not unpack: %v", err)
		}
		if r.Id != 0xBEEF || !r.Response {
			t.Fatalf("response ID %#x QR=%v", r.Id, r.Response)
		}

		nopt := 0
		for _, rr := range r.Extra {
			if rr.Header().Rrtype == dns.TypeOPT {
				nopt++
			}
		}
		ropt := r.IsEdns0()
		switch {
		case !hasOPT && nopt != 0:
			t.Fatalf("%d OPT records in the response to a query without EDNS", nopt)
		case !hasOPT && r.Rcode > 0xF:
			t.Fatalf("extended rcode %d without an OPT", r.Rcode)
		case hasOPT && (nopt != 1 || ropt == nil):
			t.Fatalf("%d OPT records in the response to a query with one", nopt)
		}
		if ropt != nil {
			if ropt.UDPSize() != ours || ropt.Version() != 0 || ropt.Do() != do || ropt.Hdr.Ttl&0x7fff != 0 || ropt.Hdr.Name != "." {
				t.Fatalf("our OPT %v: want size %d, version 0, DO %v, no other flag", ropt, ours, do)
			}
		}

		called := len(res.calls()) > 0
		switch {
		case hasOPT && !rootOwner:
			if r.Rcode != dns.RcodeFormatError || called {
				t.Fatalf("OPT not owned by the root: rcode %s (resolver asked: %v), want FORMERR", dns.RcodeToString[r.Rcode], called)
			}
			return
		case hasOPT && version != 0:
			if r.Rcode != dns.RcodeBadVers || called || len(r.Answer) != 0 {
				t.Fatalf("EDNS version %d: rcode %d, %d answers (resolver asked: %v), want BADVERS", version, r.Rcode, len(r.Answer), called)
			}
			return
		}
		if !called {
			t.Fatalf("the resolver was not asked; rcode %s", dns.RcodeToString[r.Rcode])
		}
		res.mu.Lock()
		gotDO := res.do[0]
		res.mu.Unlock()
		if gotDO != (hasOPT && do) {
			t.Fatalf("DO passed to the resolver: %v, query DO %v", gotDO, hasOPT && do)
		}
		switch {
		case hasOPT && r.Rcode != rcode:
			t.Fatalf("rcode %d, resolver said %d", r.Rcode, rcode)
		case !hasOPT && rcode <= 0xF && r.Rcode != rcode:
			t.Fatalf("rcode %d, resolver said %d", r.Rcode, rcode)
		case !hasOPT && rcode > 0xF && r.Rcode != dns.RcodeServerFailure:
			t.Fatalf("extended rcode %d without EDNS answered %s, want SERVFAIL", rcode, dns.RcodeToString[r.Rcode])
		}

		limit := dns.MaxMsgSize
		if !tcp {
			limit = dns.MinMsgSize
			if hasOPT {
				limit = max(dns.MinMsgSize, min(int(size), ours))
			}
		}
		if len(out) > limit {
			t.Fatalf("%d-byte response over a %d-byte limit", len(out), limit)
		}
		if tcp && r.Truncated {
			t.Fatal("TC=1 over TCP")
		}
		if r.Truncated != (len(r.Answer) < n) {
			t.Fatalf("TC=%v with %d of %d answers", r.Truncated, len(r.Answer), n)
		}
	})
}
