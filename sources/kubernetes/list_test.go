package kubernetes

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/dnsd/dnsd/internal/dnstest"
	"github.com/dnsd/dnsd/pipeline"
)

func listed(t *testing.T, src *Source, zone string) []string {
	t.Helper()
	var out []string
	if err := src.List(zone, func(rr dns.RR) bool {
		out = append(out, rrString(rr))
		return true
	}); err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// TestList: a transfer lists what the index answers — services, SRV,
// PTR in reverse zones, dns-version — and pods only in verified mode.
func TestList(t *testing.T) {
	objs := append(cluster(), pod("default", "a", corev1.PodRunning, "10.244.0.7"))
	for _, mode := range []string{PodsVerified, PodsInsecure} {
		src, _ := fakeSource(t, Options{Zones: allZones, Pods: mode, Namespaces: []string{"default"}}, objs...)
		fwd := strings.Join(listed(t, src, zones), "\n")
		for _, want := range []string{
			`dns-version.cluster.local. TXT "1.1.0"`,
			"kubernetes.default.svc.cluster.local. A 10.3.0.1",
			"_https._tcp.kubernetes.default.svc.cluster.local. SRV 0 100 443 kubernetes.default.svc.cluster.local.",
		} {
			if !strings.Contains(fwd, want) {
				t.Errorf("pods %s: %s not listed:\n%s", mode, want, fwd)
			}
		}
		if strings.Contains(fwd, "in-addr.arpa") {
			t.Errorf("pods %s: reverse names listed in %s", mode, zones)
		}
		pods := strings.Contains(fwd, "10-244-0-7.default.pod.cluster.local. A 10.244.0.7")
		if pods != (mode == PodsVerified) {
			t.Errorf("pods %s: pod listed = %t", mode, pods)
		}
		var rev string
		for _, z := range allZones {
			if strings.HasSuffix(z, ".arpa.") {
				rev += strings.Join(listed(t, src, z), "\n")
			}
		}
		if !strings.Contains(rev, "1.0.3.10.in-addr.arpa. PTR kubernetes.default.svc.cluster.local.") {
			t.Errorf("pods %s: PTR not listed in the reverse zones:\n%s", mode, rev)
		}
	}
}

// TestSerialFromClock: a change raises the source's serial above every
// serial the process's clock handed out before (another source's), so
// the zone's serial rises with a kubernetes change too.
func TestSerialFromClock(t *testing.T) {
	var clock pipeline.SerialClock
	client := fake.NewClientset(cluster()...)
	b := NewBackend(clientsetAPI{client}, BackendOptions{Serials: &clock})
	t.Cleanup(func() { b.Close() })
	src := syncedSource(t, b, Options{Zones: allZones}, 10*time.Second)
	other := clock.Next() + 100 // another source changed a lot meanwhile
	for range 100 {
		clock.Next()
	}
	if _, err := client.CoreV1().Namespaces().Create(t.Context(), namespace("team"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	dnstest.EventuallyNil(t, 5*time.Second, func() error {
		if src.Serial() > other {
			return nil
		}
		return errors.New("serial not above the clock's last serial")
	})
}
