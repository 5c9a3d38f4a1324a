package kubernetes

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8s "k8s.io/client-go/kubernetes"

	"github.com/dnsd/dnsd/sources/kubernetes/kubetest"
)

// One real control plane for the package, started by the first test that
// needs it and stopped after the last.
var (
	cpOnce sync.Once
	cp     *kubetest.ControlPlane
	cpErr  error
	cpDir  string
	nsSeq  atomic.Int64
)

func TestMain(m *testing.M) {
	code := m.Run()
	if cp != nil {
		cp.Close()
	}
	if cpDir != "" {
		os.RemoveAll(cpDir)
	}
	os.Exit(code)
}

// controlPlane returns the package's running control plane, starting it
// on first use; without a kube-apiserver binary the test is skipped
// (failed under CI=true).
func controlPlane(t *testing.T) *kubetest.ControlPlane {
	t.Helper()
	bin := kubetest.Require(t)
	cpOnce.Do(func() {
		cpDir, cpErr = os.MkdirTemp("", "dnsd-kube-")
		if cpErr != nil {
			return
		}
		start := time.Now()
		cp, cpErr = kubetest.Start(bin, cpDir)
		if cpErr == nil {
			fmt.Fprintf(os.Stderr, "kube-apiserver ready in %s\n", time.Since(start).Round(time.Millisecond))
		}
	})
	if cpErr != nil {
		t.Fatalf("control plane: %v", cpErr)
	}
	return cp
}

// testNamespace creates a namespace of its own for the test, deleted at
// its end.
func testNamespace(t *testing.T, c k8s.Interface) string {
	t.Helper()
	name := fmt.Sprintf("%s-%d", strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name())), nsSeq.Add(1))
	if len(name) > 63 {
		name = name[len(name)-63:]
		name = strings.TrimLeft(name, "-")
	}
	ctx := context.Background()
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	return name
}
