package e2e

// End-to-end tests of "say why, promptly": a backend that cannot connect
// logs the real cause within 5 s of trying, once per change of state, and
// /ready names the source, its backend and that cause.

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dnsd/dnsd/internal/testpki"
	"github.com/dnsd/dnsd/sources/etcd/etcdtest"
	"github.com/dnsd/dnsd/sources/kubernetes/kubetest"
)

// causeWithin is the rule: the cause is known this soon after the backend
// starts trying.
const causeWithin = 5 * time.Second

// waitReadyCause polls /ready until it answers code with a body holding
// every one of want, for up to limit; it returns how long that took.
func waitReadyCause(t *testing.T, base string, code int, limit time.Duration, want ...string) time.Duration {
	t.Helper()
	start := time.Now()
	var got int
	var body string
	for time.Since(start) < limit {
		got, body = httpGet(t, base+"/ready")
		ok := got == code
		for _, w := range want {
			ok = ok && strings.Contains(body, w)
		}
		if ok {
			return time.Since(start)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("/ready after %s: %d %q; want %d naming %q", limit, got, body, code, want)
	return 0
}

// loudLines returns the WARN and ERROR lines of log that contain s.
func loudLines(log, s string) []string {
	var out []string
	for _, l := range strings.Split(log, "\n") {
		if (strings.Contains(l, "level=WARN") || strings.Contains(l, "level=ERROR")) && strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return out
}

// Nothing listens at the etcd endpoint: /ready says "connection refused"
// for that endpoint within 5 s, and the log has exactly one WARN line
// with the cause over 10 s of retries.
func TestSayWhyEtcdRefused(t *testing.T) {
	t.Parallel()
	port := etcdtest.FreePort(t)
	s := startYAML(t, fmt.Sprintf(`listen: ["LISTEN"]
http: "HTTP"
zones:
  example.internal:
    - etcd: {endpoints: ["http://127.0.0.1:%d"], sync_timeout: 500ms}
`, port), nil)
	took := waitReadyCause(t, s.base, 503, causeWithin, fmt.Sprintf("etcd http://127.0.0.1:%d: ", port), "connection refused")
	t.Logf("cause in /ready after %s", took)
	time.Sleep(10 * time.Second)
	lines := loudLines(s.stderr.String(), "etcd unreachable")
	if len(lines) != 1 || !strings.Contains(lines[0], "connection refused") {
		t.Errorf("%d WARN lines about etcd over 10 s, want exactly 1 with the cause:\n%s", len(lines), strings.Join(lines, "\n"))
	}
}

// etcd over TLS, dnsd trusting another CA: the cause is the x509 error.
func TestSayWhyEtcdWrongCA(t *testing.T) {
	t.Parallel()
	srv := etcdtest.Start(t, etcdtest.Options{TLS: true})
	other := testpki.NewCA(t, "not the etcd CA")
	s := startYAML(t, fmt.Sprintf(`listen: ["LISTEN"]
http: "HTTP"
zones:
  example.internal:
    - etcd:
        endpoints: ["%s"]
        tls: {ca: other-ca.crt, cert: %s, key: %s, server_name: %s}
        sync_timeout: 500ms
`, srv.Endpoint(), srv.Certs.ClientCert, srv.Certs.ClientKey, srv.Certs.ServerName), map[string]string{"other-ca.crt": string(other.CertPEM)})
	took := waitReadyCause(t, s.base, 503, causeWithin, "etcd "+srv.Endpoint(), "x509: ")
	t.Logf("cause in /ready after %s", took)
	if l := loudLines(s.stderr.String(), "x509: "); len(l) != 1 {
		t.Errorf("%d WARN lines with the x509 cause, want 1:\n%s", len(l), s.stderr.String())
	}
}

// etcd with authentication, dnsd with a wrong password: the cause is the
// authentication failure, and the password is in no log line.
func TestSayWhyEtcdWrongPassword(t *testing.T) {
	t.Parallel()
	srv := etcdtest.Start(t, etcdtest.Options{Auth: true, Username: "dnsd", Password: "right-secret"})
	s := startYAML(t, fmt.Sprintf(`listen: ["LISTEN"]
http: "HTTP"
zones:
  example.internal:
    - etcd: {endpoints: ["%s"], username: dnsd, password_file: pw, sync_timeout: 500ms}
`, srv.Endpoint()), map[string]string{"pw": "wrong-secret\n"})
	took := waitReadyCause(t, s.base, 503, causeWithin, "etcd "+srv.Endpoint(), "authentication failed")
	t.Logf("cause in /ready after %s", took)
	if l := loudLines(s.stderr.String(), "authentication failed"); len(l) != 1 {
		t.Errorf("%d WARN lines with the auth cause, want 1:\n%s", len(l), s.stderr.String())
	}
	if strings.Contains(s.stderr.String(), "right-secret") || strings.Contains(s.stderr.String(), "wrong-secret") {
		t.Errorf("a password reached the log:\n%s", s.stderr.String())
	}
}

// A kubeconfig naming an API server that is down: /ready names the API
// server and "connection refused" within 5 s; one WARN line.
func TestSayWhyKubernetesDown(t *testing.T) {
	t.Parallel()
	port := etcdtest.FreePort(t)
	dir := t.TempDir()
	ca := testpki.NewCA(t, "cluster CA")
	testpki.WriteFile(t, filepath.Join(dir, "ca.crt"), ca.CertPEM)
	kc := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:%d", certificate-authority: %s}}]
users: [{name: u, user: {token: not-logged-token}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`, port, filepath.Join(dir, "ca.crt"))
	s := startYAML(t, `listen: ["LISTEN"]
http: "HTTP"
zones:
  cluster.local:
    - kubernetes: {kubeconfig: kubeconfig, sync_timeout: 500ms}
`, map[string]string{"kubeconfig": kc})
	took := waitReadyCause(t, s.base, 503, causeWithin, fmt.Sprintf("kubernetes https://127.0.0.1:%d: ", port), "connection refused")
	t.Logf("cause in /ready after %s", took)
	time.Sleep(5 * time.Second)
	if l := loudLines(s.stderr.String(), "connection refused"); len(l) != 1 {
		t.Errorf("%d WARN lines about kubernetes over 5 s, want 1 with the cause:\n%s", len(l), strings.Join(l, "\n"))
	}
	if strings.Contains(s.stderr.String(), "not-logged-token") {
		t.Error("the token reached the log")
	}
}

// A kubeconfig with a token the API server does not know: "401
// Unauthorized" in /ready and in one WARN line.
func TestSayWhyKubernetesBadToken(t *testing.T) {
	kubetest.Require(t) // skip before waiting for the parallel phase
	t.Parallel()
	cp := kubetest.StartFor(t)
	kc, err := cp.KubeconfigFor("intruder", "not-a-valid-token")
	if err != nil {
		t.Fatal(err)
	}
	s := startYAML(t, fmt.Sprintf(`listen: ["LISTEN"]
http: "HTTP"
zones:
  cluster.local:
    - kubernetes: {kubeconfig: %s, sync_timeout: 500ms}
`, kc), nil)
	took := waitReadyCause(t, s.base, 503, causeWithin, "kubernetes "+cp.URL, "401 Unauthorized")
	t.Logf("cause in /ready after %s", took)
	time.Sleep(3 * time.Second)
	if l := loudLines(s.stderr.String(), "Unauthorized"); len(l) != 1 {
		t.Errorf("%d WARN lines about kubernetes, want 1 with the cause:\n%s", len(l), strings.Join(l, "\n"))
	}
	if strings.Contains(s.stderr.String(), "not-a-valid-token") {
		t.Error("the token reached the log")
	}
}
