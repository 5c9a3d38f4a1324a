package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dnsd/dnsd/internal/dnstest"
	"github.com/dnsd/dnsd/sources/kubernetes/kubetest"
)

// TestKubernetesTransfer: a cluster zone (pods: verified) and its reverse
// zone transferred from a real kube-apiserver; a new service raises the
// serial and is in the next transfer. A Knot secondary (unsigned) mirrors
// the cluster zone and serves the new service within 10 s.
func TestKubernetesTransfer(t *testing.T) {
	cp := kubetest.StartFor(t)
	k := cp.Client
	ctx := context.Background()
	createConformanceObjects(t, k)
	pod, err := k.CoreV1().Pods("default").Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p1"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.244.1.7", PodIPs: []corev1.PodIP{{IP: "10.244.1.7"}}}
	if _, err := k.CoreV1().Pods("default").UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	port := freePort(t)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	// A real secondary too, when knotd is there (unsigned: no tsig).
	_, haveKnot := exec.LookPath("knotd")
	knotPort := freePort(t)
	notify := ""
	if haveKnot == nil {
		notify = fmt.Sprintf("    notify: [\"127.0.0.1:%d\"]\n", knotPort)
	}
	writeFile(t, filepath.Join(dir, "dnsd.yaml"), fmt.Sprintf(`listen: ["%s"]
zones:
  cluster.local:
    - kubernetes: {kubeconfig: %[2]s, context: test, pods: verified, sync_timeout: 20s}
  in-addr.arpa:
    - kubernetes: {kubeconfig: %[2]s, context: test, pods: verified, sync_timeout: 20s}
transfer:
  - zones: [cluster.local, in-addr.arpa]
    allow: [127.0.0.1]
%[3]s`, addr, cp.Kubeconfig, notify))
	p := startDnsd(t, dir, "-config", "dnsd.yaml")
	p.waitLog("dnsd started", 1)
	knot := ""
	if haveKnot == nil {
		knot, _ = startKnot(t, knotPort, port, []string{"cluster.local"}, false)
	} else if os.Getenv("CI") == "true" {
		t.Fatal("knotd is missing (scripts/ci-deps.sh installs it)")
	}
	// knotAnswers waits until the secondary answers name with want.
	knotAnswers := func(name, want string, within time.Duration) {
		t.Helper()
		if knot == "" {
			return
		}
		got := ""
		dnstest.EventuallyNil(t, within, func() error {
			if r, err := query(t, "udp", knot, name, dns.TypeA); err == nil {
				if got = dnstest.RData(r); got == want {
					return nil
				}
			}
			return fmt.Errorf("the Knot secondary answers %s with %q, want %q", name, got, want)
		})
	}

	transfer := func(zone string) (string, uint32) {
		t.Helper()
		var rrs []dns.RR
		dnstest.EventuallyNil(t, 30*time.Second, func() error { // SERVFAIL until the first sync
			var err error
			if rrs, _, err = axfr(t, addr, zone, dns.TypeAXFR, 0, ""); err != nil {
				return fmt.Errorf("AXFR %s: %w", zone, err)
			}
			return nil
		})
		var b strings.Builder
		for _, rr := range rrs {
			b.WriteString(strings.Join(strings.Fields(rr.String()), " ") + "\n")
		}
		return b.String(), rrs[0].(*dns.SOA).Serial
	}
	fwd, serial := transfer("cluster.local.")
	for _, want := range []string{
		"kubernetes.default.svc.cluster.local. 5 IN A 10.3.0.1",
		"kubernetes.default.svc.cluster.local. 5 IN AAAA 2001:db8::1",
		"_https._tcp.kubernetes.default.svc.cluster.local. 5 IN SRV 0 100 443 kubernetes.default.svc.cluster.local.",
		"foo.default.svc.cluster.local. 5 IN CNAME www.example.com.",
		`dns-version.cluster.local. 5 IN TXT "1.1.0"`,
		"10-244-1-7.default.pod.cluster.local. 5 IN A 10.244.1.7",
	} {
		if !strings.Contains(fwd, want+"\n") {
			t.Errorf("cluster.local transfer lacks %s:\n%s", want, fwd)
		}
	}
	knotAnswers("kubernetes.default.svc.cluster.local.", "NOERROR:10.3.0.1", 30*time.Second)
	knotAnswers("10-244-1-7.default.pod.cluster.local.", "NOERROR:10.244.1.7", time.Second)
	if rev, _ := transfer("in-addr.arpa."); !strings.Contains(rev, "1.0.3.10.in-addr.arpa. 5 IN PTR kubernetes.default.svc.cluster.local.\n") {
		t.Errorf("in-addr.arpa transfer lacks the ClusterIP's PTR:\n%s", rev)
	}

	if _, err := k.CoreV1().Services("default").Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "late"},
		Spec:       corev1.ServiceSpec{ClusterIP: "10.3.0.77", Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var now uint32
	dnstest.EventuallyNil(t, 10*time.Second, func() error {
		var fwd string
		if fwd, now = transfer("cluster.local."); !strings.Contains(fwd, "late.default.svc.cluster.local. 5 IN A 10.3.0.77\n") {
			return fmt.Errorf("the new service is not in the transfer:\n%s", fwd)
		}
		return nil
	})
	if !(now > serial) {
		t.Errorf("serial %d after a new service, was %d", now, serial)
	}
	// The secondary follows within 10 s (NOTIFY, then its transfer).
	knotAnswers("late.default.svc.cluster.local.", "NOERROR:10.3.0.77", 10*time.Second)
}
