package secondary

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/dnsd/dnsd/config"
	"github.com/dnsd/dnsd/pipeline"
)

// logBuf collects a backend's log lines.
type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

type fixture struct {
	t       *testing.T
	dir     string
	metrics *Metrics
	log     *logBuf
	serials pipeline.SerialClock
}

func newFixture(t *testing.T) *fixture {
	return &fixture{t: t, dir: t.TempDir(), metrics: NewMetrics(), log: &logBuf{}}
}

// open starts a backend for testZone from primaries, signed when tsig.
func (f *fixture) open(tsig bool, wait time.Duration, primaries ...netip.AddrPort) *Backend {
	f.t.Helper()
	c := &Config{Zone: testZone, Primaries: primaries, StateDir: f.dir}
	if tsig {
		c.Key = &config.TSIG{Name: testKey, Algorithm: dns.HmacSHA256, Secret: testSecret}
	}
	logger := slog.New(slog.NewTextHandler(f.log, &slog.HandlerOptions{Level: slog.LevelDebug}))
	b, err := open(c, logger, &f.serials, f.metrics, wait)
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { _ = b.Close() })
	return b
}

func (f *fixture) transfers(typ, result string) float64 {
	return testutil.ToFloat64(f.metrics.transfers.WithLabelValues(testZone, typ, result))
}

// lookup asks the backend's source for name.
func lookup(b *Backend, name string) pipeline.Result {
	return NewSource(b).Lookup(context.Background(), &pipeline.Question{Name: name, Type: dns.TypeA, Zone: testZone})
}

// waitFor polls cond for up to 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// has reports whether name holds an A record with address ip.
func has(b *Backend, name, ip string) bool {
	r := lookup(b, name)
	if r.Status != pipeline.Found {
		return false
	}
	for _, rr := range r.RRs {
		if a, ok := rr.(*dns.A); ok && a.A.String() == ip {
			return true
		}
	}
	return false
}

func soaSerial(b *Backend) uint32 {
	soa, _ := NewSource(b).SOA(testZone)
	if soa == nil {
		return 0
	}
	return soa.Serial
}

func TestAXFRFirstAndSaved(t *testing.T) {
	p := newPrimary(t, false)
	p.set(10, "@ NS ns1", "ns1 A 192.0.2.1", "www A 192.0.2.10", "*.apps A 192.0.2.80", "sub NS ns.sub", "ns.sub A 192.0.2.53")
	f := newFixture(t)
	b := f.open(false, readTimeout, p.addr)
	src := NewSource(b)
	waitFor(t, "the first AXFR", src.Synced)
	if !has(b, "www."+testZone, "192.0.2.10") {
		t.Fatalf("www not served: %+v", lookup(b, "www."+testZone))
	}
	if soa, own := src.SOA(testZone); soa == nil || soa.Serial != 10 || !own {
		t.Fatalf("SOA %v own=%v, want the primary's serial 10, own", soa, own)
	}
	if !src.Wildcards() {
		t.Error("the copy's wildcard is not seen")
	}
	if r := lookup(b, "x.ns.sub."+testZone); r.Status != pipeline.Answered {
		t.Errorf("below a delegation: %v, want a referral", r.Status)
	}
	var n int
	if err := src.List(testZone, func(dns.RR) bool { n++; return true }); err != nil || n != 7 {
		t.Errorf("List: %d records, %v; want 7 (SOA and 6)", n, err)
	}
	if got := f.transfers(typeAXFR, resultOK); got != 1 {
		t.Errorf("axfr ok = %v, want 1", got)
	}
	if got := testutil.ToFloat64(f.metrics.serial.WithLabelValues(testZone)); got != 10 {
		t.Errorf("serial gauge = %v, want 10", got)
	}
	zf, mf := paths(f.dir, testZone)
	waitFor(t, "the saved copy", func() bool { _, err := os.Stat(mf); return err == nil })
	for _, c := range []struct {
		path string
		mode os.FileMode
	}{{zf, 0o640}, {mf, 0o640}, {filepath.Dir(zf), 0o750 | os.ModeDir}} {
		fi, err := os.Stat(c.path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode() != c.mode {
			t.Errorf("%s: mode %v, want %v", c.path, fi.Mode(), c.mode)
		}
	}
	data, _ := os.ReadFile(zf)
	if !strings.Contains(string(data), "www.partner.example.\t3600\tIN\tA\t192.0.2.10") || !strings.HasPrefix(string(data), "; dnsd's copy of partner.example., serial 10") {
		t.Errorf("saved zone file:\n%s", data)
	}
}

func TestNeverLoaded(t *testing.T) {
	dead := newPrimary(t, false)
	dead.close()
	f := newFixture(t)
	b := f.open(false, readTimeout, dead.addr)
	src := NewSource(b)
	r := lookup(b, "www."+testZone)
	if r.Status != pipeline.Failed || src.Synced() || errors.Is(r.Err, pipeline.ErrUnreachable) {
		t.Fatalf("never loaded: %v (%v) synced=%v, want Failed, not synced (EDE 14)", r.Status, r.Err, src.Synced())
	}
	waitFor(t, "the cause", func() bool { return strings.Contains(src.Problem(), "connection refused") })
	if ep := src.Endpoint(); ep != testZone+" from "+dead.addr.String() {
		t.Errorf("Endpoint() = %q", ep)
	}
}

func TestIXFROnNotify(t *testing.T) {
	p := newPrimary(t, false)
	p.set(10, "@ NS ns1", "ns1 A 192.0.2.1", "www A 192.0.2.10", "old A 192.0.2.11")
	f := newFixture(t)
	b := f.open(false, readTimeout, p.addr)
	waitFor(t, "the first AXFR", b.Synced)
	p.set(11, "@ NS ns1", "ns1 A 192.0.2.1", "www A 192.0.2.20", "new A 192.0.2.12")
	b.Notify()
	waitFor(t, "the IXFR", func() bool { return has(b, "www."+testZone, "192.0.2.20") })
	if lookup(b, "old."+testZone).Status != pipeline.NotMine || !has(b, "new."+testZone, "192.0.2.12") || has(b, "www."+testZone, "192.0.2.10") {
		t.Errorf("the IXFR was not applied whole: old %v, new %v", lookup(b, "old."+testZone).Status, lookup(b, "new."+testZone).Status)
	}
	if got := f.transfers(typeIXFR, resultOK); got != 1 || p.count(dns.TypeIXFR) != 1 || p.count(dns.TypeAXFR) != 1 {
		t.Errorf("ixfr ok %v, IXFR asked %d, AXFR asked %d; want 1, 1, 1", got, p.count(dns.TypeIXFR), p.count(dns.TypeAXFR))
	}
	if soaSerial(b) != 11 {
		t.Errorf("serial %d, want 11", soaSerial(b))
	}
	// The saved copy is the new one.
	waitFor(t, "the saved copy", func() bool { s, err := load(f.dir, testZone); return err == nil && s.meta.Serial == 11 })
	if s, _ := load(f.dir, testZone); len(s.rrs) != 4 {
		t.Fatalf("saved copy: %+v", s)
	}
}

func TestIXFRFallsBackToAXFR(t *testing.T) {
	for _, c := range []struct {
		name  string
		fault func(p *testPrimary)
		ixfr  string // the IXFR's result
		axfrs int    // AXFRs the primary is asked in all
	}{
		{"refused", func(p *testPrimary) { p.refuseIXFR = true }, resultRefused, 2},
		{"axfr-form", func(p *testPrimary) { p.axfrIXFR = true }, resultOK, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := newPrimary(t, false)
			p.set(10, "@ NS ns1", "www A 192.0.2.10", "old A 192.0.2.11")
			f := newFixture(t)
			b := f.open(false, readTimeout, p.addr)
			waitFor(t, "the first AXFR", b.Synced)
			p.with(c.fault)
			p.set(12, "@ NS ns1", "www A 192.0.2.20")
			b.Notify()
			waitFor(t, "the new copy", func() bool { return soaSerial(b) == 12 })
			if !has(b, "www."+testZone, "192.0.2.20") || lookup(b, "old."+testZone).Status != pipeline.NotMine {
				t.Error("the new copy does not replace the zone")
			}
			if got := f.transfers(typeIXFR, c.ixfr); got != 1 {
				t.Errorf("ixfr %s = %v, want 1", c.ixfr, got)
			}
			if n := p.count(dns.TypeAXFR); n != c.axfrs {
				t.Errorf("AXFR asked %d times, want %d", n, c.axfrs)
			}
		})
	}
}

func TestBadTransfersKeepTheCopy(t *testing.T) {
	for _, c := range []struct {
		name   string
		tsig   bool
		fault  func(p *testPrimary)
		result string
		log    string
	}{
		{"bad tsig on the second message", true, func(p *testPrimary) { p.badSecond = true }, resultNotAuth, "bad TSIG"},
		{"stall mid-transfer", false, func(p *testPrimary) { p.stall = true }, resultTimeout, "timed out"},
		{"truncated", false, func(p *testPrimary) { p.truncate = true }, resultError, "before the closing SOA"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := newPrimary(t, c.tsig)
			p.set(10, "@ NS ns1", "www A 192.0.2.10", "a A 192.0.2.1", "b A 192.0.2.2")
			f := newFixture(t)
			b := f.open(c.tsig, 300*time.Millisecond, p.addr)
			waitFor(t, "the first AXFR", b.Synced)
			p.with(func(p *testPrimary) { c.fault(p); p.axfrIXFR = true })
			p.set(11, "@ NS ns1", "www A 192.0.2.20", "a A 192.0.2.1", "b A 192.0.2.2")
			b.Notify()
			waitFor(t, "the cause in the log", func() bool { return strings.Contains(f.log.String(), c.log) })
			if n := f.transfers(typeAXFR, c.result) + f.transfers(typeIXFR, c.result); n < 1 {
				t.Errorf("no transfer counted with result %s", c.result)
			}
			if !has(b, "www."+testZone, "192.0.2.10") || soaSerial(b) != 10 {
				t.Errorf("the last good copy is not served: serial %d", soaSerial(b))
			}
			if p := NewSource(b).Problem(); !strings.Contains(p, c.log) {
				t.Errorf("Problem() = %q, want it to say %q", p, c.log)
			}
			s, err := load(f.dir, testZone)
			if err != nil || s.meta.Serial != 10 {
				t.Errorf("saved copy: %+v, %v; want serial 10", s, err)
			}
		})
	}
}

func TestTSIGSigned(t *testing.T) {
	p := newPrimary(t, true)
	p.set(10, "@ NS ns1", "www A 192.0.2.10", "a A 192.0.2.1", "b A 192.0.2.2")
	f := newFixture(t)
	b := f.open(true, readTimeout, p.addr)
	waitFor(t, "the signed AXFR", b.Synced)
	p.set(11, "@ NS ns1", "www A 192.0.2.20", "a A 192.0.2.1", "b A 192.0.2.2")
	b.Notify()
	waitFor(t, "the signed IXFR", func() bool { return soaSerial(b) == 11 })

	// Unsigned answers to signed requests are refused.
	u := newPrimary(t, false)
	u.set(10, "@ NS ns1", "www A 192.0.2.10")
	g := newFixture(t)
	c := g.open(true, readTimeout, u.addr)
	waitFor(t, "the refusal", func() bool { return g.transfers(typeAXFR, resultNotAuth) >= 1 })
	if c.Synced() {
		t.Error("an unsigned transfer was accepted with a key")
	}
}

func TestSerialBackwardsKeepsTheCopy(t *testing.T) {
	p := newPrimary(t, false)
	p.set(10, "@ NS ns1", "www A 192.0.2.10")
	f := newFixture(t)
	b := f.open(false, readTimeout, p.addr)
	waitFor(t, "the first AXFR", b.Synced)
	p.set(9, "@ NS ns1", "www A 192.0.2.99")
	b.Notify()
	waitFor(t, "the complaint", func() bool { return strings.Contains(NewSource(b).Problem(), "below the copy's 10") })
	if !has(b, "www."+testZone, "192.0.2.10") {
		t.Error("the copy was replaced by a lower serial")
	}
	if n := strings.Count(f.log.String(), "level=WARN msg=\"zone not refreshed"); n != 1 {
		t.Errorf("logged %d times at WARN, want once per state change:\n%s", n, f.log)
	}
}

func TestFailoverToSecondPrimary(t *testing.T) {
	dead := newPrimary(t, false)
	dead.close()
	p := newPrimary(t, false)
	p.set(10, "@ NS ns1", "www A 192.0.2.10")
	f := newFixture(t)
	b := f.open(false, readTimeout, dead.addr, p.addr)
	waitFor(t, "the AXFR from the second primary", b.Synced)
	first := newPrimary(t, false)
	first.set(10, "@ NS ns1", "www A 192.0.2.10")
	second := newPrimary(t, false)
	second.set(10, "@ NS ns1", "www A 192.0.2.10")
	g := newFixture(t)
	c := g.open(false, readTimeout, first.addr, second.addr)
	waitFor(t, "the AXFR from the first", c.Synced)
	if n := second.count(dns.TypeAXFR) + second.count(dns.TypeSOA); n != 0 {
		t.Errorf("the second primary was asked %d times while the first answered", n)
	}
}

func TestExpireAndRestartFromCopy(t *testing.T) {
	p := newPrimary(t, false)
	p.expire = 2
	p.set(10, "@ NS ns1", "www A 192.0.2.10")
	f := newFixture(t)
	b := f.open(false, readTimeout, p.addr)
	waitFor(t, "the first AXFR", b.Synced)
	_ = b.Close()
	p.close()

	// A restart with the primary down serves the saved copy at once.
	start := time.Now()
	c := f.open(false, readTimeout, p.addr)
	if !c.Synced() || !has(c, "www."+testZone, "192.0.2.10") {
		t.Fatalf("the saved copy is not served at start: %+v", lookup(c, "www."+testZone))
	}
	// Past the expire (from the last refresh, saved with the copy): SERVFAIL, EDE 22.
	waitFor(t, "the expire", func() bool { return lookup(c, "www."+testZone).Status == pipeline.Failed })
	if since := time.Since(start); since > 5*time.Second {
		t.Errorf("expired %v after the restart, want about 2 s after the last refresh", since)
	}
	r := lookup(c, "www."+testZone)
	if !errors.Is(r.Err, pipeline.ErrUnreachable) || c.Synced() {
		t.Errorf("expired: err %v, synced %v; want ErrUnreachable, not synced", r.Err, c.Synced())
	}
	if p := NewSource(c).Problem(); !strings.Contains(p, "zone expired") {
		t.Errorf("Problem() = %q", p)
	}
	if err := NewSource(c).List(testZone, func(dns.RR) bool { return true }); err == nil {
		t.Error("an expired zone can be listed for transfers")
	}
	// A restart after the expire serves nothing either.
	_ = c.Close()
	d := f.open(false, readTimeout, p.addr)
	if lookup(d, "www."+testZone).Status != pipeline.Failed {
		t.Error("an expired saved copy is served after a restart")
	}
}

func TestCorruptCopyIgnored(t *testing.T) {
	p := newPrimary(t, false)
	p.set(10, "@ NS ns1", "www A 192.0.2.10")
	f := newFixture(t)
	b := f.open(false, readTimeout, p.addr)
	waitFor(t, "the first AXFR", b.Synced)
	_ = b.Close()
	zf, _ := paths(f.dir, testZone)
	if err := os.WriteFile(zf, []byte("www IN A not-an-address\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	c := f.open(false, readTimeout, p.addr)
	waitFor(t, "the transfer anew", c.Synced)
	if !strings.Contains(f.log.String(), "saved copy of the zone ignored") {
		t.Errorf("the bad copy is not logged:\n%s", f.log)
	}
	if n := p.count(dns.TypeAXFR); n != 2 {
		t.Errorf("AXFR asked %d times, want 2", n)
	}
}

func TestApplyIXFR(t *testing.T) {
	rr := func(s string) dns.RR { return mustRR(t, s) }
	soa := func(n uint32) dns.RR {
		return rr("z. 60 IN SOA ns.z. h.z. " + itoa(n) + " 1 1 10 60")
	}
	cur := &copyOf{soa: soa(1).(*dns.SOA), rrs: []dns.RR{rr("a.z. 60 A 192.0.2.1"), rr("b.z. 60 A 192.0.2.2")}}
	// Two differences: 1→2 deletes a, adds c; 2→3 deletes c, adds d.
	got, err := fromIXFR(cur, []dns.RR{soa(3), soa(1), rr("A.z. 30 A 192.0.2.1"), soa(2), rr("c.z. 60 A 192.0.2.3"),
		soa(2), rr("c.z. 60 A 192.0.2.3"), soa(3), rr("d.z. 60 A 192.0.2.4"), soa(3)})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range got.rrs {
		names = append(names, r.Header().Name)
	}
	if strings.Join(names, " ") != "b.z. d.z." || got.soa.Serial != 3 {
		t.Errorf("applied: %v serial %d, want b.z. d.z. serial 3", names, got.soa.Serial)
	}
	if _, err := fromIXFR(cur, []dns.RR{soa(2), soa(1), rr("x.z. 60 A 192.0.2.9"), soa(2), soa(2)}); err == nil {
		t.Error("an IXFR deleting a record the copy lacks was applied")
	}
	if _, err := fromIXFR(cur, []dns.RR{soa(3), soa(2), soa(3), soa(3)}); err == nil {
		t.Error("an IXFR from another serial was applied")
	}
}

func TestParsePrimary(t *testing.T) {
	for in, want := range map[string]string{
		"10.0.0.5": "10.0.0.5:53", "10.0.0.6:5300": "10.0.0.6:5300", "2001:db8::5": "[2001:db8::5]:53",
		"[2001:db8::5]:5300": "[2001:db8::5]:5300", "[2001:db8::5]": "[2001:db8::5]:53",
	} {
		ap, err := ParsePrimary(in)
		if err != nil || ap.String() != want {
			t.Errorf("ParsePrimary(%q) = %v, %v; want %s", in, ap, err, want)
		}
	}
	for in, want := range map[string]string{
		"ns1.example.com": "not an IP address", "ns1.example.com:53": "not an IP address",
		"10.0.0.5:0": "bad port", "10.0.0.5:70000": "bad port", "10.0.0.5:x": "bad port",
	} {
		if _, err := ParsePrimary(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParsePrimary(%q) = %v, want an error saying %q", in, err, want)
		}
	}
}

// TestSeriesGoWithTheBackend: the zone's series stay while a backend of
// it runs and go with the last.
func TestSeriesGoWithTheBackend(t *testing.T) {
	p := newPrimary(t, false)
	p.set(10, "@ NS ns1", "www A 192.0.2.10")
	f := newFixture(t)
	a := f.open(false, readTimeout, p.addr)
	waitFor(t, "the first AXFR", a.Synced)
	b := f.open(false, readTimeout, p.addr)
	waitFor(t, "the second backend", b.Synced)
	_ = a.Close()
	if n := testutil.CollectAndCount(f.metrics.serial); n != 1 {
		t.Errorf("%d serial series while a backend runs, want 1", n)
	}
	_ = b.Close()
	if n := testutil.CollectAndCount(f.metrics.serial) + testutil.CollectAndCount(f.metrics.transfers); n != 0 {
		t.Errorf("%d series after the last backend closed, want 0", n)
	}
}
