package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/dnsd/dnsd/sources/kubernetes/kubetest"
)

// Services in the kubernetes scenario: svc-N in namespace ns-(N mod 100),
// each with a cluster IP.
const (
	k8sServices   = 10000
	k8sNamespaces = 100
)

func k8sName(i int) string {
	return fmt.Sprintf("svc-%d.ns-%d.svc.cluster.local.", i, i%k8sNamespaces)
}

// startCluster starts, once for the whole benchmark, a kube-apiserver (and
// its etcd, inside this process) holding the scenario's services.
func (e *env) startCluster() error {
	if e.cluster != nil {
		return nil
	}
	dir := filepath.Join(e.dir, "k8s")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "peers: starting kube-apiserver, creating %d services\n", k8sServices)
	start := time.Now()
	cp, err := kubetest.Start(e.kubeAPIServer, dir)
	if err != nil {
		return err
	}
	e.cluster = cp
	fast := *cp.Config
	fast.QPS, fast.Burst = -1, 0 // no client-side rate limit
	k, err := kubernetes.NewForConfig(&fast)
	if err != nil {
		return err
	}
	if err := createServices(k); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "peers: cluster ready in %s\n", time.Since(start).Round(time.Second))
	return nil
}

func createServices(k kubernetes.Interface) error {
	ctx := context.Background()
	for n := range k8sNamespaces {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("ns-%d", n)}}
		if _, err := k.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	return kubetest.Each(k8sServices, func(i int) error {
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("svc-%d", i)},
			Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}},
		}
		_, err := k.CoreV1().Services(fmt.Sprintf("ns-%d", i%k8sNamespaces)).Create(ctx, svc, metav1.CreateOptions{})
		return err
	})
}
