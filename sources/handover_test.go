package sources

import (
	"context"
	"net/netip"
	"testing"

	"github.com/miekg/dns"

	"github.com/dnsd/dnsd/pipeline"
)

// stubSource is a local source that reports wildcards as told and has
// synced as told.
type stubSource struct {
	wild, synced bool
	serial       uint32
}

func (s *stubSource) Lookup(context.Context, *pipeline.Question) pipeline.Result {
	return pipeline.Result{Status: pipeline.NotMine}
}
func (s *stubSource) Kind() string                     { return "stub" }
func (s *stubSource) TTL() uint32                      { return 60 }
func (s *stubSource) Serial() uint32                   { return max(1, s.serial) }
func (s *stubSource) Wildcards() bool                  { return s.wild }
func (s *stubSource) Synced() bool                     { return s.synced }
func (s *stubSource) WaitSynced(context.Context) error { return nil }

// plainSource holds no wildcards (no Wildcarder).
type plainSource struct{}

func (plainSource) Lookup(context.Context, *pipeline.Question) pipeline.Result {
	return pipeline.Result{Status: pipeline.NotMine}
}
func (plainSource) Kind() string   { return "plain" }
func (plainSource) TTL() uint32    { return 60 }
func (plainSource) Serial() uint32 { return 1 }

// A handover reports the wildcards of the source answering through it.
func TestHandoverWildcards(t *testing.T) {
	next := &stubSource{wild: false}
	h := &handover{next: next, nextSync: next, prev: &stubSource{wild: true}}
	if !h.Wildcards() {
		t.Error("before the switch: the old source's wildcards are hidden")
	}
	next.synced = true
	if h.Wildcards() {
		t.Error("after the switch: still the old source's wildcards")
	}
	next.wild = true
	if !h.Wildcards() {
		t.Error("after the switch: the new source's wildcards are hidden")
	}
	next2 := &stubSource{}
	if (&handover{next: next2, nextSync: next2, prev: plainSource{}}).Wildcards() {
		t.Error("a source without Wildcarder reported wildcards")
	}
}

// The zone's serial moves when a handover switches to the new source (the
// answering data changes), and never goes backwards.
func TestHandoverSerialMovesAtTheSwitch(t *testing.T) {
	prev, next := &stubSource{serial: 50}, &stubSource{serial: 70}
	h := &handover{next: next, nextSync: next, prev: prev}
	before := h.Serial()
	if before != 70 {
		t.Fatalf("before the switch: serial %d, want 70 (the larger)", before)
	}
	next.synced = true
	after := h.Serial()
	if after <= before {
		t.Fatalf("serial %d after the switch, %d before: it must rise", after, before)
	}
	next.serial = 71 // a later change of next: a new serial of the clock
	if s := h.Serial(); s < after {
		t.Fatalf("serial went back from %d to %d", after, s)
	}
}

// troubledSource is a stub whose backend reports a server and a problem.
type troubledSource struct {
	stubSource
	endpoint, problem string
}

func (s *troubledSource) Endpoint() string { return s.endpoint }
func (s *troubledSource) Problem() string  { return s.problem }

// A handover names the replacement's server and, until it has synced,
// says that the previous backend answers and why either is unwell (so
// /ready keeps the causes during an outage); after the switch, the
// replacement's own problem.
func TestHandoverProblem(t *testing.T) {
	next := &troubledSource{endpoint: "http://10.0.0.2:2379", problem: "connection refused"}
	prev := &troubledSource{stubSource: stubSource{synced: true}, endpoint: "http://10.0.0.1:2379", problem: "i/o timeout"}
	h := &handover{next: next, nextSync: next, prev: prev}
	var _ pipeline.Troubled = h
	if h.Endpoint() != "http://10.0.0.2:2379" {
		t.Errorf("endpoint %q", h.Endpoint())
	}
	want := "replacement not synced yet, the previous backend answers: connection refused; the previous backend: i/o timeout"
	if got := h.Problem(); got != want {
		t.Errorf("problem %q, want %q", got, want)
	}
	next.synced, next.problem = true, ""
	if got := h.Problem(); got != "" {
		t.Errorf("after the switch, a healthy replacement: problem %q", got)
	}
}

// takerSource is a stub copy of a zone: a NOTIFY taker that holds the
// zone signed as told.
type takerSource struct {
	stubSource
	signed   bool
	notified []string
}

func (s *takerSource) NotifyFrom(_ string, addr netip.Addr) (*pipeline.TSIGKey, bool) {
	return nil, addr == netip.MustParseAddr("192.0.2.53")
}
func (s *takerSource) Notify(zone string)            { s.notified = append(s.notified, zone) }
func (s *takerSource) Presigned(string) bool         { return s.signed }
func (s *takerSource) NSEC(string, string) []dns.RR  { return nil }
func (s *takerSource) NSEC3(string, string) []dns.RR { return nil }

// The handover of a zone copy stays a NOTIFY taker (the new source's
// primaries, the new source refreshed) and presigned as the answering
// source is; that of a plain source is neither.
func TestHandoverOfACopy(t *testing.T) {
	prev, next := &takerSource{signed: true}, &takerSource{}
	src := wrapHandover(&handover{next: next, nextSync: next, prev: prev})
	n, ok := src.(pipeline.NotifyTaker)
	if !ok {
		t.Fatal("the handover of a copy is no NOTIFY taker: NOTIFYs would be NOTAUTH during the reload")
	}
	if _, primary := n.NotifyFrom("z.test.", netip.MustParseAddr("192.0.2.53")); !primary {
		t.Error("the new source's primary is not taken")
	}
	n.Notify("z.test.")
	if len(next.notified) != 1 || len(prev.notified) != 0 {
		t.Errorf("NOTIFY reached new %v, old %v; want the new source", next.notified, prev.notified)
	}
	p := src.(pipeline.Presigned)
	if !p.Presigned("z.test.") {
		t.Error("before the switch the old source answers, signed: not presigned")
	}
	next.synced = true
	if p.Presigned("z.test.") {
		t.Error("after the switch the new, unsigned source answers: still presigned")
	}
	if _, ok := wrapHandover(&handover{next: &stubSource{}, prev: plainSource{}}).(pipeline.NotifyTaker); ok {
		t.Error("the handover of a plain source takes NOTIFYs")
	}
}
