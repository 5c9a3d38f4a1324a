package kubernetes

import (
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
