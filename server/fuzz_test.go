package server

import (
	"context"
	"encoding/binary"
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/miekg/dns"

	"github.com/dnsd/dnsd/config"
	"github.com/dnsd/dnsd/pipeline"
)

// FuzzServeRaw feeds raw bytes through the packet handler: it must never
// panic, never answer what miekg/dns cannot unpack or a response, and
// whatever it answers must unpack and echo the query's ID.
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
	seed(query(".", dns.TypeNS))
	m = query("A-b_c.*.Example.TEST.", dns.TypeAAAA)
	m.SetEdns0(512, true)
	m.IsEdns0().SetExtendedRcode(dns.RcodeBadVers)
	seed(m)
	m = query("example.test.", dns.TypeA)
	m.SetEdns0(1232, false)
	m.IsEdns0().Option = append(m.IsEdns0().Option, &dns.EDNS0_COOKIE{Code: dns.EDNS0COOKIE, Cookie: "0102030405060708"})
	seed(m)

	res := &fakeResolver{fn: func(_ context.Context, req *pipeline.Request) pipeline.Response {
		r := answerA(req, 60) // large enough to need truncation over UDP
		r.Msg.Extra = append(r.Msg.Extra, &dns.TXT{Hdr: dns.RR_Header{Name: req.Name, Rrtype: dns.TypeTXT, Class: dns.ClassINET}, Txt: []string{"x"}})
		return r
	}}
	s := New(Options{Resolver: res})
	s.set.Store(compile(Settings{ACL: config.ACL{Default: true}, Limits: config.Limits{RatePerClient: 1000}}))
	client := netip.MustParseAddr("10.0.0.1")
	sc := &scratch{}
	var sc2 scratch // for the parser check: keeps the last name across inputs
	f.Fuzz(func(t *testing.T, in []byte, tcp bool) {
		checkParse(t, &sc2, in)
		proto := protoUDP
		if tcp {
			proto = protoTCP
		}
		out := s.serveRaw(context.Background(), sc, proto, client, false, in)
		defer s.release(sc)
		// Unparseable packets and responses are never answered.
		if _, err := unpackRef(in); err != nil || in[2]&0x80 != 0 {
			if out != nil {
				t.Fatalf("answered a packet that is unparseable (%v) or a response", err)
			}
			return
		}
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

// checkParse checks the fast parser against miekg/dns Unpack on in: the
// same accept/reject decision and, when the fast path decodes the packet,
// the same header, question and EDNS0 fields.
// unpackRef is the reference parse of a query: miekg/dns's Unpack, and a
// header whose counts the sections match (Unpack takes a count past the
// message's end for a lie; dnsd drops such a message as unparseable).
func unpackRef(in []byte) (*dns.Msg, error) {
	m := new(dns.Msg)
	if err := m.Unpack(in); err != nil {
		// An OPT whose options are well framed but that miekg/dns cannot
		// decode is read without them (see parseQuery).
		s := optionsStripped(in)
		if s == nil {
			return m, err
		}
		m = new(dns.Msg)
		if err := m.Unpack(s); err != nil {
			return m, err
		}
		in = s
	}
	if int(binary.BigEndian.Uint16(in[4:])) != len(m.Question) || int(binary.BigEndian.Uint16(in[6:])) != len(m.Answer) ||
		int(binary.BigEndian.Uint16(in[8:])) != len(m.Ns) || int(binary.BigEndian.Uint16(in[10:])) != len(m.Extra) {
		return m, errors.New("the header counts more records than the message holds")
	}
	return m, nil
}

func checkParse(t *testing.T, sc *scratch, in []byte) {
	t.Helper()
	ref, refErr := unpackRef(in)
	for range 2 { // the second round reuses the cached name
		q, lower, ok := sc.parseQuery(in)
		if ok != (refErr == nil) {
			t.Fatalf("parseQuery ok=%v, Unpack error %v", ok, refErr)
		}
		if !ok {
			break
		}
		if q.MsgHdr != ref.MsgHdr {
			t.Fatalf("header %+v, Unpack %+v", q.MsgHdr, ref.MsgHdr)
		}
		if !slices.Equal(q.Question, ref.Question) {
			t.Fatalf("question %v, Unpack %v", q.Question, ref.Question)
		}
		if len(q.Question) == 1 && lower != strings.ToLower(ref.Question[0].Name) {
			t.Fatalf("lower-case name %q for %q", lower, ref.Question[0].Name)
		}
		if len(q.Answer) != len(ref.Answer) || len(q.Ns) != len(ref.Ns) || len(q.Extra) != len(ref.Extra) {
			t.Fatalf("sections %d/%d/%d, Unpack %d/%d/%d", len(q.Answer), len(q.Ns), len(q.Extra), len(ref.Answer), len(ref.Ns), len(ref.Extra))
		}
		qo, ro := q.IsEdns0(), ref.IsEdns0()
		if (qo == nil) != (ro == nil) {
			t.Fatalf("OPT %v, Unpack %v", qo, ro)
		}
		if qo != nil && (qo.Hdr != ro.Hdr || len(qo.Option) != len(ro.Option) || qo.Do() != ro.Do() || qo.Version() != ro.Version() || qo.UDPSize() != ro.UDPSize()) {
			t.Fatalf("OPT %v, Unpack %v", qo, ro)
		}
		sc.q.msg = dns.Msg{}
	}
	if _, _, fast := sc.q.fast(in); fast && refErr != nil {
		t.Fatalf("fast path accepts what Unpack rejects: %v", refErr)
	}
}

// TestParseQueryFastPath: the usual queries take the fast path (no
// miekg/dns Unpack) and allocate nothing once their name is cached.
func TestParseQueryFastPath(t *testing.T) {
	for _, tc := range []struct {
		name string
		edns bool
		fast bool
	}{
		{"www.example.test.", true, true},
		{"WWW.Example.Test.", false, true},
		{".", true, true},
		{"_sip._udp.example.test.", true, true},
		{"a\\.b.example.test.", true, false},
	} {
		m := query(tc.name, dns.TypeA)
		if tc.edns {
			m.SetEdns0(1232, true)
		}
		b, err := m.Pack()
		if err != nil {
			t.Fatal(err)
		}
		var sc scratch
		_, _, fast := sc.q.fast(b)
		if fast != tc.fast {
			t.Errorf("%s: fast path %v, want %v", tc.name, fast, tc.fast)
		}
		checkParse(t, &sc, b)
		if tc.fast {
			if n := testing.AllocsPerRun(100, func() { sc.parseQuery(b) }); n != 0 {
				t.Errorf("%s: %v allocations per parse, want 0", tc.name, n)
			}
		}
	}
}
