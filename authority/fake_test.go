package authority

import (
	"context"
	"log/slog"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/miekg/dns"

	"github.com/dnsd/dnsd/internal/dnstest"
	"github.com/dnsd/dnsd/pipeline"
)

// fakeSource is an in-memory local source that lists its records (a
// pipeline.Lister): records by lower-case owner, explicit empty
// non-terminals, an optional permanent failure.
type fakeSource struct {
	kind   string
	ttl    uint32
	serial atomic.Uint32
	rrs    map[string][]dns.RR
	ents   map[string]bool
	fail   error
}

func newFake(t testing.TB, kind string, ttl, serial uint32, records ...string) *fakeSource {
	t.Helper()
	f := &fakeSource{kind: kind, ttl: ttl, rrs: make(map[string][]dns.RR), ents: make(map[string]bool)}
	f.serial.Store(serial)
	for _, s := range records {
		rr := dnstest.MustRR(t, s)
		name := rr.Header().Name
		f.rrs[name] = append(f.rrs[name], rr)
	}
	return f
}

func (f *fakeSource) Lookup(_ context.Context, q *pipeline.Question) pipeline.Result {
	if f.fail != nil {
		return pipeline.Result{Status: pipeline.Failed, Err: f.fail}
	}
	if rrs, ok := f.rrs[q.Name]; ok {
		return pipeline.Result{Status: pipeline.Found, RRs: rrs}
	}
	if f.ents[q.Name] {
		return pipeline.Result{Status: pipeline.Found}
	}
	return pipeline.Result{Status: pipeline.NotMine}
}

func (f *fakeSource) Kind() string   { return f.kind }
func (f *fakeSource) TTL() uint32    { return f.ttl }
func (f *fakeSource) Serial() uint32 { return f.serial.Load() }

// Wildcards reports holding wildcard records (pipeline.Wildcarder).
func (f *fakeSource) Wildcards() bool {
	for name := range f.rrs {
		if len(name) > 1 && name[:2] == "*." {
			return true
		}
	}
	return false
}

// listFake is a fakeSource that lists its records (a Lister).
type listFake struct{ *fakeSource }

func (l listFake) List(zone string, yield func(dns.RR) bool) error {
	if l.fail != nil {
		return l.fail
	}
	names := make([]string, 0, len(l.rrs))
	for n := range l.rrs {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		if !pipeline.InZone(n, zone) {
			continue
		}
		for _, rr := range l.rrs[n] {
			if !yield(rr) {
				return nil
			}
		}
	}
	return nil
}

// soaFake is a listFake holding the zone's own SOA (a zone file).
type soaFake struct {
	listFake
	soa    *dns.SOA
	notOwn bool // its serial does not follow its data (a zone file with inline records)
}

func (s soaFake) SOA(zone string) (*dns.SOA, bool) {
	if s.soa != nil && s.soa.Hdr.Name == zone {
		return s.soa, !s.notOwn
	}
	return nil, false
}

// fakeForward is a forward source that answers every name NXDOMAIN and
// records what it was asked: a transfer never asks it.
type fakeForward struct {
	mu    sync.Mutex
	asked []string
}

func newForward(testing.TB) *fakeForward { return &fakeForward{} }

func (f *fakeForward) Lookup(_ context.Context, q *pipeline.Question) pipeline.Result {
	f.mu.Lock()
	f.asked = append(f.asked, q.Name+" "+dns.TypeToString[q.Type])
	f.mu.Unlock()
	m := new(dns.Msg)
	m.SetQuestion(q.Name, q.Type)
	m.Response, m.Rcode = true, dns.RcodeNameError
	return pipeline.Result{Status: pipeline.Answered, Msg: m}
}

func (f *fakeForward) Kind() string   { return "forward" }
func (f *fakeForward) Remote() bool   { return true }
func (f *fakeForward) TTL() uint32    { return 0 }
func (f *fakeForward) Serial() uint32 { return 0 }

func (f *fakeForward) questions() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.asked...)
}

// gen is one generation: a pipeline and its transferred zones.
type gen struct {
	*pipeline.Pipeline
	*Zones
}

// genOptions are a test generation's pipeline and transfer options.
type genOptions struct {
	Serial    uint32
	NSAddrs   []netip.Addr
	Logger    *slog.Logger
	Transfers []TransferSpec
	Journal   *Journal
	Prev      *gen
}

// newGen builds a generation as the daemon does: the pipeline, then its
// transferred zones.
func newGen(zones []pipeline.ZoneSpec, o genOptions) (*gen, error) {
	popts := pipeline.Options{Serial: o.Serial, NSAddrs: o.NSAddrs, Logger: o.Logger}
	aopts := Options{Transfers: o.Transfers, Journal: o.Journal, Logger: o.Logger}
	if o.Prev != nil {
		popts.Prev, aopts.Prev = o.Prev.Pipeline, o.Prev.Zones
	}
	p, err := pipeline.New(zones, popts)
	if err != nil {
		return nil, err
	}
	a, err := New(p, aopts)
	if err != nil {
		return nil, err
	}
	return &gen{p, a}, nil
}
