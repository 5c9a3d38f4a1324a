package hosts

import (
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dnsd/dnsd/config"
	"github.com/miekg/dns"
)

// reverseOf is the reverse zones of a CIDR zone key, as config makes them.
func reverseOf(cidr string) []string { return config.ReverseZones(netip.MustParsePrefix(cidr)) }

// A source in a reverse zone key of its own (10.20.0.0/16, beside a
// forward key corp.internal over the same file) answers PTR for the
// addresses of the file and of its inline entries in that zone, though
// their names are in none of its zones; a listing of the zone has them
// too. The forward key still answers the names.
func TestReverseZoneKeyAnswersPTR(t *testing.T) {
	path := filepath.Join(t.TempDir(), "corp.hosts")
	writeFile(t, path, "10.20.1.5 app.corp.internal\n10.20.1.6 db.corp.internal db.other.test\n10.30.0.1 far.corp.internal\n")
	b := openBackend(t, path)
	entries := []Entry{{Addr: netip.MustParseAddr("10.20.2.1"), Names: []string{"gw.corp.internal."}}}
	rev := NewSource(b, entries, time.Hour, true, nil).Within(reverseOf("10.20.0.0/16"))
	expect(t, rev, "5.1.20.10.in-addr.arpa.", "PTR app.corp.internal.")
	expect(t, rev, "6.1.20.10.in-addr.arpa.", "PTR db.corp.internal.", "PTR db.other.test.")
	expect(t, rev, "1.2.20.10.in-addr.arpa.", "PTR gw.corp.internal.")
	expect(t, rev, "1.20.10.in-addr.arpa.") // an empty non-terminal

	var listed []string
	if err := rev.List("20.10.in-addr.arpa.", func(rr dns.RR) bool {
		listed = append(listed, strings.Join(strings.Fields(rr.String()), " "))
		return true
	}); err != nil {
		t.Fatal(err)
	}
	slices.Sort(listed)
	if want := []string{
		"1.2.20.10.in-addr.arpa. 3600 IN PTR gw.corp.internal.",
		"5.1.20.10.in-addr.arpa. 3600 IN PTR app.corp.internal.",
		"6.1.20.10.in-addr.arpa. 3600 IN PTR db.corp.internal.",
		"6.1.20.10.in-addr.arpa. 3600 IN PTR db.other.test.",
	}; !slices.Equal(listed, want) {
		t.Errorf("listing 20.10.in-addr.arpa.: %q, want %q", listed, want)
	}

	fwd := NewSource(b, nil, time.Hour, true, nil).Within([]string{"corp.internal."})
	expect(t, fwd, "app.corp.internal.", "A 10.20.1.5")
	expect(t, fwd, "far.corp.internal.", "A 10.30.0.1")

	off := NewSource(b, entries, time.Hour, false, nil).Within(reverseOf("10.20.0.0/16"))
	expect(t, off, "5.1.20.10.in-addr.arpa.", "NOTMINE")
}

// Outside counts the names served in none of the key's zones: a name in
// no forward zone is served when one of its addresses is in a reverse
// zone of the key (as a PTR target), unless reverse is off; served says
// whether any entry is served at all.
func TestOutsideCountsReverseZones(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hosts")
	writeFile(t, path, "10.20.1.5 app.corp.internal\n10.30.0.1 far.corp.internal\n10.30.0.2 *.apps.corp.internal\n")
	b := openBackend(t, path)
	for _, c := range []struct {
		zones   []string
		reverse bool
		n       int
		example string
		served  bool
	}{
		{[]string{"corp.internal."}, true, 0, "", true},
		{reverseOf("10.20.0.0/16"), true, 2, "*.apps.corp.internal.", true},
		{reverseOf("10.20.0.0/16"), false, 3, "*.apps.corp.internal.", false},
		{reverseOf("10.0.0.0/8"), true, 1, "*.apps.corp.internal.", true}, // a wildcard has no PTR
		{append(reverseOf("192.168.0.0/16"), "other.test."), true, 3, "*.apps.corp.internal.", false},
		{[]string{"in-addr.arpa."}, true, 1, "*.apps.corp.internal.", true},
	} {
		n, example, served := b.Outside(c.zones, c.reverse, false)
		if n != c.n || example != c.example || served != c.served {
			t.Errorf("Outside(%q, reverse %v) = %d, %q, served %v; want %d, %q, %v", c.zones, c.reverse, n, example, served, c.n, c.example, c.served)
		}
	}
}

// entriesOutside counts inline names the same way.
func TestEntriesOutsideCountsReverseZones(t *testing.T) {
	entries := []Entry{
		{Addr: netip.MustParseAddr("10.20.1.5"), Names: []string{"app.corp.internal."}},
		{Addr: netip.MustParseAddr("2001:db8::1"), Names: []string{"v6.corp.internal."}},
	}
	if n, ex, served := entriesOutside(entries, reverseOf("10.20.0.0/16"), true); n != 1 || ex != "v6.corp.internal." || !served {
		t.Errorf("in 10.20.0.0/16: %d, %q, %v", n, ex, served)
	}
	if n, _, served := entriesOutside(entries, reverseOf("2001:db8::/32"), true); n != 1 || !served {
		t.Errorf("in 2001:db8::/32: %d, %v", n, served)
	}
	if n, _, served := entriesOutside(entries, reverseOf("10.20.0.0/16"), false); n != 2 || served {
		t.Errorf("reverse off: %d, %v", n, served)
	}
}
