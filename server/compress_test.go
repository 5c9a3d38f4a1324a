package server

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/dnsd/dnsd/authority"
	"github.com/dnsd/dnsd/config"
	"github.com/dnsd/dnsd/pipeline"
)

// compressCases are responses of the shapes dnsd answers with.
func compressCases(t testing.TB) map[string]*dns.Msg {
	rr := func(s string) dns.RR {
		r, err := dns.NewRR(s)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	msg := func(qname string, qtype uint16, sections ...[]string) *dns.Msg {
		m := new(dns.Msg)
		m.SetQuestion(qname, qtype)
		m.Response, m.Authoritative = true, true
		for i, sec := range sections {
			for _, s := range sec {
				switch i {
				case 0:
					m.Answer = append(m.Answer, rr(s))
				case 1:
					m.Ns = append(m.Ns, rr(s))
				default:
					m.Extra = append(m.Extra, rr(s))
				}
			}
		}
		return m
	}
	var txt []string
	for i := range 40 {
		txt = append(txt, fmt.Sprintf("big.example.test. 60 IN TXT \"record number %d of forty, some text\"", i))
	}
	cases := map[string]*dns.Msg{
		"A":           msg("db.example.internal.", dns.TypeA, []string{"db.example.internal. 30 IN A 10.0.0.10"}),
		"mixed case":  msg("Db.EXAMPLE.internal.", dns.TypeA, []string{"db.example.internal. 30 IN A 10.0.0.10", "db.example.internal. 30 IN A 10.0.0.11"}),
		"40 TXT":      msg("big.example.test.", dns.TypeTXT, txt),
		"NXDOMAIN":    msg("nope.example.test.", dns.TypeA, nil, []string{"example.test. 60 IN SOA ns1.example.test. hostmaster.example.test. 1 3600 600 86400 60"}),
		"CNAME chain": msg("www.example.test.", dns.TypeA, []string{"www.example.test. 60 IN CNAME web.example.test.", "web.example.test. 60 IN CNAME lb.cdn.example.net.", "lb.cdn.example.net. 60 IN A 192.0.2.1"}),
		"MX":          msg("example.test.", dns.TypeMX, []string{"example.test. 60 IN MX 10 mail.example.test.", "example.test. 60 IN MX 20 mail2.example.test."}, nil, []string{"mail.example.test. 60 IN A 192.0.2.25", "mail2.example.test. 60 IN A 192.0.2.26"}),
		"NS":          msg("example.test.", dns.TypeNS, []string{"example.test. 60 IN NS ns1.example.test.", "example.test. 60 IN NS ns2.example.test."}, nil, []string{"ns1.example.test. 60 IN A 192.0.2.53", "ns2.example.test. 60 IN AAAA 2001:db8::53"}),
		"SRV":         msg("_ldap._tcp.example.test.", dns.TypeSRV, []string{"_ldap._tcp.example.test. 60 IN SRV 0 5 389 dc1.example.test.", "_ldap._tcp.example.test. 60 IN SRV 0 5 389 dc2.example.test."}, nil, []string{"dc1.example.test. 60 IN A 192.0.2.1", "dc2.example.test. 60 IN A 192.0.2.2"}),
		"DNAME":       msg("a.old.example.test.", dns.TypeA, []string{"old.example.test. 60 IN DNAME new.example.net.", "a.old.example.test. 60 IN CNAME a.new.example.net.", "a.new.example.net. 60 IN A 192.0.2.7"}),
		"other types": msg("example.test.", dns.TypeANY, []string{
			"example.test. 60 IN HTTPS 1 svc.example.test. alpn=h2", "example.test. 60 IN MINFO rmail.example.test. email.example.test.",
			"example.test. 60 IN AFSDB 1 afs.example.test.", "example.test. 60 IN NSEC next.example.test. A NS SOA RRSIG NSEC",
			"example.test. 60 IN RRSIG A 13 2 60 20300101000000 20200101000000 12345 example.test. dGVzdA==",
			"example.test. 60 IN SOA ns1.example.test. hostmaster.example.test. 1 3600 600 86400 60",
		}, nil, []string{"svc.example.test. 60 IN A 192.0.2.8", "next.example.test. 60 IN A 192.0.2.9", "afs.example.test. 60 IN A 192.0.2.10"}),
		"PTR": msg("10.0.0.10.in-addr.arpa.", dns.TypePTR, []string{"10.0.0.10.in-addr.arpa. 30 IN PTR db.example.internal."}),
	}
	cases["EDNS"] = cases["A"].Copy().SetEdns0(1232, true)
	return cases
}

// packed returns m packed, with names compressed by the library or not.
func packed(t testing.TB, m *dns.Msg, compress bool) []byte {
	t.Helper()
	c := m.Copy()
	c.Compress = compress
	b, err := c.Pack()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestCompressLikeTheLibrary: the compressor shortens the responses dnsd
// gives to at most the length of miekg/dns's compression (exactly it when
// the library finds every repetition), and they unpack to the same
// message; an SRV target is never shortened.
func TestCompressLikeTheLibrary(t *testing.T) {
	var c compressor
	for name, m := range compressCases(t) {
		plain, lib := packed(t, m, false), packed(t, m, true)
		got, ok := c.compress(append([]byte(nil), plain...))
		if !ok {
			t.Fatalf("%s: not compressed", name)
		}
		if len(got) > len(lib) {
			t.Errorf("%s: %d bytes compressed, the library's %d (%d uncompressed)", name, len(got), len(lib), len(plain))
		}
		if len(got) != len(lib) {
			t.Errorf("%s: %d bytes compressed, want the library's %d", name, len(got), len(lib))
		}
		checkSameMessage(t, plain, got)
		if name == "SRV" {
			var back dns.Msg
			if err := back.Unpack(got); err != nil {
				t.Fatal(err)
			}
			for _, rr := range back.Answer {
				if rdlen := rr.Header().Rdlength; rdlen != 6+18 {
					t.Errorf("SRV RDLENGTH %d, want 24: its target compressed", rdlen)
				}
			}
		}
	}
	// The mixed-case question: the owners, in lower case, are not made
	// to point at it (a pointer would give them the question's case).
	m := compressCases(t)["mixed case"]
	plain := packed(t, m, false)
	got, _ := c.compress(append([]byte(nil), plain...))
	var back dns.Msg
	if err := back.Unpack(got); err != nil {
		t.Fatal(err)
	}
	for _, rr := range back.Answer {
		if n := rr.Header().Name; n != strings.ToLower(n) {
			t.Errorf("mixed case: owner %q, want it as written, in lower case", n)
		}
	}
}

// TestCompressRefusesWhatItCannotRead: a message with pointers already,
// trailing bytes or a bad name, or a signed one, is refused (finish then
// packs it as written, or by the library).
func TestCompressRefusesWhatItCannotRead(t *testing.T) {
	var c compressor
	m := compressCases(t)["MX"]
	lib := packed(t, m, true)
	plain := packed(t, m, false)
	signed := m.Copy()
	signed.SetTsig("key.example.test.", dns.HmacSHA256, 300, 1700000000)
	for name, in := range map[string][]byte{
		"signed":         packed(t, signed, false),
		"compressed":     lib,
		"trailing bytes": append(append([]byte(nil), plain...), 0),
		"cut short":      plain[:len(plain)-3],
		"label over 63":  append(append(append([]byte(nil), plain[:12]...), 64), plain[13:]...),
		"header only":    plain[:11],
	} {
		if _, ok := c.compress(in); ok {
			t.Errorf("%s: compressed", name)
		}
	}
}

// TestCompressTableBound: past compressNames remembered names, later ones
// are still shortened to the remembered ones, and past 16 KiB nothing is
// pointed at; the message stays right.
func TestCompressTableBound(t *testing.T) {
	m := new(dns.Msg)
	m.SetQuestion("example.test.", dns.TypeA)
	for i := range 3 * compressNames {
		m.Answer = append(m.Answer, &dns.A{
			Hdr: dns.RR_Header{Name: fmt.Sprintf("h%d.example.test.", i), Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60},
			A:   net.IPv4(192, 0, 2, 1).To4(),
		})
	}
	plain := packed(t, m, false)
	var c compressor
	got, ok := c.compress(append([]byte(nil), plain...))
	if !ok {
		t.Fatal("not compressed")
	}
	checkSameMessage(t, plain, got)
	// Every owner is at most its first label and a pointer to the zone.
	if max := 12 + 18 + len(m.Answer)*(1+4+2+10+4); len(got) > max {
		t.Errorf("%d bytes, want at most %d", len(got), max)
	}
	if c.names > compressNames {
		t.Errorf("%d names remembered, bound %d", c.names, compressNames)
	}

	// Past 16 KiB names are not pointed at: 300 TXT records of their own
	// names, 40 KB.
	m = new(dns.Msg)
	m.SetQuestion("example.test.", dns.TypeTXT)
	for i := range 300 {
		name := fmt.Sprintf("t%d.example.test.", i)
		m.Answer = append(m.Answer, &dns.TXT{
			Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeTXT, Class: dns.ClassINET, Ttl: 60},
			Txt: []string{strings.Repeat("x", 100)},
		}, &dns.CNAME{
			Hdr:    dns.RR_Header{Name: "alias." + name, Rrtype: dns.TypeCNAME, Class: dns.ClassINET, Ttl: 60},
			Target: name,
		})
	}
	plain = packed(t, m, false)
	if got, ok = c.compress(append([]byte(nil), plain...)); !ok {
		t.Fatal("not compressed")
	}
	checkSameMessage(t, plain, got)
	// The first name past 16 KiB (records of the root before it) is not
	// pointed at by the next one.
	r := new(dns.Msg)
	r.SetQuestion(".", dns.TypeTXT)
	for range 200 {
		r.Answer = append(r.Answer, &dns.TXT{Hdr: dns.RR_Header{Name: ".", Rrtype: dns.TypeTXT, Class: dns.ClassINET}, Txt: []string{strings.Repeat("y", 100)}})
	}
	for range 2 {
		r.Answer = append(r.Answer, &dns.A{Hdr: dns.RR_Header{Name: "late.example.test.", Rrtype: dns.TypeA, Class: dns.ClassINET}, A: net.IPv4(192, 0, 2, 1).To4()})
	}
	late := packed(t, r, false)
	if got, ok := c.compress(append([]byte(nil), late...)); !ok {
		t.Fatal("not compressed")
	} else {
		checkSameMessage(t, late, got)
	}

	// The library, remembering every name, gets 0.6 % further (43,120
	// bytes against 43,360 of 54,900).
	if lib := packed(t, m, true); len(plain) < 40000 || len(got) > len(lib)*101/100 {
		t.Errorf("%d bytes (%d as written), the library's %d", len(got), len(plain), len(lib))
	}
}

// checkSameMessage requires that the compressed message got unpacks to the
// message plain holds: packed again as written, the same bytes but for the
// case of letters (a name pointing at an earlier one takes its spelling),
// and record by record the same to miekg/dns, which compares names without
// case (and the TTLs too).
func checkSameMessage(t testing.TB, plain, got []byte) {
	t.Helper()
	var a, b dns.Msg
	if err := a.Unpack(plain); err != nil {
		t.Fatalf("input does not unpack: %v", err)
	}
	if err := b.Unpack(got); err != nil {
		t.Fatalf("compressed message does not unpack: %v\nin:  %x\nout: %x", err, plain, got)
	}
	again, err := b.Pack()
	if err != nil {
		t.Fatalf("compressed message does not pack again: %v", err)
	}
	if !bytes.Equal(again, plain) {
		t.Fatalf("compressed message differs:\nin:  %x\nout: %x\nback: %x", plain, got, again)
	}
	if a.MsgHdr != b.MsgHdr || len(a.Question) != len(b.Question) || len(a.Answer) != len(b.Answer) || len(a.Ns) != len(b.Ns) || len(a.Extra) != len(b.Extra) {
		t.Fatalf("compressed message differs:\n%v\n%v", &a, &b)
	}
	for i := range a.Question {
		qa, qb := a.Question[i], b.Question[i]
		if qa.Name != qb.Name || qa.Qtype != qb.Qtype || qa.Qclass != qb.Qclass {
			t.Fatalf("question %d: %v, want %v", i, qb, qa)
		}
	}
	for _, s := range [][2][]dns.RR{{a.Answer, b.Answer}, {a.Ns, b.Ns}, {a.Extra, b.Extra}} {
		for i := range s[0] {
			x, y := s[0][i], s[1][i]
			if x.Header().Ttl != y.Header().Ttl || !sameRR(x, y) {
				t.Fatalf("record %d: %v, want %v", i, y, x)
			}
		}
	}
}

// sameRR: x and y are the same record, names spelled the same (a pointer
// never changes a name's case).
func sameRR(x, y dns.RR) bool { return x.String() == y.String() }

// FuzzCompress checks the compressor against miekg/dns on any message the
// library reads: packed as written, it is compressed unless it is signed,
// never longer, and unpacks to the same message (checkSameMessage). One compressor
// serves every input, as a scratch's serves every query.
func FuzzCompress(f *testing.F) {
	var c compressor // seeds: testdata/fuzz/FuzzCompress
	f.Fuzz(func(t *testing.T, in []byte) {
		var m dns.Msg
		if m.Unpack(in) != nil {
			return
		}
		plain, err := m.Pack()
		if err != nil {
			return
		}
		if m.Unpack(plain) != nil {
			return // the library packs what it cannot read back
		}
		got, ok := c.compress(append([]byte(nil), plain...))
		if !ok {
			for _, rr := range slices.Concat(m.Answer, m.Ns, m.Extra) {
				if t := rr.Header().Rrtype; t == dns.TypeTSIG || t == dns.TypeSIG {
					return // signed: refused
				}
			}
			t.Fatalf("refused what the library packed: %x", plain)
		}
		if len(got) > len(plain) {
			t.Fatalf("compressed %d bytes into %d", len(plain), len(got))
		}
		checkSameMessage(t, plain, got)
	})
}

// rawTCP sends the query b over a new TCP connection to addr and returns
// the answer's bytes.
func rawTCP(t *testing.T, addr string, b []byte) []byte {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write(append(binary.BigEndian.AppendUint16(nil, uint16(len(b))), b...)); err != nil {
		t.Fatal(err)
	}
	var n [2]byte
	if _, err := io.ReadFull(c, n[:]); err != nil {
		t.Fatal(err)
	}
	out := make([]byte, binary.BigEndian.Uint16(n[:]))
	if _, err := io.ReadFull(c, out); err != nil {
		t.Fatal(err)
	}
	return out
}

// libraryLen is the length of r packed with miekg/dns's compression.
func libraryLen(t *testing.T, r *dns.Msg) int {
	t.Helper()
	return len(packed(t, r, true))
}

// TestAnswersCompressed: what a client receives is compressed: a name's A
// answer over UDP, with and without EDNS, and a 40-record TXT answer over
// TCP are as long as miekg/dns's compression makes them.
func TestAnswersCompressed(t *testing.T) {
	txt := func(req *pipeline.Request) pipeline.Response {
		m := new(dns.Msg)
		m.Authoritative = true
		for i := range 40 {
			m.Answer = append(m.Answer, &dns.TXT{
				Hdr: dns.RR_Header{Name: req.Name, Rrtype: dns.TypeTXT, Class: dns.ClassINET, Ttl: 60},
				Txt: []string{fmt.Sprintf("record number %d of forty, with some text to it", i)},
			})
		}
		return pipeline.Response{Msg: m, Zone: "example.test.", Source: "fake"}
	}
	res := &fakeResolver{fn: func(_ context.Context, req *pipeline.Request) pipeline.Response {
		if req.Type == dns.TypeTXT {
			return txt(req)
		}
		return answerA(req, 1)
	}}
	ts := startServer(t, res, loopbackUDPTCP(), Settings{ACL: config.ACL{Default: true}})
	udp, tcp := ts.addr(t, "udp"), ts.addr(t, "tcp")
	for _, edns := range []bool{false, true} {
		q := query("db.example.internal.", dns.TypeA)
		if edns {
			q.SetEdns0(1232, false)
		}
		raw := rawUDP(t, udp, pack(t, q))
		r := new(dns.Msg)
		if err := r.Unpack(raw); err != nil || len(r.Answer) != 1 || r.Truncated {
			t.Fatalf("EDNS %v: %v: %v", edns, err, r)
		}
		want := libraryLen(t, r)
		if len(raw) != want {
			t.Errorf("A over UDP, EDNS %v: %d bytes, want %d (compressed; %d as written)", edns, len(raw), want, len(packed(t, r, false)))
		}
	}
	raw := rawTCP(t, tcp, pack(t, query("big.example.test.", dns.TypeTXT)))
	r := new(dns.Msg)
	if err := r.Unpack(raw); err != nil || len(r.Answer) != 40 {
		t.Fatalf("TXT over TCP: %v: %d records", err, len(r.Answer))
	}
	if want := libraryLen(t, r); len(raw) != want {
		t.Errorf("40 TXT over TCP: %d bytes, want %d (compressed; %d as written)", len(raw), want, len(packed(t, r, false)))
	}
}

// TestTruncatedOnlyWhenCompressedExceeds: over UDP without EDNS (512
// bytes), an answer of 29 A records fits once compressed (502 bytes; 1,082
// as written) and comes whole, TC=0; 30 (517 bytes) come truncated to
// fit, TC=1.
func TestTruncatedOnlyWhenCompressedExceeds(t *testing.T) {
	res := &fakeResolver{fn: func(_ context.Context, req *pipeline.Request) pipeline.Response {
		n := 29
		if strings.HasPrefix(req.Name, "thirty.") {
			n = 30
		}
		return answerA(req, n)
	}}
	ts := startServer(t, res, loopbackUDPTCP(), Settings{ACL: config.ACL{Default: true}})
	udp := ts.addr(t, "udp")
	for _, tc := range []struct {
		name string
		n    int
		tc   bool
	}{{"twenty9.example.test.", 29, false}, {"thirty.example.test.", 30, true}} {
		raw := rawUDP(t, udp, pack(t, query(tc.name, dns.TypeA)))
		r := new(dns.Msg)
		if err := r.Unpack(raw); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if r.Truncated != tc.tc || len(raw) > dns.MinMsgSize || (!tc.tc && len(r.Answer) != tc.n) || (tc.tc && len(r.Answer) >= tc.n) {
			t.Errorf("%s: %d bytes, TC=%v, %d records; want TC=%v", tc.name, len(raw), r.Truncated, len(r.Answer), tc.tc)
		}
		if o := ts.rec.last(t); o.Truncated != tc.tc {
			t.Errorf("%s: observed Truncated %v", tc.name, o.Truncated)
		}
	}
}

// TestPackCompressedAllocations: an answer resolved and packed, not taken
// from the kept answers, is compressed and allocates nothing: a hit, a
// NODATA and an NXDOMAIN with its SOA.
func TestPackCompressedAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts differ under the race detector")
	}
	s := pipelineServer(t)
	s.answers = nil // every query packed
	client := netip.MustParseAddr("127.0.0.1")
	sc := &scratch{}
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		qtype uint16
	}{
		{"www.example.test.", dns.TypeA},
		{"www.example.test.", dns.TypeAAAA},
		{"nope.example.test.", dns.TypeA},
	} {
		q := query(tc.name, tc.qtype)
		q.SetEdns0(1232, false)
		in := pack(t, q)
		out := s.serveRaw(ctx, sc, protoUDP, client, true, in)
		var m dns.Msg
		if err := m.Unpack(out); err != nil {
			t.Fatalf("%s %d: %v", tc.name, tc.qtype, err)
		}
		if want := len(packed(t, &m, true)); len(out) != want {
			t.Errorf("%s %s: %d bytes, want %d (compressed)", tc.name, dns.TypeToString[tc.qtype], len(out), want)
		}
		s.release(sc)
		if n := testing.AllocsPerRun(200, func() {
			if out := s.serveRaw(ctx, sc, protoUDP, client, true, in); len(out) == 0 {
				t.Fatal("no answer")
			}
			s.release(sc)
		}); n != 0 {
			t.Errorf("%s %s: %v allocs per query, want 0", tc.name, dns.TypeToString[tc.qtype], n)
		}
	}
}

// BenchmarkCompress is the compressor alone on a packed response: one A
// record, and 40 TXT records of one name.
func BenchmarkCompress(b *testing.B) {
	cases := compressCases(b)
	for _, name := range []string{"A", "40 TXT"} {
		plain := packed(b, cases[name], false)
		buf := make([]byte, len(plain))
		var c compressor
		b.Run(strings.ReplaceAll(name, " ", ""), func(b *testing.B) {
			b.SetBytes(int64(len(plain)))
			b.ReportAllocs()
			for b.Loop() {
				copy(buf, plain)
				c.compress(buf)
			}
		})
	}
}

// TestSignedAnswerCompressed: an answer to a TSIG-signed query is
// compressed too (by the library, before it is signed), and its signature
// verifies.
func TestSignedAnswerCompressed(t *testing.T) {
	const secret = "c2VjcmV0LXNlY3JldC1zZWNyZXQ="
	src := &listSource{rrs: []dns.RR{&dns.A{Hdr: dns.RR_Header{Name: "host.example.test.", Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60}, A: []byte{10, 0, 0, 1}}}}
	p, err := pipeline.New([]pipeline.ZoneSpec{{Names: []string{"example.test."}, Sources: []pipeline.SourceEntry{{Source: src}}}},
		pipeline.Options{})
	if err != nil {
		t.Fatal(err)
	}
	auth := zonesOf(t, p, authority.TransferSpec{
		Zones: []string{"example.test."}, Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")},
		Key: &authority.TSIGKey{Name: "k.", Algorithm: dns.HmacSHA256, Secret: secret},
	})
	rec := &recorder{}
	s := New(Options{Resolver: p, Authority: auth, Observer: rec})
	if err := s.Apply(context.Background(), loopbackUDPTCP(), Settings{ACL: config.ACL{Default: true}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Shutdown(context.Background()) })
	ts := &testServer{Server: s, rec: rec}

	q := query("host.example.test.", dns.TypeA)
	q.SetTsig("k.", dns.HmacSHA256, 300, time.Now().Unix())
	wire, mac, err := dns.TsigGenerate(q, secret, "", false)
	if err != nil {
		t.Fatal(err)
	}
	raw := rawUDP(t, ts.addr(t, "udp"), wire)
	var r dns.Msg
	if err := r.Unpack(raw); err != nil || len(r.Answer) != 1 || r.IsTsig() == nil {
		t.Fatalf("signed answer: %v: %v", err, &r)
	}
	if err := dns.TsigVerify(raw, secret, mac, false); err != nil {
		t.Errorf("signature: %v", err)
	}
	name := []byte("\x04host\x07example\x04test\x00")
	if n := strings.Count(string(raw), string(name)); n != 1 {
		t.Errorf("the name written out %d times, want once (the question)", n)
	}
}
