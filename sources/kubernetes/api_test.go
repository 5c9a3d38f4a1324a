package kubernetes

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDaemonLinksNoClientset: dnsd reaches the API server through NewAPI,
// so the daemon's binary links neither client-go's generated clientset and
// informers nor any API group beyond the two it reads. Each of them would
// be registered at every start (the clientset added ~15 ms and 36 MB).
func TestDaemonLinksNoClientset(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/dnsd/dnsd").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	allowed := map[string]bool{"k8s.io/api/core/v1": true, "k8s.io/api/discovery/v1": true}
	for _, p := range strings.Fields(string(out)) {
		switch {
		case strings.HasPrefix(p, "k8s.io/api/") && !allowed[p],
			p == "k8s.io/client-go/kubernetes" || strings.HasPrefix(p, "k8s.io/client-go/kubernetes/"),
			strings.HasPrefix(p, "k8s.io/client-go/informers"),
			strings.HasPrefix(p, "k8s.io/client-go/listers"):
			t.Errorf("dnsd links %s", p)
		}
	}
}
