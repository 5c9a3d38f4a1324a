package hosts

import (
	"bytes"
	"errors"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/miekg/dns"

	"github.com/dnsd/dnsd/pipeline"
)

// FuzzParseLine checks one hosts line:
//   - a bad line is an error wrapping ErrBadLine, and parseLine leaves
//     the arena as it was; a line with good names beside a bad one is
//     such an error too, and gives its address and good names;
//   - a good line's address has no zone and is never IPv4-mapped; its
//     names are valid lower-case FQDNs of at most 254 characters;
//   - the address is the first field as net/netip reads it, and the
//     hand-written IPv4 parser agrees with net/netip on any first field;
//   - the result is idempotent: the line written back (address, names)
//     parses to the same thing, as does the same line in upper case
//     without trailing dots, and the line with a comment appended.
func FuzzParseLine(f *testing.F) {
	for _, s := range []string{
		"10.0.0.10 db db.example.internal",
		"  fd00::10\tDB.Example.Internal.  # comment",
		"fe80::1%eth0 link.local",
		"::ffff:10.0.0.1 mapped",
		"# only a comment",
		"",
		"10.0.0.1",
		"10.0.0.01 leading.zero",
		"256.1.1.1 too.big",
		"1.2.3.4.5 five",
		"10.0.0.1 bad..name",
		"10.0.0.1 under_score -dash- a.b.c.d.e.f",
		"10.0.0.1 " + strings.Repeat("a", 63) + "." + strings.Repeat("b", 63) + "." + strings.Repeat("c", 63) + "." + strings.Repeat("d", 61),
		"10.0.0.1 " + strings.Repeat("x", 64),
		"10.0.0.1 *.apps.example.internal",
		"10.0.0.1 *.Apps.Example.Internal. * *.x a.*.b *a.b **.c",
		"10.0.0.1 *.*.b",
		"fe80::1% pct",
		"1.2.3.4 a\rb\vc\fd",
		"::1 localhost ip6-localhost ip6-loopback",
		"0.0.0.0 .",
		"1.2.3.4 " + strings.Repeat("a.", 130),
		"2001:db8::1\tv6\r",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		arena := []byte("prefix.")
		addr, a2, spans, kind, _ := parseLine(line, arena, []span{{0, 7}})
		if kind != lineOK && kind != badNames && (string(a2) != "prefix." || len(spans) != 1) {
			t.Fatalf("bad line (%s) changed the arena: %q %v", kind, a2, spans)
		}
		if kind == lineOK && len(spans) > 1 && !addr.IsValid() {
			t.Fatalf("names without an address")
		}

		// The IPv4 parser against net/netip, on the line's first field.
		if first, _ := nextField(line, 0); !bytes.ContainsAny(first, "#") {
			v4, ok := parseV4(first)
			ref, err := netip.ParseAddr(string(first))
			if ok != (err == nil && ref.Is4()) || ok && v4 != ref {
				t.Fatalf("parseV4(%q) = %v %v; netip: %v %v", first, v4, ok, ref, err)
			}
		}

		got, names, err := ParseLine(line)
		if err != nil {
			if !errors.Is(err, ErrBadLine) || kind == lineOK {
				t.Fatalf("error %v (kind %s) for %q", err, kind, line)
			}
			if kind != badNames {
				return
			}
			if len(names) == 0 {
				t.Fatalf("a line with good names (kind %s) gave none: %q", kind, line)
			}
		}
		if len(names) == 0 {
			if got.IsValid() {
				t.Fatalf("address %v without names", got)
			}
			return
		}
		if got != addr || got.Zone() != "" || got.Is4In6() || !got.IsValid() {
			t.Fatalf("address %v (parseLine %v) from %q", got, addr, line)
		}
		// The address is the first field as net/netip reads it, zone
		// dropped and IPv4-mapped unmapped.
		field := strings.Fields(strings.SplitN(string(line), "#", 2)[0])[0]
		field, _, _ = strings.Cut(field, "%")
		if want, err := netip.ParseAddr(field); err != nil || want.Unmap() != got {
			t.Fatalf("address %v, net/netip reads %q as %v, %v", got, field, want, err)
		}
		for _, n := range names {
			checkName(t, n)
			if strings.Contains(strings.TrimPrefix(n, "*."), "*") {
				t.Fatalf("name %q has a \"*\" that is not its whole first label", n)
			}
		}

		bad := err != nil // good names beside a bad one
		again := func(what, l string, wantBad bool) {
			t.Helper()
			a, ns, err := ParseLine([]byte(l))
			if (err != nil) != wantBad || a != got || !slices.Equal(ns, names) {
				t.Fatalf("%s %q parses to %v %q %v; first %v %q", what, l, a, ns, err, got, names)
			}
		}
		again("written back", got.String()+" "+strings.Join(names, " "), false)
		var upper []string
		for _, n := range names {
			upper = append(upper, strings.ToUpper(strings.TrimSuffix(n, ".")))
		}
		again("upper case", "\t"+got.String()+"\t"+strings.Join(upper, "  ")+" ", false)
		again("with a comment", string(line)+" # 10.9.9.9 other", bad)
	})
}

// checkName requires n to be a valid lower-case FQDN that miekg/dns can
// put on the wire.
func checkName(t *testing.T, n string) {
	t.Helper()
	if _, ok := dns.IsDomainName(n); !ok || !dns.IsFqdn(n) || n == "." || strings.ToLower(n) != n ||
		len(n) > 254 || strings.Contains(n, "..") || strings.ContainsAny(n, " \t\\\"") {
		t.Fatalf("name %q is not a lower-case FQDN", n)
	}
	for _, l := range dns.SplitDomainName(n) {
		if len(l) == 0 || len(l) > 63 {
			t.Fatalf("name %q has a label of %d characters", n, len(l))
		}
	}
	buf := make([]byte, 256)
	if _, err := dns.PackDomainName(n, buf, 0, nil, false); err != nil {
		t.Fatalf("name %q does not pack: %v", n, err)
	}
	if _, err := dns.NewRR(n + " 60 IN A 10.0.0.1"); err != nil {
		t.Fatalf("name %q is not usable as an owner: %v", n, err)
	}
}

// FuzzParseFile checks a whole file: parseData gives exactly the pairs
// that ParseLine gives line by line (bad lines and bad names skipped), and the index
// built from them (one file, or the same lines in two) answers every name
// as a plain model of the pairs does (checkIndex): the A/AAAA records at
// each name and the PTR records at each address's reverse name (as
// miekg/dns writes it; none for a wildcard name) in file order without
// duplicates, every ancestor of a name as an empty non-terminal, records
// valid on the wire, with the records built ahead and at lookup time.
func FuzzParseFile(f *testing.F) {
	for _, s := range []string{
		"10.0.0.10 db db.example.internal\nfd00::10 db.example.internal\n",
		"# hosts\r\n127.0.0.1 localhost\r\n::1 localhost\r\n\r\n",
		"10.0.0.1 a\n10.0.0.1 a\n10.0.0.2 a\nbad line\n10.0.0.3 a.b.c.d",
		"10.0.0.1 x\n10.0.0.2 x\n10.0.0.3 x\n10.0.0.4 x\n10.0.0.5 x\n10.0.0.6 x\n10.0.0.7 x\n10.0.0.8 x\n10.0.0.9 x\n10.0.0.1 x\n",
		"\n\n\n",
		"fe80::1%eth0 link\n::ffff:192.0.2.1 mapped mapped.example\n",
		"10.0.0.80 *.apps.example.internal apps.example.internal\n10.0.0.81 x.apps.example.internal *\n",
	} {
		f.Add([]byte(s))
	}
	logger := slog.New(slog.DiscardHandler)
	f.Fuzz(func(t *testing.T, data []byte) {
		var want []pair
		for line := range bytes.SplitSeq(data, []byte{'\n'}) {
			a, names, _ := ParseLine(line) // no names for a bad line; a bad name's neighbours kept
			for _, n := range names {
				want = append(want, pair{a, n})
			}
		}
		parts := parseData("fuzz.hosts", data, logger)
		if len(parts) != 1 {
			t.Fatalf("a small file parsed in %d parts", len(parts))
		}
		d := parts[0]
		var got []pair
		for _, e := range d.entries {
			got = append(got, pair{d.addr(e), d.name(e)})
			checkName(t, d.name(e))
			// The name kept in two parts answers as the name written out.
			name := d.name(e)
			for _, z := range append(ancestors(name), ".", name, "x."+name, "example.") {
				if d.inZone(e, z) != pipeline.InZone(name, z) {
					t.Fatalf("%q in zone %q: %v, want %v", name, z, d.inZone(e, z), !d.inZone(e, z))
				}
			}
			if !d.nameIs(e, name) || d.nameIs(e, "x."+name) {
				t.Fatalf("nameIs(%q) wrong", name)
			}
		}
		if !slices.Equal(got, want) {
			t.Fatalf("parseData: %v\nline by line: %v", got, want)
		}
		checkIndex(t, buildIndex(parts, nil), got)
		// Parsed in two halves at once: the same pairs, the same index.
		halves := parseDataFrom("fuzz.hosts", data, logger, 0, nil)
		if split := partsPairs(halves); !slices.Equal(split, got) || halves.bad() != d.bad {
			t.Fatalf("parsed in halves: %v (%d bad)\nwhole: %v (%d bad)", split, halves.bad(), got, d.bad)
		}
		checkIndex(t, buildIndex(halves, nil), got)
		// Read a few bytes at a time, as a large file is.
		sd, _, err := parseStream(bytes.NewReader(data), 1, 1, int64(len(data)), 5, nil)
		if err != nil {
			t.Fatal(err)
		}
		if streamed := partsPairs(fileParts{sd}); !slices.Equal(streamed, got) || sd.bad != d.bad {
			t.Fatalf("read 5 bytes at a time: %v (%d bad)\nwhole: %v (%d bad)", streamed, sd.bad, got, d.bad)
		}
		// The same pairs split over two files.
		if len(data) > 1 {
			half := bytes.LastIndexByte(data[:len(data)/2], '\n') + 1
			d1 := parseData("1.hosts", data[:half], logger)
			d2 := parseData("2.hosts", data[half:], logger)
			checkIndex(t, buildIndex(slices.Concat(d1, fileParts{{}}, d2), nil), got)
		}
	})
}

// partsPairs lists the pairs of parts, in order.
func partsPairs(parts fileParts) []pair {
	var out []pair
	for _, d := range parts {
		for _, e := range d.entries {
			out = append(out, pair{d.addr(e), d.name(e)})
		}
	}
	return out
}

// ancestors are name's proper ancestors, the root excluded.
func ancestors(name string) []string {
	var out []string
	for i := 0; i < len(name)-1; i++ {
		if name[i] == '.' && i+1 < len(name)-1 {
			out = append(out, name[i+1:])
		}
	}
	return out
}
