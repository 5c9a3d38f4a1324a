package e2e

// End-to-end test of a kube-apiserver whose resource versions went back:
// its etcd replaced by one that starts again from revision 1 (as after
// restoring an older snapshot), while dnsd's informers hold resource
// versions far ahead of it.

import (
	"context"
	"fmt"
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

func TestKubernetesResourceVersionsWentBack(t *testing.T) {
	cp := kubetest.StartFor(t)
	k := cp.Client
	ctx := context.Background()
	const ns = "back"
	service := func(name, ip string) {
		t.Helper()
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: corev1.ServiceSpec{ClusterIP: ip, ClusterIPs: []string{ip},
				Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}},
		}
		if _, err := k.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	namespace := func() {
		t.Helper()
		if _, err := k.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	namespace()
	service("a", "10.3.0.11")
	service("gone", "10.3.0.12")
	// Resource versions well ahead of what the new etcd will have.
	if err := kubetest.Each(200, func(i int) error {
		_, err := k.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("pad%d", i)}}, metav1.CreateOptions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	port, hport := freePort(t), freePort(t)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	writeFile(t, filepath.Join(dir, "dnsd.yaml"), fmt.Sprintf(`listen: ["%s"]
http: "127.0.0.1:%d"
zones:
  cluster.local:
    - kubernetes: {kubeconfig: %s, context: test, ttl: 5s}
`, addr, hport, cp.Kubeconfig))
	p := startDnsd(t, dir, "-config", "dnsd.yaml")
	p.waitLog("dnsd started", 1)
	base := fmt.Sprintf("http://127.0.0.1:%d", hport)
	waitReady(t, base, 200)
	waitAnswer(t, addr, "a.back.svc.cluster.local", dns.TypeA, "NOERROR:10.3.0.11")
	waitAnswer(t, addr, "gone.back.svc.cluster.local", dns.TypeA, "NOERROR:10.3.0.12")

	// The API server restarted on the same etcd is the same server:
	// nothing is listed again.
	cp.StopAPIServer()
	if err := cp.StartAPIServer(); err != nil {
		t.Fatal(err)
	}
	service("same", "10.3.0.13")
	waitAnswerWithin(t, 30*time.Second, addr, "same.back.svc.cluster.local", dns.TypeA, "NOERROR:10.3.0.13")
	time.Sleep(12 * time.Second) // a periodic check (10 s) too
	if n := logCount(p, "refused the resource version held"); n != 0 {
		t.Fatalf("a restart on the same etcd was taken for resource versions going back:\n%s", p.stderr.String())
	}
	if code, body := httpGet(t, base+"/ready"); code != 200 {
		t.Fatalf("/ready after a restart on the same etcd: %d %q", code, body)
	}

	if err := cp.ReplaceEtcd(); err != nil {
		t.Fatal(err)
	}
	namespace()
	service("a", "10.3.0.99")
	service("new", "10.3.0.7")
	back := time.Now()
	var readies []string
	dnstest.EventuallyNil(t, 90*time.Second, func() error {
		code, body := httpGet(t, base+"/ready")
		if r := fmt.Sprintf("%d %s", code, strings.TrimSpace(body)); len(readies) == 0 || readies[len(readies)-1] != r {
			readies = append(readies, r)
		}
		r, err := query(t, "udp", addr, "new.back.svc.cluster.local", dns.TypeA)
		if err != nil || r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
			return fmt.Errorf("the new API server's service not served; /ready went %q\n%s", readies, p.stderr.String())
		}
		return nil
	})
	t.Logf("FAULT kubernetes resource versions went back recovery=%v; /ready went %q", time.Since(back).Round(time.Millisecond), readies)
	waitAnswer(t, addr, "a.back.svc.cluster.local", dns.TypeA, "NOERROR:10.3.0.99")
	waitAnswer(t, addr, "gone.back.svc.cluster.local", dns.TypeA, "NXDOMAIN:")
	p.waitLog("kubernetes API server refused the resource version held", 1)
	p.waitLog("kubernetes list done", 1)
	waitReady(t, base, 200)
}
