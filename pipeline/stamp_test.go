package pipeline

import (
	"context"
	"net/netip"
	"testing"

	"github.com/miekg/dns"
)

// TestStamp: which answers are stamped (may be kept by the caller) and
// when a stamp stops being fresh.
func TestStamp(t *testing.T) {
	local := newFake(t, "hosts", 60, 5,
		"www.example.internal. 60 IN A 10.0.0.1",
		"chain.example.internal. 60 IN CNAME www.example.internal.",
		"out.example.internal. 60 IN CNAME www.other.internal.",
		"mx.example.internal. 60 IN MX 10 www.example.internal.",
		"srv.example.internal. 60 IN SRV 0 0 80 www.other.internal.",
	)
	other := newFake(t, "hosts", 60, 5, "www.other.internal. 60 IN A 10.0.0.2")
	fwd := newForward(t, "www.example.com. 60 IN A 192.0.2.1")
	mixed := newFake(t, "hosts", 60, 5, "local.mixed.internal. 60 IN A 10.0.0.3")
	p, err := New([]ZoneSpec{
		{Names: []string{"example.internal."}, Sources: []SourceEntry{{Source: local}}},
		{Names: []string{"other.internal."}, Sources: []SourceEntry{{Source: other}}},
		{Names: []string{"mixed.internal."}, Sources: []SourceEntry{{Source: mixed, Fallthrough: true}, {Source: fwd}}},
		{Names: []string{"."}, Sources: []SourceEntry{{Source: fwd}}},
	}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ask := func(p *Pipeline, name string, qt uint16, stamp bool) Response {
		m := new(dns.Msg)
		m.SetQuestion(name, qt)
		return p.Resolve(context.Background(), &Request{Msg: m, Name: name, Type: qt, Stamp: stamp})
	}
	for _, tc := range []struct {
		name    string
		qt      uint16
		stamped bool
	}{
		{"www.example.internal.", dns.TypeA, true},    // a hit
		{"www.example.internal.", dns.TypeTXT, true},  // NODATA
		{"nope.example.internal.", dns.TypeA, true},   // NXDOMAIN
		{"example.internal.", dns.TypeSOA, true},      // the apex
		{"local.mixed.internal.", dns.TypeA, true},    // local, before a forward source
		{"chain.example.internal.", dns.TypeA, false}, // a CNAME followed
		{"out.example.internal.", dns.TypeA, false},   // a CNAME into another zone
		{"mx.example.internal.", dns.TypeMX, false},   // additional records looked up
		{"srv.example.internal.", dns.TypeSRV, false}, // ... in another zone
		{"www.example.internal.", dns.TypeANY, false}, // ANY
		{"www.example.com.", dns.TypeA, false},        // forwarded
		{"fwd.mixed.internal.", dns.TypeA, false},     // fell through to the forward source
		{"www.nowhere.invalid.", dns.TypeA, false},    // the root's forward source
	} {
		r := ask(p, tc.name, tc.qt, true)
		if got := r.Stamp != (Stamp{}); got != tc.stamped {
			t.Errorf("%s %s: stamped %v, want %v", tc.name, dns.TypeToString[tc.qt], got, tc.stamped)
		}
		if tc.stamped && !fresh(t, p, r.Stamp) {
			t.Errorf("%s %s: a stamp just made is not fresh", tc.name, dns.TypeToString[tc.qt])
		}
		if r := ask(p, tc.name, tc.qt, false); r.Stamp != (Stamp{}) {
			t.Errorf("%s: stamped without being asked to", tc.name)
		}
	}

	r := ask(p, "www.example.internal.", dns.TypeA, true)
	o := ask(p, "www.other.internal.", dns.TypeA, true)
	other.serial.Add(1) // a change in another zone
	if !fresh(t, p, r.Stamp) {
		t.Error("a change in another zone made the stamp stale")
	}
	if fresh(t, p, o.Stamp) {
		t.Error("a change of the zone's source left its stamp fresh")
	}
	local.serial.Add(1)
	if fresh(t, p, r.Stamp) {
		t.Error("a change of the zone's source left its stamp fresh")
	}
	r = ask(p, "www.example.internal.", dns.TypeA, true)
	p2, err := New([]ZoneSpec{{Names: []string{"example.internal."}, Sources: []SourceEntry{{Source: local}}}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if fresh(t, p2, r.Stamp) {
		t.Error("a stamp of another generation is fresh")
	}
	if fresh(t, p, Stamp{}) {
		t.Error("the zero stamp is fresh")
	}

	// A forwarded answer from a Keeper is stamped with its message and is
	// fresh while the source says it would answer with the same one.
	kf := &keepingForward{fakeForward: newForward(t, "www.kept.internal. 60 IN A 192.0.2.8"), same: true}
	kl := newFake(t, "hosts", 60, 5, "local.kept.internal. 60 IN A 10.0.0.4")
	pk, err := New([]ZoneSpec{{Names: []string{"kept.internal."}, Sources: []SourceEntry{{Source: kl, Fallthrough: true}, {Source: kf}}}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	r = ask(pk, "www.kept.internal.", dns.TypeA, true)
	if r.Stamp == (Stamp{}) || !fresh(t, pk, r.Stamp) {
		t.Fatalf("a Keeper's answer: stamp %+v", r.Stamp)
	}
	if a := ask(pk, "www.kept.internal.", dns.TypeANY, true); a.Stamp != (Stamp{}) {
		t.Error("a forwarded ANY answer is stamped")
	}
	if fresh(t, pk, r.Stamp) {
		t.Error("fresh after the forward source answered with another message")
	}
	r = ask(pk, "www.kept.internal.", dns.TypeA, true)
	kf.age += 7 // Fresh says by how much the answer aged since it was made
	if aged, ok := pk.Fresh(r.Stamp); !ok || aged != 7 || !r.Stamp.Ages() {
		t.Errorf("7 s later: aged %d %v (ages: %v)", aged, ok, r.Stamp.Ages())
	}
	// The answer stamped again 7 s later from the same cache entry (this
	// fake makes a new message, its token, at each lookup; the forward
	// source's token is its cache entry): Since says it aged by 7 s, and
	// only for that.
	r7 := r.Stamp
	r7.age += 7
	if aged, ok := r.Stamp.Since(r7); !ok || aged != 7 {
		t.Errorf("Since, 7 s later: aged %d %v", aged, ok)
	}
	if _, ok := r7.Since(r.Stamp); ok {
		t.Error("Since backwards in time: ok")
	}
	if _, ok := r.Stamp.Since(ask(pk, "www.kept.internal.", dns.TypeA, true).Stamp); ok {
		t.Error("Since across two cache entries (tokens): ok")
	}
	if _, ok := r.Stamp.Since(ask(pk, "local.kept.internal.", dns.TypeA, true).Stamp); ok {
		t.Error("Since between a forwarded and a local answer: ok")
	}
	kf.age -= 7
	kf.same = false
	if fresh(t, pk, r.Stamp) {
		t.Error("fresh while the forward source would answer otherwise")
	}
	kf.same = true
	kl.serial.Add(1) // a local source before it changed: it may answer now
	if fresh(t, pk, r.Stamp) {
		t.Error("fresh after the zone's local source changed")
	}

	// With views, nothing is stamped (the answer depends on the client).
	pv, err := New([]ZoneSpec{{Names: []string{"example.internal."}, Sources: []SourceEntry{{Source: local}}}}, Options{
		Views: []ViewSpec{{Name: "lab", Clients: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")},
			Zones: []ZoneSpec{{Names: []string{"example.internal."}, Sources: []SourceEntry{{Source: other}}}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if r := ask(pv, "www.example.internal.", dns.TypeA, true); r.Stamp != (Stamp{}) {
		t.Error("stamped with views configured")
	}
}

// keepingForward is a fake forward source that is a Keeper: it pins its
// last message, which stays the same one while same is set.
type keepingForward struct {
	*fakeForward
	same bool
	age  uint32 // of the answers, in seconds
}

func (k *keepingForward) Pin(_ string, _ uint16, _, _ bool, m *dns.Msg) (any, uint32) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if m != k.last {
		return nil, 0
	}
	return m, k.age
}

func (k *keepingForward) Same(token any) (uint32, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.age, k.same && token == any(k.last)
}

// fresh is p.Fresh for stamps whose answers do not age.
func fresh(t *testing.T, p *Pipeline, st Stamp) bool {
	t.Helper()
	aged, ok := p.Fresh(st)
	if aged != 0 {
		t.Errorf("Fresh says the answer aged %d s", aged)
	}
	return ok
}
