package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dnsd/dnsd/internal/dnstest"
	"github.com/dnsd/dnsd/sources/kubernetes/kubetest"
)

const extdnsSecret = "ZXh0ZG5zLWtleS1zZWNyZXQtZm9yLWRuc2QtdGVzdHMtOTk5OQ=="

// TestUpdateExternalDNS: external-dns's rfc2136 provider (extdns-once,
// hack/extdns) publishes a LoadBalancer Service of a real kube-apiserver
// into dnsd: it lists the zone by AXFR with its TSIG key, creates the
// Service's A record and its TXT ownership records, finds them again on
// the next run (nothing to do), follows a new address, and deletes every
// record once the Service is gone. scripts/extdns-tools.sh builds it.
func TestUpdateExternalDNS(t *testing.T) {
	bin := os.Getenv("DNSD_EXTDNS")
	if bin == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("DNSD_EXTDNS is not set (scripts/test.sh sets it from scripts/extdns-tools.sh)")
		}
		t.Skip("no extdns-once: run eval \"$(scripts/extdns-tools.sh)\" first")
	}
	cp := kubetest.StartFor(t)
	ctx := context.Background()

	dir := t.TempDir()
	port := freePort(t)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	writeFile(t, filepath.Join(dir, "extdns.key"), extdnsSecret+"\n")
	writeFile(t, filepath.Join(dir, "dnsd.yaml"), fmt.Sprintf(`listen: ["%s"]
state_dir: state
zones:
  apps.corp.internal:
    - dynamic: {}
update:
  - zones: [apps.corp.internal]
    tsig: {name: extdns-key, algorithm: hmac-sha256, secret_file: extdns.key}
    types: [A, AAAA, CNAME, TXT]
transfer:
  - zones: [apps.corp.internal]
    allow: [127.0.0.1]
    tsig: {name: extdns-key, algorithm: hmac-sha256, secret_file: extdns.key}
`, addr))
	d := startDnsd(t, dir, "-config", "dnsd.yaml")
	d.waitLog("dnsd started", 1)

	reconcile := func(want string) {
		t.Helper()
		cmd := exec.Command(bin, "-kubeconfig", cp.Kubeconfig,
			"--provider=rfc2136", "--source=service", "--policy=sync", "--rfc2136-host=127.0.0.1", fmt.Sprintf("--rfc2136-port=%d", port),
			"--rfc2136-zone=apps.corp.internal", "--rfc2136-tsig-keyname=extdns-key", "--rfc2136-tsig-secret="+extdnsSecret,
			"--rfc2136-tsig-secret-alg=hmac-sha256", "--rfc2136-axfr", "--domain-filter=apps.corp.internal", "--txt-owner-id=dnsd-e2e")
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), want) {
			t.Fatalf("extdns-once: %v, want %q in:\n%s", err, want, out)
		}
	}
	setIP := func(svc *corev1.Service, ip string) *corev1.Service {
		t.Helper()
		svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: ip}}
		s, err := cp.Client.CoreV1().Services("default").UpdateStatus(ctx, svc, metav1.UpdateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	svc, err := cp.Client.CoreV1().Services("default").Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "shop", Annotations: map[string]string{"external-dns.alpha.kubernetes.io/hostname": "shop.apps.corp.internal"}},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Port: 443}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	svc = setIP(svc, "192.0.2.10")

	reconcile("create 1,")
	if r, _ := query(t, "udp", addr, "shop.apps.corp.internal.", dns.TypeA); dnstest.RData(r) != "NOERROR:192.0.2.10" {
		t.Fatalf("after external-dns created it, shop A = %s", dnstest.RData(r))
	}
	owners := axfrOwners(t, addr)
	if !strings.Contains(owners, "TXT") {
		t.Errorf("no TXT ownership record in the zone: %s", owners)
	}
	// Listed by AXFR, the records are found as external-dns's own.
	reconcile("all records are up to date")
	svc = setIP(svc, "192.0.2.11")
	reconcile("update 1,")
	if r, _ := query(t, "udp", addr, "shop.apps.corp.internal.", dns.TypeA); dnstest.RData(r) != "NOERROR:192.0.2.11" {
		t.Errorf("after the new address, shop A = %s", dnstest.RData(r))
	}
	if err := cp.Client.CoreV1().Services("default").Delete(ctx, svc.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	reconcile("delete 1")
	if r, err := query(t, "udp", addr, "shop.apps.corp.internal.", dns.TypeA); err != nil || r.Rcode != dns.RcodeNameError {
		t.Errorf("after the Service's deletion, shop: %s %v, want NXDOMAIN", dnstest.RData(r), err)
	}
	if owners := axfrOwners(t, addr); strings.Contains(owners, "TXT") || strings.Contains(owners, "shop") {
		t.Errorf("records left after the deletion: %s", owners)
	}
}

// axfrOwners transfers apps.corp.internal with the external-dns key and
// lists "owner type" of every record but the SOA and NS.
func axfrOwners(t *testing.T, addr string) string {
	t.Helper()
	m := new(dns.Msg)
	m.SetAxfr("apps.corp.internal.")
	m.SetTsig("extdns-key.", dns.HmacSHA256, 300, 0)
	tr := &dns.Transfer{TsigSecret: map[string]string{"extdns-key.": extdnsSecret}}
	ch, err := tr.In(m, addr)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for env := range ch {
		if env.Error != nil {
			t.Fatalf("AXFR: %v", env.Error)
		}
		for _, rr := range env.RR {
			if h := rr.Header(); h.Rrtype != dns.TypeSOA && h.Rrtype != dns.TypeNS && !strings.HasPrefix(h.Name, "ns.dns.") {
				out = append(out, h.Name+" "+dns.TypeToString[h.Rrtype])
			}
		}
	}
	return strings.Join(out, ", ")
}
