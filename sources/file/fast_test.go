package file

import (
	"fmt"
	"math/rand/v2"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/miekg/dns"
)

// zoneParserRecords is what dns.ZoneParser reads from data, as load
// would ask it without $INCLUDE.
func zoneParserRecords(data, origin string, defTTL uint32) ([]dns.RR, error) {
	zp := dns.NewZoneParser(strings.NewReader(data), origin, "test.zone")
	zp.SetDefaultTTL(defTTL)
	var rrs []dns.RR
	for rr, ok := zp.Next(); ok; rr, ok = zp.Next() {
		rrs = append(rrs, rr)
	}
	return rrs, zp.Err()
}

// checkSame fails t unless fastRecords, when it reads data at all,
// reads what ZoneParser reads, field for field. It reports whether
// fastRecords read it.
func checkSame(t *testing.T, data, origin string, defTTL uint32) bool {
	t.Helper()
	var fast []dns.RR
	if !fastRecords([]byte(data), origin, "test.zone", defTTL, func(rr dns.RR) { fast = append(fast, rr) }) {
		return false
	}
	want, err := zoneParserRecords(data, origin, defTTL)
	if err != nil {
		t.Fatalf("fastRecords read %q (origin %q), ZoneParser refuses it: %v", data, origin, err)
	}
	if len(fast) != len(want) {
		t.Fatalf("%q: fastRecords read %d records, ZoneParser %d:\n%v\n%v", data, len(fast), len(want), fast, want)
	}
	for i := range want {
		if !reflect.DeepEqual(fast[i], want[i]) {
			t.Fatalf("%q: record %d differs:\nfast       %#v\nZoneParser %#v", data, i, fast[i], want[i])
		}
	}
	return true
}

// What zone files are made of is read by the fast path, and read the
// same as by ZoneParser.
func TestFastRecordsReads(t *testing.T) {
	cases := []string{
		"host0.example.internal. 3600 IN A 10.1.0.0\nhost1.example.internal. 3600 IN A 10.1.0.1\n",
		"$ORIGIN example.internal.\n$TTL 3600\n@ IN SOA ns.example.internal. hostmaster.example.internal. 1 7200 3600 1209600 3600\n@ IN NS ns\nns IN A 10.0.0.1\n",
		// An SOA over several lines with comments, then records.
		"@ IN SOA ns1 hostmaster (\n  2024010101 ; serial\n  7200 ; refresh\n  3600 1209600 60 )\n@ NS ns1\nns1 A 10.0.0.1\n",
		// Owner carried over, TTL and class in both orders, units.
		"web IN A 10.0.0.10\n  IN AAAA fd00::10\n\t600 AAAA fd00::11\nwww 1h30m IN CNAME web\nw2 IN 2d CNAME www.example.org.\n",
		// No $TTL: a record's TTL is the default for those after it.
		"a 120 A 10.0.0.1\nb A 10.0.0.2\nc 60 A 10.0.0.3\nd A 10.0.0.4\n",
		// $TTL wins over earlier TTLs, a record's own TTL stays its own.
		"$TTL 300\na 120 A 10.0.0.1\nb A 10.0.0.2\n$ttl 1d\nc A 10.0.0.3\n",
		// $ORIGIN relative to the one before, "@", wildcard, root origin.
		"$ORIGIN sub\n@ A 10.0.0.1\n* A 10.0.0.2\n$ORIGIN .\nx A 10.0.0.3\n",
		"@ MX 10 mail\n@ MX 20 mail.example.org.\n_http._tcp SRV 10 5 80 web\n1.0 PTR host.example.internal.\n",
		// Types read by ZoneParser one at a time: TXT with quotes, CAA,
		// SSHFP, a TXT over lines, an escaped name.
		"txt IN TXT \"hello world\" \"two; (three)\"\ncaa CAA 0 issue \"ca.example.net\"\nssh SSHFP 1 1 123456789abcdef67890123456789abcdef67890\n",
		"t TXT ( \"one\"\n  \"two\" ) ; end\nafter A 10.0.0.9\n",
		"bare TXT word\nhinfo HINFO \"PC\" \"Linux\"\n",
		// Comments, blank lines, CRLF, tabs, no final newline.
		"; a comment\n\n   \nx A 10.0.0.1 ; trailing\r\ny\tIN\tA\t10.0.0.2;glued\r\n  \r\nz A 10.0.0.3",
		"ns NS @\n",
		"lower in a 10.0.0.1\nMiXeD.Example.Internal. In Cname Target.Example.Internal.\n",
	}
	for _, data := range cases {
		if !checkSame(t, data, "example.internal.", 3600) {
			t.Errorf("fastRecords gave up on %q", data)
		}
	}
	// The repository's demo zone.
	b, err := os.ReadFile("../../testdata/lab.internal.zone")
	if err != nil {
		t.Fatal(err)
	}
	if !checkSame(t, string(b), "lab.internal.", 3600) {
		t.Errorf("fastRecords gave up on testdata/lab.internal.zone")
	}
}

// What the fast path is not sure to read as ZoneParser does, it leaves
// to it: load then parses the whole file with ZoneParser.
func TestFastRecordsGivesUp(t *testing.T) {
	cases := []string{
		"$INCLUDE other.zone\n",
		"$GENERATE 1-3 host$ A 10.0.0.$\n",
		"x CH TXT \"chaos\"\n",
		"x TYPE65534 \\# 1 00\n",
		"x CLASS1 A 10.0.0.1\n",
		"x ANY A 10.0.0.1\n",
		"( x ) A 10.0.0.1\n",
		"x \"IN\" A 10.0.0.1\n",
		"$ORIGIN A\nx A 10.0.0.1\n",
		"x ın A 10.0.0.1\n", // strings.ToUpper makes it IN
		// Errors, reported by ZoneParser with their position.
		"x A 10.0.0.300\n",
		"x AAAA 10.0.0.1\n",
		"x A fd00::1\n",
		"x A 10.0.0.1 extra\n",
		"x A\n",
		"x MX mail\n",
		"x SRV 1 2 70000 web\n",
		"x 3600 3600 A 10.0.0.1\n",
		"x IN IN A 10.0.0.1\n",
		"x 99999999999 A 10.0.0.1\n",
		"  A 10.0.0.1\n", // no owner yet
		"x TXT \"open\n",
		"x TXT ( one\n",
		"x TXT ) one\n",
		"x..y A 10.0.0.1\n",
		"e\\.x A 10.0.0.1\n", // an escape in the owner
	}
	for _, data := range cases {
		if checkSame(t, data, "example.internal.", 3600) {
			t.Errorf("fastRecords read %q; it should leave it to ZoneParser", data)
		}
	}
}

// A zone file read by the fast path serves what ZoneParser's reading
// served: the example zone without its $INCLUDE, through load.
func TestLoadFastSameAnswers(t *testing.T) {
	b, err := os.ReadFile("testdata/example.internal.zone")
	if err != nil {
		t.Fatal(err)
	}
	data := strings.Replace(string(b), "$INCLUDE sub/extra.zone\n", "", 1)
	if !checkSame(t, data, "example.internal.", 3600) {
		t.Fatal("fastRecords gave up on the example zone")
	}
	path := t.TempDir() + "/example.internal.zone"
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	z, err := load(&Config{Path: path, Origin: "example.internal.", Zones: []string{"example.internal."}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := zoneParserRecords(data, "example.internal.", uint32(DefaultTTL/1e9))
	if z.records != len(want) || z.soa == nil || z.soa.Serial != 2024010101 {
		t.Fatalf("load: %d records, SOA %v; want %d and serial 2024010101", z.records, z.soa, len(want))
	}
	if got := types(z.names["web.example.internal."]); got != "A AAAA" {
		t.Errorf("web: %q, want the owner carried to AAAA", got)
	}
}

// FuzzFastRecords holds the fast path to ZoneParser: whatever it reads,
// ZoneParser reads too, to the same records.
func FuzzFastRecords(f *testing.F) {
	for _, s := range []string{
		"host0.example.internal. 3600 IN A 10.1.0.0\n",
		"$ORIGIN sub\n$TTL 1h\n@ IN SOA ns1 hm ( 1 2 3 4 5 )\n  IN NS ns1\nns1 A 10.0.0.1\n",
		"x 60 IN AAAA fd00::1\ny IN 60 CNAME x\nm MX 10 x\ns SRV 1 2 3 x\np PTR x.\n",
		"t TXT \"a;b\" (\n \"c\" ) ; x\n",
		"a 120 A 10.0.0.1\nb A 10.0.0.2\r\n",
	} {
		f.Add(s, "example.internal.")
	}
	for path, origin := range map[string]string{
		"testdata/example.internal.zone":   "example.internal.",
		"../../testdata/lab.internal.zone": "lab.internal.",
	} {
		if b, err := os.ReadFile(path); err == nil {
			f.Add(string(b), origin)
		}
	}
	f.Fuzz(func(t *testing.T, data, origin string) {
		if len(data) > 4096 {
			return
		}
		checkSame(t, data, origin, 3600)
	})
}

// Zone files put together at random from the pieces zone files are made
// of, good and bad: whatever the fast path reads, it reads as ZoneParser
// does, and it reads most of the good ones.
func TestFastRecordsRandom(t *testing.T) {
	owners := []string{"host", "@", "*", "a.b", "x.example.org.", "_sip._udp", "MiXed", "", " ", "\t", "A", "3600", "IN", "$TTL", "$ORIGIN", "bad..name", "e\\.x", "a;b"}
	heads := []string{"", "3600", "IN", "IN 60", "60 IN", "1h", "in", "CH", "ANY", "2w3d", "60 60", "IN IN", "TYPE1", "x"}
	rdata := map[string][]string{
		"A":     {"10.0.0.1", "10.0.0.300", "fd00::1", "10.0.0.1 x", "", "::ffff:10.0.0.1"},
		"AAAA":  {"fd00::1", "10.0.0.1", "::", "fd00::1 ; c"},
		"NS":    {"ns1", "ns1.example.org.", "@", "a..b", "ns1 ns2"},
		"CNAME": {"web", "web.", "@", "*.x"},
		"PTR":   {"host.example.internal.", "host", ""},
		"MX":    {"10 mail", "mail", "70000 mail", "0 @", "10 mail.example.org."},
		"SRV":   {"1 2 3 web", "1 2 web", "1 2 3 4 web", "0 0 0 ."},
		"TXT":   {"\"a b\"", "word", "( \"one\"\n \"two\" )", "\"semi;colon\" \"par(en\"", "\"open", "\"esc\\\"aped\""},
		"SOA":   {"ns1 hm 1 2 3 4 5", "ns1 hm ( 1 ; s\n 2 3\n 4 5 )", "ns1 hm ( 1 2 3 4 5", "ns1 hm 1 2 3 4 5 )"},
		"CAA":   {"0 issue \"ca.example.net\"", "0 issue"},
		"MAILA": {"\\# 0", "x"},
	}
	types := make([]string, 0, len(rdata))
	for typ := range rdata {
		types = append(types, typ)
	}
	slices.Sort(types)
	extras := []string{"", " ; comment", ";c", " \r", "\r", " (", " )", " \\"}
	directives := []string{"$TTL 300", "$TTL 1d", "$ttl 60 ; c", "$ORIGIN sub", "$ORIGIN example.org.", "$ORIGIN .", "$ORIGIN A", "$INCLUDE x.zone", "$TTL", "$TTL x"}
	rng := rand.New(rand.NewPCG(1, 2))
	pick := func(s []string) string { return s[rng.IntN(len(s))] }
	read := 0
	for range 20000 {
		var b strings.Builder
		clean := true
		for range 1 + rng.IntN(8) {
			odd := rng.IntN(3) == 0 // something odd somewhere in this line
			clean = clean && !odd
			switch {
			case rng.IntN(6) == 0 && odd:
				b.WriteString(pick(directives))
			case rng.IntN(6) == 0:
				b.WriteString(pick(directives[:6]))
			default:
				typ := pick(types)
				owner, head, rd := pick(owners[:7]), pick(heads[:7]), rdata[typ][0]
				if odd {
					owner, head, rd = pick(owners), pick(heads), pick(rdata[typ])
				}
				if rng.IntN(2) == 0 {
					typ = strings.ToLower(typ)
				}
				fmt.Fprintf(&b, "%s %s %s %s", owner, head, typ, rd)
				if odd {
					b.WriteString(pick(extras))
				}
			}
			b.WriteByte('\n')
		}
		data := b.String()
		origin := pick([]string{"example.internal.", "example.internal.", "."})
		ok := checkSame(t, data, origin, 3600)
		if ok {
			read++
		}
		if clean && !ok {
			t.Errorf("fastRecords gave up on %q, made of good lines only", data)
		}
	}
	t.Logf("fastRecords read %d of 20000 files", read)
}
