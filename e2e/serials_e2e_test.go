package e2e

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/dnsd/dnsd/internal/dnstest"
)

// newer is how a secondary compares serials (RFC 1982 section 3.2): b
// is newer than a when it is ahead by less than half the number space.
// A secondary transfers the zone only when the primary's serial is newer
// than its copy's.
func newer(a, b uint32) bool {
	d := b - a // modulo 2^32
	return d != 0 && d < 1<<31
}

// TestSerialsNeverGoBack: a zone file's own date serial (2026120301,
// above dnsd's clock-made serials in RFC 1982 terms) is served; a SIGHUP
// that adds a hosts source gives a serial newer than it; the serial is
// kept in state_dir, and a restart, with the two sources or with the zone
// file alone again, never serves one a secondary would take as older.
func TestSerialsNeverGoBack(t *testing.T) {
	const zoneFile = "@ 300 IN SOA ns1.serial.internal. admin.serial.internal. 2026120301 7200 3600 1209600 60\n" +
		"@ 300 IN NS ns1\nns1 300 IN A 10.0.4.1\nwww 300 IN A 10.0.4.2\n"
	alone := "listen: [\"LISTEN\"]\nstate_dir: state\nzones:\n  serial.internal:\n    - file: {path: serial.zone}\n"
	withHosts := alone + "    - hosts: {entries: [\"10.0.4.3 db\"]}\n"
	d := startYAML(t, alone, map[string]string{"serial.zone": zoneFile})
	serial := func(addr string) uint32 {
		t.Helper()
		r := dnstest.Ask(t, addr, "serial.internal.", dns.TypeSOA)
		if len(r.Answer) != 1 {
			t.Fatalf("SOA: %v", r)
		}
		return r.Answer[0].(*dns.SOA).Serial
	}
	held := serial(d.addr) // the secondary's copy
	if held != 2026120301 {
		t.Fatalf("zone file alone: serial %d, want its own 2026120301", held)
	}
	if clock := uint32(time.Now().Unix()); !newer(clock, held) {
		t.Fatalf("the test needs the zone file's serial ahead of the clock (%d)", clock)
	}

	d.reload(t, withHosts, true, 1)
	s := serial(d.addr)
	if !newer(held, s) {
		t.Fatalf("a hosts source joined: serial %d, a secondary holding %d keeps its copy", s, held)
	}
	if r := dnstest.Ask(t, d.addr, "db.serial.internal.", dns.TypeA); len(r.Answer) != 1 {
		t.Fatalf("db.serial.internal: %v", r)
	}
	held = s

	// The serial served is kept in state_dir within about a second.
	path := filepath.Join(d.dir, "state", "serials")
	dnstest.Eventually(t, "state/serials to hold "+strconv.Itoa(int(held)), 5*time.Second, func() bool {
		b, err := os.ReadFile(path)
		return err == nil && strings.Contains(string(b), `"serial": `+strconv.Itoa(int(held)))
	})
	if fi, err := os.Stat(filepath.Join(d.dir, "state")); err != nil || fi.Mode().Perm() != 0o750 {
		t.Errorf("state_dir: %v, %v", fi.Mode(), err)
	}

	restart := func(yaml string) uint32 {
		t.Helper()
		d.stop(syscall.SIGTERM)
		writeFile(t, d.cfg, d.expand(yaml))
		d.proc = startDnsd(t, d.dir, "-config", "dnsd.yaml")
		d.waitLog("dnsd started", 1)
		return serial(d.addr)
	}
	if s := restart(withHosts); newer(s, held) {
		t.Errorf("restart: serial %d is older than the %d a secondary holds", s, held)
	} else if s != held {
		held = s
	}
	// Back to the zone file alone: its own serial (2026120301) is below
	// what was served; dnsd serves its own above it.
	s = restart(alone)
	if newer(s, held) || s == 2026120301 {
		t.Errorf("restart with the zone file alone: serial %d, a secondary holds %d", s, held)
	}
	if r := dnstest.Ask(t, d.addr, "serial.internal.", dns.TypeSOA); r.Answer[0].(*dns.SOA).Ns != "ns1.serial.internal." {
		t.Errorf("SOA %v, want the zone file's", r.Answer[0])
	}
	if !strings.Contains(d.stderr.String(), "zone serial below the one served before") {
		t.Errorf("no warning of the zone file's lower serial:\n%s", grep(d.stderr.String(), "serial"))
	}
}
