// Command kubepeers measures dnsd's kubernetes source side by side with
// CoreDNS's kubernetes plugin on one real kube-apiserver: the time from
// process start to the first right answer for a service, the resident
// set once settled and its peak (the first sync), and the resident set
// while and after bench/loadgen saturates the server. bench/kubepeers.sh
// builds everything and runs it; docs/performance.md ("Side by side
// with CoreDNS") has the figures.
//
// The cluster: -services services in 100 namespaces (svc-N in ns-(N mod
// 100)); with -endpoints E > 0 every odd one is headless and every service
// has one EndpointSlice of E ready endpoints with pod references (as
// BenchmarkKubernetesScale). Each server runs in turn pinned to CPU 0, the
// load and this process (which holds the API server's etcd) on CPU 1; the
// servers' order alternates from run to run.
package main
