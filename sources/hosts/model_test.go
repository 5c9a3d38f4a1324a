package hosts

import (
	"fmt"
	"maps"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/dnsd/dnsd/pipeline"
)

// A model of what an index answers, built the plain way (maps of rendered
// records, reverse names from miekg/dns) from the same (address, name)
// pairs, to check the compact index against.

type pair struct {
	addr netip.Addr
	name string
}

// model is what the index must answer: the records at each name, in order
// (nil for an empty non-terminal), forward and reverse apart.
type model struct {
	fwd, rev map[string][]string
	records  int
	wild     bool
}

func buildModel(t testing.TB, pairs []pair) *model {
	t.Helper()
	m := &model{fwd: map[string][]string{}, rev: map[string][]string{}}
	add := func(names map[string][]string, owner, rec string) {
		if slices.Contains(names[owner], rec) {
			return
		}
		names[owner] = append(names[owner], rec)
		m.records++
		for _, anc := range ancestors(owner) {
			if _, ok := names[anc]; !ok {
				names[anc] = nil
			}
		}
	}
	for _, p := range pairs {
		if p.addr.Is4() {
			add(m.fwd, p.name, "A "+p.addr.String())
		} else {
			add(m.fwd, p.name, "AAAA "+p.addr.String())
		}
		if strings.HasPrefix(p.name, "*.") {
			m.wild = true
			continue
		}
		rname, err := dns.ReverseAddr(p.addr.String())
		if err != nil {
			t.Fatal(err)
		}
		add(m.rev, rname, "PTR "+p.name)
	}
	return m
}

// answer is the model's answer at name: the records and whether the name
// exists.
func (m *model) answer(name string, reverse bool) ([]string, bool) {
	fwd, ok := m.fwd[name]
	out := slices.Clone(fwd)
	if reverse && strings.HasSuffix(name, ".arpa.") { // so never arpa. itself
		rev, okr := m.rev[name]
		out = append(out, rev...)
		ok = ok || okr
	}
	return out, ok
}

// render checks the records' owner, class and TTL and that they pack,
// and renders them as the model does.
func render(t testing.TB, name string, ttl uint32, rrs []dns.RR) []string {
	t.Helper()
	out := []string{}
	buf := make([]byte, 512)
	for _, rr := range rrs {
		h := rr.Header()
		if h.Name != name || h.Ttl != ttl || h.Class != dns.ClassINET {
			t.Fatalf("record %v at %q (ttl %d)", rr, name, ttl)
		}
		if _, err := dns.PackRR(rr, buf, 0, nil, false); err != nil {
			t.Fatalf("record %v does not pack: %v", rr, err)
		}
		switch rr := rr.(type) {
		case *dns.A:
			a, _ := netip.AddrFromSlice(rr.A)
			out = append(out, "A "+a.String())
		case *dns.AAAA:
			a, _ := netip.AddrFromSlice(rr.AAAA)
			out = append(out, "AAAA "+a.String())
		case *dns.PTR:
			out = append(out, "PTR "+rr.Ptr)
		default:
			t.Fatalf("unexpected record %v", rr)
		}
	}
	return out
}

// revName writes a reverse key back as a name (a test-side reading of the
// key, independent of parseReverse).
func revName(k rkey) string {
	var labels []string
	if k.v6 {
		var a [16]byte
		for i := range 8 {
			a[i] = byte(k.hi >> (56 - 8*i))
			a[8+i] = byte(k.lo >> (56 - 8*i))
		}
		for nib := int(k.n) - 1; nib >= 0; nib-- {
			v := a[nib/2] >> 4
			if nib%2 == 1 {
				v = a[nib/2] & 0xf
			}
			labels = append(labels, fmt.Sprintf("%x", v))
		}
		return strings.Join(append(labels, "ip6.arpa."), ".")
	}
	for o := int(k.n) - 1; o >= 0; o-- {
		labels = append(labels, fmt.Sprint(byte(k.lo>>(24-8*o))))
	}
	return strings.Join(append(labels, "in-addr.arpa."), ".")
}

// fwdName is the name the forward slot value v (minus one) of ix stands
// for.
func fwdName(ix *index, v uint32) string {
	if v&entFlag != 0 {
		return ix.entSuffix(v &^ entFlag)
	}
	return ix.name(v)
}

// checkIndex compares ix, with its records built ahead and made at
// lookup time, against the model of pairs: every name of the model, every
// name the index holds, the zone cuts of arpa. and names that exist in
// neither.
func checkIndex(t testing.TB, ix *index, pairs []pair) {
	t.Helper()
	m := buildModel(t, pairs)
	if ix.records != m.records || ix.wild != m.wild {
		t.Fatalf("index: %d records, wildcards %v; model: %d, %v", ix.records, ix.wild, m.records, m.wild)
	}
	// The names with records outside some zones, and the first of them;
	// a name with an address in a reverse zone among them is served (a
	// wildcard's never is).
	for _, zones := range [][]string{{"."}, {"example."}, {"internal.", "a."}, {"x.y."},
		{"10.in-addr.arpa."}, {"x.y.", "8.b.d.0.1.0.0.2.ip6.arpa."}, {"in-addr.arpa.", "example."}} {
		prefixes := reversePrefixes(zones)
		n, example, served := 0, "", false
		for name, recs := range m.fwd {
			if recs == nil {
				continue
			}
			in := slices.ContainsFunc(zones, func(z string) bool { return pipeline.InZone(name, z) })
			for _, rec := range recs {
				_, a, _ := strings.Cut(rec, " ")
				if !strings.HasPrefix(name, "*.") && slices.ContainsFunc(prefixes, func(p netip.Prefix) bool { return p.Contains(netip.MustParseAddr(a)) }) {
					in = true
				}
			}
			if in {
				served = true
				continue
			}
			if n++; n == 1 || name < example {
				example = name
			}
		}
		if gotN, gotEx, gotServed := ix.outside(zones, prefixes, nil); gotN != n || gotEx != example || gotServed != served {
			t.Fatalf("outside %v: %d, %q, %v; want %d, %q, %v", zones, gotN, gotEx, gotServed, n, example, served)
		}
	}
	names := map[string]bool{"arpa.": true, "in-addr.arpa.": true, "ip6.arpa.": true,
		"nowhere.example.": true, "0.in-addr.arpa.": true, "1.2.3.4.5.in-addr.arpa.": true,
		"01.in-addr.arpa.": true, "f.ip6.arpa.": true, "F.ip6.arpa.": true}
	for n := range maps.Keys(m.fwd) {
		names[n] = true
		names["x."+n] = true
	}
	for n := range maps.Keys(m.rev) {
		names[n] = true
		names["0."+n] = true
	}
	for _, v := range ix.fwd {
		if v != 0 {
			names[fwdName(ix, v-1)] = true
		}
	}
	for _, v := range ix.rev {
		if v != 0 {
			names[revName(ix.revKey(v-1))] = true
		}
	}
	const ttl = 60
	modes := []*ttlIndex{{ix: ix, ttl: ttl, pre: ix.prebuild(ttl, nil)}, {ix: ix, ttl: ttl}}
	for _, name := range slices.Sorted(maps.Keys(names)) {
		for _, reverse := range []bool{true, false} {
			want, wantOK := m.answer(name, reverse)
			for i, r := range modes {
				fwd, rev, ok := r.lookup(name, reverse)
				got := append(render(t, name, ttl, fwd), render(t, name, ttl, rev)...)
				if ok != wantOK || (ok && !slices.Equal(got, want)) {
					t.Fatalf("%s (reverse %v, built ahead %v): %q %v, want %q %v", name, reverse, i == 0, got, ok, want, wantOK)
				}
			}
		}
	}
}

// mixedHosts has what the index must keep straight: IPv4 and IPv6,
// several names on a line, duplicates, names on several lines, an
// address on several lines, wildcards, empty non-terminals, upper case,
// comments and a bad line.
const mixedHosts = `# mixed
10.0.0.1   web.example.internal www.example.internal  # two names
10.0.0.2   web.example.internal
2001:db8::1 web.example.internal v6only.example.internal
10.0.0.1   WEB.Example.Internal.
10.0.0.1   other.example.internal
10.0.0.80  *.apps.example.internal apps.example.internal
fd00::80   *.apps.example.internal
10.0.0.3   a.b.c.deep.example.internal
bad line here
10.0.0.2   web.example.internal
::ffff:10.0.0.9 mapped.example.internal
10.1.2.3   1.0.0.10.in-addr.arpa
`

// TestMixedFileAnswers checks the answers for mixedHosts, built ahead and
// made at lookup time, against records written out by hand and against
// the model.
func TestMixedFileAnswers(t *testing.T) {
	listed := map[bool][]string{} // by large: what List gives for two zones
	for _, large := range []bool{false, true} {
		t.Run(fmt.Sprintf("large=%v", large), func(t *testing.T) {
			if large {
				defer func(n int) { prebuiltMax = n }(prebuiltMax)
				prebuiltMax = 0
			}
			path := filepath.Join(t.TempDir(), "hosts")
			writeFile(t, path, mixedHosts)
			b := openBackend(t, path)
			s := NewSource(b, []Entry{entry("10.0.0.7", "web.example.internal.", "inline.example.internal.")}, time.Hour, true, nil)
			b.WaitBuilt()
			if got := s.data.Load().pre != nil; got == large {
				t.Fatalf("records built ahead: %v", got)
			}
			expect(t, s, "web.example.internal.", "A 10.0.0.7", "A 10.0.0.1", "A 10.0.0.2", "AAAA 2001:db8::1")
			expect(t, s, "www.example.internal.", "A 10.0.0.1")
			expect(t, s, "v6only.example.internal.", "AAAA 2001:db8::1")
			expect(t, s, "*.apps.example.internal.", "A 10.0.0.80", "AAAA fd00::80")
			expect(t, s, "apps.example.internal.", "A 10.0.0.80")
			expect(t, s, "deep.example.internal.")
			expect(t, s, "b.c.deep.example.internal.")
			expect(t, s, "example.internal.")
			expect(t, s, "internal.")
			expect(t, s, "mapped.example.internal.", "A 10.0.0.9")
			expect(t, s, "nope.example.internal.", "NOTMINE")
			expect(t, s, "1.0.0.10.in-addr.arpa.", "A 10.1.2.3", "PTR web.example.internal.", "PTR www.example.internal.", "PTR other.example.internal.")
			expect(t, s, "2.0.0.10.in-addr.arpa.", "PTR web.example.internal.")
			expect(t, s, "7.0.0.10.in-addr.arpa.", "PTR web.example.internal.", "PTR inline.example.internal.")
			expect(t, s, "80.0.0.10.in-addr.arpa.", "PTR apps.example.internal.")
			expect(t, s, "0.0.10.in-addr.arpa.")
			expect(t, s, "10.in-addr.arpa.")
			expect(t, s, "in-addr.arpa.")
			expect(t, s, "arpa.") // an ancestor of the host name 1.0.0.10.in-addr.arpa.
			expect(t, s, "ip6.arpa.")
			expect(t, s, "1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.8.b.d.0.1.0.0.2.ip6.arpa.",
				"PTR web.example.internal.", "PTR v6only.example.internal.")
			expect(t, s, "8.b.d.0.1.0.0.2.ip6.arpa.")
			expect(t, s, "0.8.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.d.f.ip6.arpa.", "NOTMINE") // a wildcard's
			expect(t, s, "01.0.0.10.in-addr.arpa.", "NOTMINE")
			expect(t, s, "9.9.9.9.10.in-addr.arpa.", "NOTMINE")

			var pairs []pair
			for line := range strings.SplitSeq(mixedHosts, "\n") {
				a, names, _ := ParseLine([]byte(line)) // as a file's line is read
				for _, n := range names {
					pairs = append(pairs, pair{a, n})
				}
			}
			checkIndex(t, s.data.Load().ix, pairs)
			if n, ex, _ := b.Outside([]string{"example.internal."}, true, false); n != 1 || ex != "1.0.0.10.in-addr.arpa." {
				t.Errorf("Outside = %d, %q", n, ex)
			}
			for _, zone := range []string{"apps.example.internal.", "in-addr.arpa."} {
				if err := s.List(zone, func(rr dns.RR) bool {
					listed[large] = append(listed[large], strings.Join(strings.Fields(rr.String()), " "))
					return true
				}); err != nil {
					t.Fatal(err)
				}
			}
			slices.Sort(listed[large])
		})
	}
	if len(listed[false]) != 14 || !slices.Equal(listed[false], listed[true]) {
		t.Errorf("List with records built ahead: %q\nmade for the listing: %q", listed[false], listed[true])
	}
}
