package pipeline

import (
	"net/netip"
	"testing"
)

func TestViewPick(t *testing.T) {
	p := &Pipeline{}
	specs := []ViewSpec{
		{Name: "v6", Clients: []netip.Prefix{netip.MustParsePrefix("fd00:1::/32")}},
		{Name: "wide", Clients: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("192.168.7.7/32")}},
		{Name: "narrow", Clients: []netip.Prefix{netip.MustParsePrefix("10.1.0.0/16")}},
		{Name: "port", Listen: []string{"udp 127.0.0.1:53"}},
		{Name: "mapped", Clients: []netip.Prefix{netip.MustParsePrefix("::ffff:172.16.0.0/108")}},
	}
	vs, errs := p.compileViews(specs, map[any]struct{}{})
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	for _, c := range []struct {
		client, listen, want string
	}{
		{"10.1.2.3", "", "wide"}, // both wide and narrow match: the first wins
		{"10.200.0.1", "", "wide"},
		{"192.168.7.7", "", "wide"},
		{"192.168.7.8", "", ""},
		{"11.0.0.1", "", ""},
		{"11.0.0.1", "udp 127.0.0.1:53", "port"},
		{"11.0.0.1", "tcp 127.0.0.1:53", ""},
		{"fd00:1:2::5", "", "v6"},
		{"fd00:2::5", "", ""},
		{"172.16.5.5", "", "mapped"},
		{"::ffff:10.9.9.9", "", "wide"},
	} {
		a := netip.MustParseAddr(c.client).Unmap()
		got := ""
		if v := vs.pick(a, c.listen); v != nil {
			got = v.name
		}
		if got != c.want {
			t.Errorf("client %s listen %q: view %q, want %q", c.client, c.listen, got, c.want)
		}
	}
	if _, errs := p.compileViews([]ViewSpec{{Name: "a"}, {Name: "a"}}, map[any]struct{}{}); len(errs) == 0 {
		t.Error("two views named alike compiled")
	}
}

func BenchmarkViewPick(b *testing.B) {
	p := &Pipeline{}
	var specs []ViewSpec
	for i := 0; i < 50; i++ {
		specs = append(specs, ViewSpec{Name: string(rune('a'+i%26)) + string(rune('a'+i/26)), Clients: []netip.Prefix{netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i), 0, 0}), 16)}})
	}
	vs, errs := p.compileViews(specs, map[any]struct{}{})
	if len(errs) > 0 {
		b.Fatal(errs)
	}
	a := netip.MustParseAddr("10.49.3.4")
	b.ReportAllocs()
	for b.Loop() {
		if vs.pick(a, "") == nil {
			b.Fatal("no view")
		}
	}
}
