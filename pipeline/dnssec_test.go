package pipeline

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/miekg/dns"
)

// signedFake is a pre-signed zone file as a source: a fakeSource holding
// every record of a zone signed by dnssec-signzone (testdata), its own
// SOA, and its NSEC and NSEC3 owners in order (Presigned).
type signedFake struct {
	*fakeSource
	apex   string
	soa    *dns.SOA
	nsec   []string
	nsec3  []string // hashes, lower case
	owner3 []string
}

func newSignedFake(t *testing.T, apex, file string) *signedFake {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	f := &signedFake{fakeSource: newFake(t, "file", 60, 1), apex: apex}
	zp := dns.NewZoneParser(strings.NewReader(string(data)), apex, file)
	for rr, ok := zp.Next(); ok; rr, ok = zp.Next() {
		h := rr.Header()
		h.Name = strings.ToLower(h.Name)
		if !slices.ContainsFunc(f.rrs[h.Name], func(x dns.RR) bool { return x.Header().Rrtype == h.Rrtype }) {
			switch h.Rrtype {
			case dns.TypeNSEC:
				f.nsec = append(f.nsec, h.Name)
			case dns.TypeNSEC3:
				f.owner3 = append(f.owner3, h.Name)
			}
		}
		f.rrs[h.Name] = append(f.rrs[h.Name], rr)
		if soa, ok := rr.(*dns.SOA); ok {
			f.soa = soa
		}
	}
	if err := zp.Err(); err != nil {
		t.Fatal(err)
	}
	f.entsBelow(apex)
	slices.SortFunc(f.nsec, CanonicalCompare)
	slices.Sort(f.owner3)
	for _, o := range f.owner3 {
		f.nsec3 = append(f.nsec3, o[:strings.IndexByte(o, '.')])
	}
	return f
}

func (f *signedFake) SOA(zone string) (*dns.SOA, bool) { return f.soa, zone == f.apex }

func (f *signedFake) Presigned(zone string) bool {
	return zone == f.apex && slices.ContainsFunc(f.rrs[zone], func(rr dns.RR) bool { return rr.Header().Rrtype == dns.TypeDNSKEY })
}

func (f *signedFake) NSEC(zone, name string) []dns.RR {
	return f.rrs[lastBefore(f.nsec, f.nsec, name, CanonicalCompare)]
}

func (f *signedFake) NSEC3(zone, hash string) []dns.RR {
	return f.rrs[lastBefore(f.nsec3, f.owner3, hash, strings.Compare)]
}

// lastBefore is the owner of the last key at or before key, wrapping.
func lastBefore(keys, owners []string, key string, cmp func(a, b string) int) string {
	best := len(keys) - 1
	for i, k := range keys {
		if cmp(k, key) <= 0 {
			best = i
		}
	}
	if best < 0 {
		return ""
	}
	return owners[best]
}

func signedPipeline(t *testing.T, apex, file string) (*Pipeline, *signedFake) {
	t.Helper()
	src := newSignedFake(t, apex, file)
	p, err := New([]ZoneSpec{{Names: []string{apex}, Sources: []SourceEntry{{Source: src, Fallthrough: true}}}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return p, src
}

func queryDO(p *Pipeline, qname string, qtype uint16, do bool) *dns.Msg {
	m := new(dns.Msg)
	m.SetQuestion(qname, qtype)
	m.SetEdns0(1232, do)
	return p.Resolve(context.Background(), &Request{Msg: m, Name: strings.ToLower(qname), Type: qtype, DO: do}).Msg
}

// shape lists a section as "owner TYPE" ("owner RRSIG:COVERED").
func shape(rrs []dns.RR) []string {
	out := make([]string, 0, len(rrs))
	for _, rr := range rrs {
		h := rr.Header()
		s := h.Name + " " + dns.TypeToString[h.Rrtype]
		if sig, ok := rr.(*dns.RRSIG); ok {
			s += ":" + dns.TypeToString[sig.TypeCovered]
		}
		out = append(out, s)
	}
	return out
}

// verifySigs checks every RRSIG of m's answer and authority sections
// against the zone's DNSKEYs and the RRset it covers there (miekg/dns
// reconstructs a wildcard's owner from the label count).
func verifySigs(t *testing.T, m *dns.Msg, keys []dns.RR) {
	t.Helper()
	for _, sec := range [][]dns.RR{m.Answer, m.Ns} {
		for _, rr := range sec {
			sig, ok := rr.(*dns.RRSIG)
			if !ok {
				continue
			}
			var set []dns.RR
			for _, x := range sec {
				if x.Header().Rrtype == sig.TypeCovered && strings.EqualFold(x.Header().Name, sig.Hdr.Name) {
					c := dns.Copy(x)
					c.Header().Ttl = sig.OrigTtl
					set = append(set, c)
				}
			}
			if len(set) == 0 {
				t.Errorf("%s: RRSIG without its RRset", shape([]dns.RR{sig}))
				continue
			}
			good := false
			for _, k := range keys {
				if key, ok := k.(*dns.DNSKEY); ok && key.KeyTag() == sig.KeyTag && sig.Verify(key, set) == nil {
					good = true
				}
			}
			if !good {
				t.Errorf("RRSIG %s over %s does not verify", sig, shape(set))
			}
		}
	}
}

// TestPresignedNSEC: a zone file signed beforehand (NSEC) is served as a
// signed zone to DO=1 queries — each RRset with its RRSIGs, denials with
// the SOA's RRSIG and the NSEC records that prove them — and as before to
// DO=0 queries; AD is never set.
func TestPresignedNSEC(t *testing.T) {
	p, src := signedPipeline(t, "signed.example.", "testdata/signed.example.signed")
	keys := src.rrs["signed.example."]
	cases := []struct {
		name   string
		qtype  uint16
		rcode  int
		answer []string
		ns     []string
	}{
		{"www.signed.example.", dns.TypeA, dns.RcodeSuccess,
			[]string{"www.signed.example. A", "www.signed.example. RRSIG:A"}, nil},
		{"WWW.Signed.example.", dns.TypeA, dns.RcodeSuccess, // owners as the client wrote them
			[]string{"WWW.Signed.example. A", "WWW.Signed.example. RRSIG:A"}, nil},
		{"signed.example.", dns.TypeSOA, dns.RcodeSuccess,
			[]string{"signed.example. SOA", "signed.example. RRSIG:SOA"}, nil},
		{"signed.example.", dns.TypeDNSKEY, dns.RcodeSuccess,
			[]string{"signed.example. DNSKEY", "signed.example. DNSKEY", "signed.example. RRSIG:DNSKEY", "signed.example. RRSIG:DNSKEY"}, nil},
		{"alias.signed.example.", dns.TypeA, dns.RcodeSuccess,
			[]string{"alias.signed.example. CNAME", "alias.signed.example. RRSIG:CNAME", "www.signed.example. A", "www.signed.example. RRSIG:A"}, nil},
		{"nope.signed.example.", dns.TypeA, dns.RcodeNameError, nil,
			// the NSEC covering nope (mail → ns1), the one covering *.signed.example (apex → alias)
			[]string{"signed.example. SOA", "signed.example. RRSIG:SOA", "mail.signed.example. NSEC", "mail.signed.example. RRSIG:NSEC",
				"signed.example. NSEC", "signed.example. RRSIG:NSEC"}},
		{"mail.signed.example.", dns.TypeAAAA, dns.RcodeSuccess, nil,
			[]string{"signed.example. SOA", "signed.example. RRSIG:SOA", "mail.signed.example. NSEC", "mail.signed.example. RRSIG:NSEC"}},
		{"deep.signed.example.", dns.TypeA, dns.RcodeSuccess, nil, // an empty non-terminal: the NSEC before it, to sub.deep
			[]string{"signed.example. SOA", "signed.example. RRSIG:SOA", "*.apps.signed.example. NSEC", "*.apps.signed.example. RRSIG:NSEC"}},
		{"x.apps.signed.example.", dns.TypeA, dns.RcodeSuccess,
			[]string{"x.apps.signed.example. A", "x.apps.signed.example. RRSIG:A"},
			[]string{"*.apps.signed.example. NSEC", "*.apps.signed.example. RRSIG:NSEC"}},
		{"x.apps.signed.example.", dns.TypeTXT, dns.RcodeSuccess, nil,
			[]string{"signed.example. SOA", "signed.example. RRSIG:SOA", "*.apps.signed.example. NSEC", "*.apps.signed.example. RRSIG:NSEC"}},
	}
	for _, c := range cases {
		m := queryDO(p, c.name, c.qtype, true)
		if m.Rcode != c.rcode || !m.Authoritative || m.AuthenticatedData {
			t.Errorf("%s %s DO=1: rcode %s AA %v AD %v, want %s AA true AD false", c.name, dns.TypeToString[c.qtype],
				dns.RcodeToString[m.Rcode], m.Authoritative, m.AuthenticatedData, dns.RcodeToString[c.rcode])
		}
		if got := shape(m.Answer); !slices.Equal(got, c.answer) {
			t.Errorf("%s %s DO=1 answer:\n got %q\nwant %q", c.name, dns.TypeToString[c.qtype], got, c.answer)
		}
		if got := shape(m.Ns); !slices.Equal(got, c.ns) {
			t.Errorf("%s %s DO=1 authority:\n got %q\nwant %q", c.name, dns.TypeToString[c.qtype], got, c.ns)
		}
		verifySigs(t, m, keys)

		// DO=0: the same answer without DNSSEC records.
		m = queryDO(p, c.name, c.qtype, false)
		for _, rr := range append(slices.Clone(m.Answer), m.Ns...) {
			if t := rr.Header().Rrtype; t == dns.TypeRRSIG || t == dns.TypeNSEC {
				c.rcode = -1
			}
		}
		if c.rcode == -1 || m.AuthenticatedData {
			t.Errorf("%s %s DO=0: DNSSEC records or AD in %v", c.name, dns.TypeToString[c.qtype], m)
		}
	}
	// Asked for, they are data with DO=0 too.
	if m := queryDO(p, "mail.signed.example.", dns.TypeNSEC, false); !slices.Equal(shape(m.Answer), []string{"mail.signed.example. NSEC"}) {
		t.Errorf("mail NSEC DO=0: %q", shape(m.Answer))
	}
}

// TestPresignedNSEC3: in an NSEC3 zone, denials carry the closest
// encloser proof (RFC 5155 section 7.2), checked here with miekg/dns's
// NSEC3 Match and Cover.
func TestPresignedNSEC3(t *testing.T) {
	p, src := signedPipeline(t, "nsec3.example.", "testdata/nsec3.example.signed")
	keys := src.rrs["nsec3.example."]
	type proof struct{ match, cover []string }
	cases := []struct {
		name  string
		qtype uint16
		rcode int
		want  proof
	}{
		// NXDOMAIN: the closest encloser (the apex) matched, the next
		// closer name and the wildcard at the apex covered.
		{"nope.nsec3.example.", dns.TypeA, dns.RcodeNameError, proof{[]string{"nsec3.example."}, []string{"nope.nsec3.example.", "*.nsec3.example."}}},
		{"a.b.sub.deep.nsec3.example.", dns.TypeA, dns.RcodeNameError,
			proof{[]string{"sub.deep.nsec3.example."}, []string{"b.sub.deep.nsec3.example.", "*.sub.deep.nsec3.example."}}},
		// NODATA: the NSEC3 at the name (an empty non-terminal has one).
		{"mail.nsec3.example.", dns.TypeAAAA, dns.RcodeSuccess, proof{[]string{"mail.nsec3.example."}, nil}},
		{"deep.nsec3.example.", dns.TypeA, dns.RcodeSuccess, proof{[]string{"deep.nsec3.example."}, nil}},
		// A wildcard answer: the next closer name covered.
		{"x.y.apps.nsec3.example.", dns.TypeA, dns.RcodeSuccess, proof{nil, []string{"y.apps.nsec3.example."}}},
		// A wildcard NODATA: the closest encloser and the wildcard
		// matched, the next closer name covered.
		{"x.apps.nsec3.example.", dns.TypeTXT, dns.RcodeSuccess, proof{[]string{"apps.nsec3.example.", "*.apps.nsec3.example."}, []string{"x.apps.nsec3.example."}}},
	}
	for _, c := range cases {
		m := queryDO(p, c.name, c.qtype, true)
		if m.Rcode != c.rcode || m.AuthenticatedData {
			t.Errorf("%s %s: rcode %s AD %v, want %s", c.name, dns.TypeToString[c.qtype], dns.RcodeToString[m.Rcode], m.AuthenticatedData, dns.RcodeToString[c.rcode])
		}
		var nsec3 []*dns.NSEC3
		for _, rr := range m.Ns {
			if n, ok := rr.(*dns.NSEC3); ok {
				nsec3 = append(nsec3, n)
			}
		}
		if want := len(c.want.match) + len(c.want.cover); len(nsec3) != want {
			t.Errorf("%s %s: %d NSEC3 records %q, want %d", c.name, dns.TypeToString[c.qtype], len(nsec3), shape(m.Ns), want)
		}
		for _, n := range c.want.match {
			if !slices.ContainsFunc(nsec3, func(r *dns.NSEC3) bool { return r.Match(n) }) {
				t.Errorf("%s %s: no NSEC3 matches %s", c.name, dns.TypeToString[c.qtype], n)
			}
		}
		for _, n := range c.want.cover {
			if !slices.ContainsFunc(nsec3, func(r *dns.NSEC3) bool { return r.Cover(n) }) {
				t.Errorf("%s %s: no NSEC3 covers %s", c.name, dns.TypeToString[c.qtype], n)
			}
		}
		verifySigs(t, m, keys)
		if m.Rcode == dns.RcodeSuccess && len(m.Answer) == 0 && !slices.Contains(shape(m.Ns), "nsec3.example. RRSIG:SOA") {
			t.Errorf("%s %s: NODATA without the SOA's RRSIG: %q", c.name, dns.TypeToString[c.qtype], shape(m.Ns))
		}
	}
}

// TestPresignedNeedsOwnSOA: DO=1 answers of a zone whose signing source
// is not its only local source stay unsigned (its SOA is dnsd's, which
// the file's signatures do not cover).
func TestPresignedNeedsOwnSOA(t *testing.T) {
	src := newSignedFake(t, "signed.example.", "testdata/signed.example.signed")
	hosts := newFake(t, "hosts", 60, 1, "other.signed.example. 60 IN A 10.9.9.9")
	p, err := New([]ZoneSpec{{Names: []string{"signed.example."}, Sources: []SourceEntry{{Source: src, Fallthrough: true}, {Source: hosts, Fallthrough: true}}}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if m := queryDO(p, "nope.signed.example.", dns.TypeA, true); len(m.Ns) != 1 {
		t.Errorf("NXDOMAIN of a merged zone: authority %q, want its SOA alone", shape(m.Ns))
	}
}

// TestCanonicalCompare: the order of RFC 4034 section 6.1's example.
func TestCanonicalCompare(t *testing.T) {
	ordered := []string{"example.", "a.example.", "yljkjljk.a.example.", "Z.a.example.", "zABC.a.EXAMPLE.",
		"z.example.", `\001.z.example.`, "*.z.example.", `\200.z.example.`}
	for i, a := range ordered {
		for j, b := range ordered {
			want := 0
			switch {
			case i < j:
				want = -1
			case i > j:
				want = 1
			}
			if got := CanonicalCompare(a, b); got != want {
				t.Errorf("CanonicalCompare(%q, %q) = %d, want %d", a, b, got, want)
			}
		}
	}
	if got := CanonicalCompare("a.example", "A.EXAMPLE."); got != 0 {
		t.Errorf("CanonicalCompare of one name in two cases = %d", got)
	}
}

// FuzzCanonicalCompare holds the comparison of names without escapes to
// the one of their wire form.
func FuzzCanonicalCompare(f *testing.F) {
	f.Add("a.example.", "Z.a.example.")
	f.Add("example.", "a.example.")
	f.Add("*.z.example.", "z.example.")
	f.Add("ab.", "a.b.")
	f.Fuzz(func(t *testing.T, a, b string) {
		if strings.ContainsRune(a+b, '\\') {
			return
		}
		if _, ok := dns.IsDomainName(a); !ok {
			return
		}
		if _, ok := dns.IsDomainName(b); !ok {
			return
		}
		if got, want := plainCompare(dns.Fqdn(a), dns.Fqdn(b)), wireCompare(a, b); got != want {
			t.Errorf("plainCompare(%q, %q) = %d, on the wire %d", a, b, got, want)
		}
	})
}
