package authority

import (
	"context"
	"net/netip"
	"testing"

	"github.com/miekg/dns"

	"github.com/dnsd/dnsd/pipeline"
)

// errWriter is a writable fake whose Commits fail with errs, in turn,
// then succeed (storing the sets in its fake's records).
type errWriter struct {
	*fakeSource
	errs   []error
	before func() // run by each Commit first, when set
	begins int
}

func (w *errWriter) BeginUpdate(context.Context, string) (pipeline.UpdateTxn, error) {
	w.begins++
	return &errTxn{w: w}, nil
}

type errTxn struct{ w *errWriter }

func (t *errTxn) Records(name string) []dns.RR { return t.w.rrs[name] }

func (t *errTxn) Commit(_ context.Context, sets map[string][]dns.RR) error {
	if t.w.before != nil {
		t.w.before()
		t.w.before = nil
	}
	if len(t.w.errs) > 0 {
		err := t.w.errs[0]
		t.w.errs = t.w.errs[1:]
		return err
	}
	for name, rrs := range sets {
		t.w.rrs[name] = rrs
	}
	return nil
}

func (t *errTxn) Abort() {}

// TestUpdateCommitErrors: a source that cannot hold a record refuses the
// update with its reason; a conflict makes the update begin again and
// check its prerequisites again.
func TestUpdateCommitErrors(t *testing.T) {
	w := &errWriter{fakeSource: newFake(t, "etcd", 300, 1)}
	p, err := pipeline.New([]pipeline.ZoneSpec{{Names: []string{"corp.test."}, Sources: []pipeline.SourceEntry{{Source: w}}}}, pipeline.Options{})
	if err != nil {
		t.Fatal(err)
	}
	z, err := New(p, Options{Updates: []UpdateSpec{{Zones: []string{"corp.test."}}}})
	if err != nil {
		t.Fatal(err)
	}
	send := func(m *dns.Msg) UpdateAnswer {
		wire, err := m.Pack()
		if err != nil {
			t.Fatal(err)
		}
		q := new(dns.Msg)
		if err := q.Unpack(wire); err != nil {
			t.Fatal(err)
		}
		return z.Update(context.Background(), q, wire, netip.MustParseAddr("127.0.0.1"))
	}

	const reason = "the etcd source cannot hold DHCID records"
	w.errs = []error{pipeline.NotRepresentable(reason)}
	m := updateMsg("corp.test.")
	m.Insert(rrs(t, "h.corp.test. 60 IN DHCID AAIBY2/AuCccgoJbsaxcQc9TUapptP69lOjxfNuVAA2kjEA="))
	if a := send(m); a.Rcode != dns.RcodeRefused || a.Reason != reason || a.Result != UpdateRefused {
		t.Errorf("not representable: %s %q %s, want REFUSED %q", dns.RcodeToString[a.Rcode], a.Reason, a.Result, reason)
	}

	// The conflict's winner added the name meanwhile: checked again, the
	// prerequisite fails (YXDOMAIN), not the server.
	w.begins = 0
	w.errs = []error{pipeline.ErrUpdateConflict}
	m = updateMsg("corp.test.")
	m.NameNotUsed(rrs(t, "x.corp.test. 0 IN A 0.0.0.0"))
	m.Insert(rrs(t, "x.corp.test. 60 IN A 192.0.2.1"))
	w.before = func() { w.rrs["x.corp.test."] = rrs(t, "x.corp.test. 60 IN A 192.0.2.2") }
	if a := send(m); a.Rcode != dns.RcodeYXDomain || w.begins != 2 {
		t.Errorf("conflict: %s after %d begins, want YXDOMAIN after 2", dns.RcodeToString[a.Rcode], w.begins)
	}
}
