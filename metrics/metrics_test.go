package metrics

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
)

// Every query is counted under its labels, from many goroutines at once,
// and the cached children are the registry's (what /metrics shows).
func TestQueryCounts(t *testing.T) {
	m := New("test", "none")
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 1000 {
				qtype := dns.TypeA
				if i%2 == 1 {
					qtype = dns.TypeAAAA
				}
				zone := "example.internal."
				if g%2 == 1 {
					zone = ""
				}
				m.Query("", zone, "udp", qtype, dns.RcodeSuccess, "hosts", time.Millisecond)
			}
		}()
	}
	m.Query("v1", "example.internal.", "tcp", 65000, 4242, "forward", time.Millisecond)
	wg.Wait()
	if got := testutil.ToFloat64(m.requests.WithLabelValues("default", "example.internal.", "udp", "A")); got != 2000 {
		t.Errorf("requests{default,example.internal.,udp,A} = %v, want 2000", got)
	}
	if got := testutil.ToFloat64(m.requests.WithLabelValues("default", NoZone, "udp", "AAAA")); got != 2000 {
		t.Errorf("requests{default,none,udp,AAAA} = %v, want 2000", got)
	}
	if got := testutil.ToFloat64(m.responses.WithLabelValues("default", "example.internal.", "NOERROR", "hosts")); got != 4000 {
		t.Errorf("responses{...NOERROR,hosts} = %v, want 4000", got)
	}
	if got := testutil.ToFloat64(m.requests.WithLabelValues("v1", "example.internal.", "tcp", Other)); got != 1 {
		t.Errorf("an unknown qtype is counted as other: %v", got)
	}
	if got := testutil.ToFloat64(m.responses.WithLabelValues("v1", "example.internal.", Other, "forward")); got != 1 {
		t.Errorf("an unknown rcode is counted as other: %v", got)
	}
	// 0 (also a message without a question) and 65535 have names in
	// miekg/dns's table ("None", "Reserved") but are no types.
	m.Query("v1", "example.internal.", "tcp", dns.TypeNone, dns.RcodeFormatError, "", time.Millisecond)
	m.Query("v1", "example.internal.", "tcp", dns.TypeReserved, dns.RcodeFormatError, "", time.Millisecond)
	if got := testutil.ToFloat64(m.requests.WithLabelValues("v1", "example.internal.", "tcp", Other)); got != 3 {
		t.Errorf("types 0 and 65535 are counted as other: %v, want 3", got)
	}
	m.Query("", "example.internal.", "udp", dns.TypeA, dns.RcodeBadVers, "", time.Millisecond)
	if got := testutil.ToFloat64(m.responses.WithLabelValues("default", "example.internal.", "BADVERS", "")); got != 1 {
		t.Errorf("rcode 16 of a response is counted as BADVERS: %v", got)
	}
	if n := testutil.CollectAndCount(m.duration); n != 2 {
		t.Errorf("%d duration series, want 2 (the zone and none)", n)
	}
	out, err := testutil.CollectAndLint(m.requests)
	if err != nil || len(out) != 0 {
		t.Errorf("lint: %v %v", out, err)
	}
	if !strings.Contains(DefaultView, "default") {
		t.Fatal("default view label")
	}
}

// Series are found by the strings' contents: the same zone name stored
// twice counts in one series; more tuples than the recent-entry slots
// (colliding there all the time) are each counted exactly; and types or
// codes without a name, however many, add one entry, not one each.
func TestQuerySeriesByContent(t *testing.T) {
	m := New("test", "none")
	zones := make([]string, 600)
	for i := range zones {
		zones[i] = fmt.Sprintf("z%d.internal.", i)
	}
	for round := range 3 {
		for i, z := range zones {
			if round == 1 {
				z = strings.Clone(z)
			}
			m.Query("", z, "udp", dns.TypeA, dns.RcodeSuccess, "hosts", time.Millisecond)
			if i%100 == 0 {
				m.Query("", z, "udp", uint16(60000+i+round), 3000+i+round, "hosts", time.Millisecond)
			}
		}
	}
	for _, i := range []int{0, 1, 299, 599} {
		if got := testutil.ToFloat64(m.requests.WithLabelValues("default", zones[i], "udp", "A")); got != 3 {
			t.Errorf("requests{%s,A} = %v, want 3", zones[i], got)
		}
	}
	if got := testutil.ToFloat64(m.requests.WithLabelValues("default", "z100.internal.", "udp", Other)); got != 3 {
		t.Errorf("requests{z100,other} = %v, want 3", got)
	}
	if got := testutil.ToFloat64(m.responses.WithLabelValues("default", "z100.internal.", Other, "hosts")); got != 3 {
		t.Errorf("responses{z100,other} = %v, want 3", got)
	}
	n := 0
	m.queries.Range(func(any, any) bool { n++; return true })
	if n != len(zones)+len(zones)/100 {
		t.Errorf("%d entries for %d zones, %d of them with unnamed types and codes", n, len(zones), len(zones)/100)
	}
}

func BenchmarkQuery(b *testing.B) {
	m := New("test", "none")
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			m.Query("", "example.internal.", "udp", dns.TypeA, dns.RcodeSuccess, "hosts", 50*time.Microsecond)
		}
	})
}

// KeepZones deletes the series of pairs no longer configured, keeps the
// rest with their counts, and a later query of a deleted pair counts
// from zero on a new series (not on a cached child /metrics no longer
// reports).
func TestKeepZones(t *testing.T) {
	m := New("test", "none")
	for range 3 {
		m.Query("", "a.test.", "udp", dns.TypeA, dns.RcodeSuccess, "hosts", time.Millisecond)
		m.Query("", "b.test.", "udp", dns.TypeA, dns.RcodeSuccess, "hosts", time.Millisecond)
		m.Query("v1", "b.test.", "udp", dns.TypeA, dns.RcodeSuccess, "hosts", time.Millisecond)
		m.Query("", "", "udp", dns.TypeA, dns.RcodeRefused, "", time.Millisecond)
		m.Query("v2", "", "udp", dns.TypeA, dns.RcodeRefused, "", time.Millisecond)
	}
	m.Transfer("b.test.", "ok")
	m.Transfer("c.test.", "ok") // transferred, never queried, then removed
	m.Notify("c.test.", "sent")
	// b.test. stays in view v1 only; the default view loses it; view v2
	// is removed, with its queries that no zone matched.
	m.KeepZones(func(view, zone string) bool {
		return zone == "a.test." || view == "v1" || view == "" && zone == ""
	}, func(z string) bool { return z != "c.test." })
	count := func(view, zone string) int {
		n := 0
		ch := make(chan prometheus.Metric, 100)
		m.requests.Collect(ch)
		close(ch)
		for x := range ch {
			var d dto.Metric
			_ = x.Write(&d)
			labels := map[string]string{}
			for _, l := range d.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["view"] == view && labels["zone"] == zone {
				n += int(d.GetCounter().GetValue())
			}
		}
		return n
	}
	for _, c := range []struct {
		view, zone string
		want       int
	}{{"default", "a.test.", 3}, {"default", "b.test.", 0}, {"v1", "b.test.", 3}, {"default", NoZone, 3}, {"v2", NoZone, 0}} {
		if got := count(c.view, c.zone); got != c.want {
			t.Errorf("view %s zone %s: %d, want %d", c.view, c.zone, got, c.want)
		}
	}
	if got := testutil.ToFloat64(m.transfers.WithLabelValues("b.test.", "ok")); got != 1 {
		t.Errorf("transfers of b.test., configured in a view: %v, want kept", got)
	}
	if n := testutil.CollectAndCount(m.transfers) + testutil.CollectAndCount(m.notifies); n != 1 {
		t.Errorf("%d transfer and NOTIFY series, want 1 (b.test.'s; c.test. is gone)", n)
	}
	m.Query("", "b.test.", "udp", dns.TypeA, dns.RcodeSuccess, "hosts", time.Millisecond)
	if got := count("default", "b.test."); got != 1 {
		t.Errorf("a query after the deletion: %d on the series, want 1", got)
	}
}

// The transfer and NOTIFY series of a transferred zone exist at 0 before
// anything happened, and go with the zone.
func TestTransferredZeroSeries(t *testing.T) {
	m := New("test", "none")
	m.Transferred("a.test.", "success", "error")
	m.Notified("a.test.", "sent", "acked", "failed")
	if n := testutil.CollectAndCount(m.transfers) + testutil.CollectAndCount(m.notifies); n != 5 {
		t.Fatalf("%d transfer and NOTIFY series, want 5", n)
	}
	if got := testutil.ToFloat64(m.notifies.WithLabelValues("a.test.", "acked")); got != 0 {
		t.Errorf("acked: %v, want 0", got)
	}
	m.Transferred("a.test.", "success") // again (a reload): the count stays
	m.Transfer("a.test.", "success")
	m.Transferred("a.test.", "success")
	if got := testutil.ToFloat64(m.transfers.WithLabelValues("a.test.", "success")); got != 1 {
		t.Errorf("success after a transfer and a reload: %v, want 1", got)
	}
	m.KeepZones(func(string, string) bool { return true }, func(string) bool { return false })
	if n := testutil.CollectAndCount(m.transfers) + testutil.CollectAndCount(m.notifies); n != 0 {
		t.Errorf("%d series after the zone is removed, want 0", n)
	}
}
