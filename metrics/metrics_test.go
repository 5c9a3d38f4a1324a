package metrics

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus/testutil"
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

func BenchmarkQuery(b *testing.B) {
	m := New("test", "none")
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			m.Query("", "example.internal.", "udp", dns.TypeA, dns.RcodeSuccess, "hosts", 50*time.Microsecond)
		}
	})
}
