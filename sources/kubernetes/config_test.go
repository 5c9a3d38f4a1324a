package kubernetes

import (
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
)

const twoContexts = `apiVersion: v1
kind: Config
clusters:
- name: a
  cluster: {server: "https://10.0.0.1:6443"}
- name: b
  cluster: {server: "https://10.0.0.2:6443"}
users:
- name: u
  user: {token: secret}
contexts:
- name: first
  context: {cluster: a, user: u}
- name: second
  context: {cluster: b, user: u}
current-context: first
`

func TestRESTConfig(t *testing.T) {
	dir := t.TempDir()
	kc := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kc, []byte(twoContexts), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KUBERNETES_SERVICE_HOST", "") // not in a pod
	_, err := os.Stat(clientcmd.RecommendedHomeFile)
	haveHome := err == nil // this machine's ~/.kube/config

	for _, tc := range []struct {
		cfg     ClientConfig
		env     string // $KUBECONFIG
		host    string
		wantErr string
	}{
		{cfg: ClientConfig{Kubeconfig: kc}, host: "https://10.0.0.1:6443"},
		{cfg: ClientConfig{Kubeconfig: kc, Context: "second"}, host: "https://10.0.0.2:6443"},
		{cfg: ClientConfig{Kubeconfig: kc, Context: "third"}, wantErr: "third"},
		{cfg: ClientConfig{Kubeconfig: filepath.Join(dir, "missing")}, wantErr: "missing"},
		{cfg: ClientConfig{Context: "second"}, env: kc, host: "https://10.0.0.2:6443"},
		{cfg: ClientConfig{}, wantErr: "no cluster configuration"},
	} {
		if tc.wantErr == "no cluster configuration" && haveHome {
			continue
		}
		t.Setenv("KUBECONFIG", tc.env)
		rc, err := RESTConfig(tc.cfg)
		switch {
		case tc.wantErr != "":
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%+v: err %v, want one mentioning %q", tc.cfg, err, tc.wantErr)
			}
		case err != nil:
			t.Errorf("%+v: %v", tc.cfg, err)
		case rc.Host != tc.host:
			t.Errorf("%+v: host %s, want %s", tc.cfg, rc.Host, tc.host)
		case rc.QPS != clientQPS || rc.Burst != clientBurst || !strings.Contains(rc.ContentType, "protobuf"):
			t.Errorf("%+v: QPS %v burst %d content %s", tc.cfg, rc.QPS, rc.Burst, rc.ContentType)
		}
	}
}

func FuzzUndash(f *testing.F) {
	for _, s := range []string{"10-244-4-10", "fd00-10-244--5", "--1", "1-2-3", "a-b-c-d", "2001-0db8-0000-0000-0000-0000-0000-0001"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, label string) {
		a, ok := undash(label)
		if !ok {
			return
		}
		if !a.IsValid() || a.Zone() != "" || a.Is4In6() {
			t.Fatalf("undash(%q) = %v", label, a)
		}
		// The canonical label of the address parses back to it.
		if b, ok := undash(dashed(a)); !ok || b != a {
			t.Fatalf("undash(dashed(%v)) = %v %v", a, b, ok)
		}
	})
}

func FuzzPodName(f *testing.F) {
	for _, s := range []string{"1-2-3-4.default.pod.cluster.local.", "x.pod.cluster.local.", ".pod.cluster.local.", "a.b.c.pod.cluster.local."} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		a, ok := podName(name, "cluster.local.")
		if !ok {
			return
		}
		label, _, _ := strings.Cut(name, ".")
		if b, ok2 := undash(label); !ok2 || b != a || a == (netip.Addr{}) {
			t.Fatalf("podName(%q) = %v, label %q", name, a, label)
		}
	})
}
