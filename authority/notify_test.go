package authority

import (
	"context"
	"log/slog"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/dnsd/dnsd/internal/dnstest"
	"github.com/dnsd/dnsd/pipeline"
)

// serialSource is a local source whose serial the test sets.
type serialSource struct{ serial atomic.Uint32 }

func (s *serialSource) Lookup(context.Context, *pipeline.Question) pipeline.Result {
	return pipeline.Result{Status: pipeline.NotMine}
}
func (s *serialSource) Kind() string   { return "hosts" }
func (s *serialSource) TTL() uint32    { return 60 }
func (s *serialSource) Serial() uint32 { return s.serial.Load() }

func notifyPipeline(t *testing.T, src pipeline.Source, zone, target string) *Zones {
	t.Helper()
	p, err := newZones([]pipeline.ZoneSpec{{Names: []string{zone}, Sources: []pipeline.SourceEntry{{Source: src}}}}, TransferSpec{Zones: []string{zone}, Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}, Notify: []string{target}})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// startNotifier runs the NOTIFY loop over a pipeline in which src serves
// zone example. with sec as its notify target, looking every 10 ms, with
// the given gap between rounds and timeout per attempt. cur holds the
// pipeline the loop reads (a test may swap it). Closed when the test ends.
func startNotifier(t *testing.T, src pipeline.Source, sec *dnstest.Secondary, gap, timeout time.Duration) (s *Notifier, cur *atomic.Pointer[Zones]) {
	t.Helper()
	cur = new(atomic.Pointer[Zones])
	cur.Store(notifyPipeline(t, src, "example.", sec.Addr))
	s = NewNotifier(cur.Load, discardCounter{}, slog.New(slog.DiscardHandler))
	s.check, s.gap, s.timeout = 10*time.Millisecond, gap, timeout
	s.Start()
	t.Cleanup(s.Close)
	return s, cur
}

func TestNotifyCoalescedAndRetried(t *testing.T) {
	sec := dnstest.StartSecondary(t, 1) // the first NOTIFY is lost
	src := &serialSource{}
	src.serial.Store(100)
	s, cur := startNotifier(t, src, sec, 300*time.Millisecond, 100*time.Millisecond)

	waitUntil := func(what string, ok func([]uint32) bool) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for !ok(sec.Serials()) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: NOTIFYs seen %v", what, sec.Serials())
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	// At start: one NOTIFY, lost, then retried.
	waitUntil("start-up NOTIFY retried", func(g []uint32) bool { return len(g) == 2 && g[0] == 100 && g[1] == 100 })

	// A burst of changes: one more NOTIFY with the last serial, after the gap.
	for i := uint32(101); i <= 110; i++ {
		src.serial.Store(i)
		time.Sleep(5 * time.Millisecond)
	}
	waitUntil("coalesced NOTIFY", func(g []uint32) bool { return len(g) >= 3 })
	time.Sleep(2 * s.gap)
	if got := sec.Serials(); len(got) != 3 || got[2] != 110 {
		t.Errorf("after a burst of 10 changes: NOTIFYs %v, want one more with serial 110", got)
	}

	// A reload that drops the zone's notify list: nothing more is sent.
	p2, err := newZones([]pipeline.ZoneSpec{{Names: []string{"example."}, Sources: []pipeline.SourceEntry{{Source: src}}}})
	if err != nil {
		t.Fatal(err)
	}
	cur.Store(p2)
	src.serial.Store(200)
	time.Sleep(3 * s.gap)
	if got := sec.Serials(); len(got) != 3 {
		t.Errorf("after the zone left transfer: NOTIFYs %v", got)
	}
}

func TestNotifyGivesUp(t *testing.T) {
	sec := dnstest.StartSecondary(t, 1000) // never answers
	src := &serialSource{}
	src.serial.Store(1)
	s, _ := startNotifier(t, src, sec, time.Hour, 50*time.Millisecond)
	time.Sleep(500 * time.Millisecond)
	s.Close() // returns: the loop and its sends are stopped
	if got := sec.Serials(); len(got) != notifyTries {
		t.Errorf("%d attempts, want %d", len(got), notifyTries)
	}
}

// syncingSource is a serialSource that has synced only when told.
type syncingSource struct {
	serialSource
	synced atomic.Bool
}

func (s *syncingSource) Synced() bool                     { return s.synced.Load() }
func (s *syncingSource) WaitSynced(context.Context) error { return nil }

// No NOTIFY for a zone whose sources have not synced (the secondary's
// transfer would fail); once they have, it goes out. A retry carries the
// zone's SOA as it is at the retry.
func TestNotifyWaitsForSyncAndRetriesCurrentSOA(t *testing.T) {
	sec := dnstest.StartSecondary(t, 1) // the first NOTIFY is lost
	src := &syncingSource{}
	src.serial.Store(100)
	startNotifier(t, src, sec, 50*time.Millisecond, 300*time.Millisecond)
	time.Sleep(200 * time.Millisecond)
	if got := sec.Serials(); len(got) != 0 {
		t.Fatalf("NOTIFYs %v before the zone's source synced", got)
	}
	src.synced.Store(true)
	deadline := time.Now().Add(5 * time.Second)
	for len(sec.Serials()) == 0 && time.Now().Before(deadline) {
		time.Sleep(2 * time.Millisecond)
	}
	src.serial.Store(101) // changed while the first NOTIFY waits for an answer
	for len(sec.Serials()) < 2 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if got := sec.Serials(); len(got) < 2 || got[0] != 100 || got[1] != 101 {
		t.Errorf("NOTIFYs %v, want 100 (lost) then the retry with the current serial 101", got)
	}
}

// A signed NOTIFY whose reply comes back unsigned is not taken as
// acknowledged (anyone could have sent that reply): it is tried again, and
// counts as failed in the end.
func TestSignedNotifyWantsASignedReply(t *testing.T) {
	sec := dnstest.StartSecondary(t, 0) // answers every NOTIFY, unsigned
	src := &serialSource{}
	src.serial.Store(1)
	key := &TSIGKey{Name: "xfr-key.", Algorithm: dns.HmacSHA256, Secret: "c2VjcmV0LXNlY3JldC1zZWNyZXQtMzItYnl0ZXMhIQ=="}
	p, err := newZones([]pipeline.ZoneSpec{{Names: []string{"example."}, Sources: []pipeline.SourceEntry{{Source: src}}}}, TransferSpec{Zones: []string{"example."}, Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")},
		Notify: []string{sec.Addr}, Key: key})
	if err != nil {
		t.Fatal(err)
	}
	cur := new(atomic.Pointer[Zones])
	cur.Store(p)
	s := NewNotifier(cur.Load, discardCounter{}, slog.New(slog.DiscardHandler))
	s.check, s.gap, s.timeout = 10*time.Millisecond, time.Hour, 50*time.Millisecond
	s.Start()
	dnstest.Eventually(t, "every attempt made", 5*time.Second, func() bool { return len(sec.Serials()) >= notifyTries })
	time.Sleep(200 * time.Millisecond)
	s.Close()
	if got := len(sec.Serials()); got != notifyTries {
		t.Errorf("%d attempts, want %d: an unsigned reply is no acknowledgement", got, notifyTries)
	}

	// An unsigned error answer (NOTAUTH: the secondary lacks the key or
	// the zone; RFC 8945 has such errors unsigned) is the secondary's
	// no: no retries.
	refusing := dnstest.StartSecondary(t, 0)
	refusing.Refuse(dns.RcodeNotAuth)
	p2, err := newZones([]pipeline.ZoneSpec{{Names: []string{"example."}, Sources: []pipeline.SourceEntry{{Source: src}}}}, TransferSpec{Zones: []string{"example."}, Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")},
		Notify: []string{refusing.Addr}, Key: key})
	if err != nil {
		t.Fatal(err)
	}
	cur.Store(p2)
	s2 := NewNotifier(cur.Load, discardCounter{}, slog.New(slog.DiscardHandler))
	s2.check, s2.gap, s2.timeout = 10*time.Millisecond, time.Hour, 50*time.Millisecond
	s2.Start()
	dnstest.Eventually(t, "the NOTIFY sent", 5*time.Second, func() bool { return len(refusing.Serials()) >= 1 })
	time.Sleep(300 * time.Millisecond)
	s2.Close()
	if got := len(refusing.Serials()); got != 1 {
		t.Errorf("%d attempts at a secondary answering NOTAUTH, want 1 (it refused)", got)
	}
}

// newZones builds a pipeline of zones and the transferred zones of specs.
func newZones(zones []pipeline.ZoneSpec, specs ...TransferSpec) (*Zones, error) {
	p, err := pipeline.New(zones, pipeline.Options{})
	if err != nil {
		return nil, err
	}
	return New(p, Options{Transfers: specs})
}

// discardCounter counts nothing.
type discardCounter struct{}

func (discardCounter) Notify(string, string) {}

// takerFake is a fakeSource copied from a primary (a pipeline.NotifyTaker)
// that counts the NOTIFYs passed on.
type takerFake struct {
	*fakeSource
	primary  netip.Addr
	notified atomic.Int32
}

func (f *takerFake) NotifyFrom(_ string, addr netip.Addr) (*pipeline.TSIGKey, bool) {
	return nil, addr == f.primary
}
func (f *takerFake) Notify(string) { f.notified.Add(1) }

func TestNotifyInAnswers(t *testing.T) {
	primary := netip.MustParseAddr("192.0.2.1")
	notify := func(zone string) *dns.Msg {
		m := new(dns.Msg)
		m.SetNotify(zone)
		return m
	}
	// No zone is a copy: NOTIFY is not implemented at all.
	plain, err := newZones([]pipeline.ZoneSpec{{Names: []string{"example."}, Sources: []pipeline.SourceEntry{{Source: newFake(t, "hosts", 60, 1)}}}})
	if err != nil {
		t.Fatal(err)
	}
	if got := plain.NotifyIn(notify("example."), nil, primary).Rcode; got != dns.RcodeNotImplemented {
		t.Errorf("NOTIFY without a secondary zone: %s, want NOTIMP", dns.RcodeToString[got])
	}

	taker := &takerFake{fakeSource: newFake(t, "secondary", 60, 1), primary: primary}
	a, err := newZones([]pipeline.ZoneSpec{
		{Names: []string{"copy."}, Sources: []pipeline.SourceEntry{{Source: taker}}},
		{Names: []string{"example."}, Sources: []pipeline.SourceEntry{{Source: newFake(t, "hosts", 60, 1)}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		zone  string
		from  netip.Addr
		rcode int
	}{
		{"copy.", primary, dns.RcodeSuccess},
		{"COPY.", primary, dns.RcodeSuccess},
		{"copy.", netip.MustParseAddr("192.0.2.9"), dns.RcodeRefused},
		{"example.", primary, dns.RcodeNotAuth},
		{"elsewhere.", primary, dns.RcodeNotAuth},
	}
	for _, c := range cases {
		if got := a.NotifyIn(notify(c.zone), nil, c.from).Rcode; got != c.rcode {
			t.Errorf("NOTIFY %s from %s: %s, want %s", c.zone, c.from, dns.RcodeToString[got], dns.RcodeToString[c.rcode])
		}
	}
	if got := taker.notified.Load(); got != 2 {
		t.Errorf("the copy was told of %d NOTIFYs, want 2", got)
	}
}
