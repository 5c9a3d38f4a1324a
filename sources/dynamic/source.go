package dynamic

import (
	"context"
	"errors"

	"github.com/miekg/dns"

	"github.com/dnsd/dnsd/pipeline"
)

// Source answers one zone entry from a Backend and takes its updates. It
// implements pipeline.Source, pipeline.Writer, pipeline.Lister and
// pipeline.Wildcarder.
type Source struct {
	b          *Backend
	ttl        uint32
	maxRecords int
}

var (
	_ pipeline.Source     = (*Source)(nil)
	_ pipeline.Writer     = (*Source)(nil)
	_ pipeline.Lister     = (*Source)(nil)
	_ pipeline.Wildcarder = (*Source)(nil)
)

// NewSource returns the source over b with c's ttl and record bound.
func NewSource(b *Backend, c *Config) *Source {
	return &Source{b: b, ttl: pipeline.TTLSeconds(c.TTL), maxRecords: c.MaxRecords}
}

// Lookup implements pipeline.Source: every record at the name, an empty
// Found for an empty non-terminal, else NotMine. It never waits for an
// update.
func (s *Source) Lookup(_ context.Context, q *pipeline.Question) pipeline.Result {
	e, ok := s.b.snapshot().get(q.Name)
	if !ok {
		return pipeline.Result{Status: pipeline.NotMine}
	}
	return pipeline.Result{Status: pipeline.Found, RRs: e.rrs}
}

// Kind implements pipeline.Source.
func (*Source) Kind() string { return "dynamic" }

// TTL implements pipeline.Source: the ttl setting.
func (s *Source) TTL() uint32 { return s.ttl }

// Serial implements pipeline.Source: rises with every commit that changes
// the store, once the change is served.
func (s *Source) Serial() uint32 { return s.b.snapshot().serial }

// Wildcards implements pipeline.Wildcarder: the store holds a name whose
// first label is "*".
func (s *Source) Wildcards() bool { return s.b.snapshot().wildcards > 0 }

// List implements pipeline.Lister: every record at names in zone, in
// canonical order of their owners. It does not fail: the store is loaded
// before the source exists.
func (s *Source) List(zone string, yield func(dns.RR) bool) error {
	ix := s.b.snapshot()
	for _, name := range ix.owners(zone) {
		for _, rr := range ix.rrs(name) {
			if !yield(rr) {
				return nil
			}
		}
	}
	return nil
}

// Records reports how many records the store holds.
func (s *Source) Records() int { return s.b.snapshot().records }

// BeginUpdate implements pipeline.Writer: it holds the zone key's update
// lock until Commit or Abort (one update at a time per store), or fails
// when ctx ends while another update holds it.
func (s *Source) BeginUpdate(ctx context.Context, zone string) (pipeline.UpdateTxn, error) {
	if err := s.b.begin(ctx, zone); err != nil {
		return nil, err
	}
	return &txn{s: s}, nil
}

// txn is one update holding the backend's update lock until it ends.
type txn struct {
	s    *Source
	done bool
}

// errDone: the update ended already.
var errDone = errors.New("the update has ended (committed or aborted)")

// Records implements pipeline.UpdateTxn: the records served now at name
// (no other update can change them while this one holds the lock).
func (t *txn) Records(name string) []dns.RR { return t.s.b.snapshot().rrs(name) }

// Commit implements pipeline.UpdateTxn: one fsync'd transaction, then the
// new records served with a higher serial. It ends the update, whether it
// succeeds or not. sets changing nothing commit nothing and keep the
// serial.
func (t *txn) Commit(ctx context.Context, sets map[string][]dns.RR) error {
	if t.done {
		return errDone
	}
	t.done = true
	defer t.s.b.end()
	return t.s.b.commit(ctx, sets, t.s.maxRecords)
}

// Abort implements pipeline.UpdateTxn.
func (t *txn) Abort() {
	if t.done {
		return
	}
	t.done = true
	t.s.b.end()
}
