package etcd

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/dnsd/dnsd/sources/etcd/etcdtest"
)

// TestList: a transfer lists every name with what Lookup answers for it:
// keys below a name are records of that name too (SkyDNS), apex records
// come from the apex and apex.dns keys, wildcards are listed as they are.
func TestList(t *testing.T) {
	srv := etcdtest.Start(t, etcdtest.Options{})
	srv.Put("/skydns/local/skydns/web/x1", `{"host":"10.0.1.1"}`)
	srv.Put("/skydns/local/skydns/web/x2", `{"host":"10.0.1.2"}`)
	srv.Put("/skydns/local/skydns/*/apps", `{"host":"10.0.0.80"}`)
	srv.Put("/skydns/local/skydns/dns/apex/mx", `{"host":"mail.skydns.local","mail":true}`)
	srv.Put("/skydns/local/other/x", `{"host":"10.9.9.9"}`)
	f := openFixture(t, srv, nil)
	src := NewSource(f.b, testZones, 300*time.Second)
	if err := src.List("skydns.local.", func(dns.RR) bool { return true }); err == nil && !f.b.Synced() {
		t.Error("List before the first sync did not fail")
	}
	f.waitSynced()
	var got []string
	if err := src.List("skydns.local.", func(rr dns.RR) bool {
		got = append(got, strings.Join(strings.Fields(rr.String()), " "))
		return true
	}); err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	want := []string{
		"*.skydns.local. 300 IN A 10.0.0.80",
		"apex.dns.skydns.local. 300 IN MX 10 mail.skydns.local.",
		"apps.*.skydns.local. 300 IN A 10.0.0.80", // a key under "*": the name the index holds
		"mx.apex.dns.skydns.local. 300 IN MX 10 mail.skydns.local.",
		"skydns.local. 300 IN MX 10 mail.skydns.local.",
		"web.skydns.local. 300 IN A 10.0.1.1",
		"web.skydns.local. 300 IN A 10.0.1.2",
		"x1.web.skydns.local. 300 IN A 10.0.1.1",
		"x2.web.skydns.local. 300 IN A 10.0.1.2",
	}
	if !slices.Equal(got, want) {
		t.Errorf("listed:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
