// Package kubetest runs a real Kubernetes control plane for tests: the
// kube-apiserver binary that scripts/k8s-tools.sh builds, over an etcd
// embedded in the test process. It is imported by tests only.
package kubetest
