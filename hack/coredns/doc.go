// Command coredns is CoreDNS built with only the plugins dnsd's side-by-side
// benchmark (bench/peers.sh) configures: bind, hosts, file, etcd, forward,
// cache, kubernetes and tls (DNS over TLS). The version is pinned by this module's
// go.mod; scripts/bench-deps.sh builds it into a cache outside the
// repository. It is a module of its own so that dnsd's go.mod never pulls in
// CoreDNS.
package main
