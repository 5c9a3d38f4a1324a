// Command coredns is CoreDNS built with only the plugins dnsd's side-by-side
// benchmark (bench/peers.sh) configures: bind, hosts, file, etcd, forward,
// cache, kubernetes and tls (DNS over TLS). The version is pinned by this module's
// go.mod; scripts/bench-deps.sh builds it into a cache outside the
// repository. It is a module of its own so that dnsd's go.mod never pulls in
// CoreDNS.
package main

import (
	// The server's core (server blocks, zone matching, directives).
	_ "github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	// CoreDNS registers each plugin from its package's init; the directive
	// order is CoreDNS's own, so importing a subset is enough.
	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/etcd"
	_ "github.com/coredns/coredns/plugin/file"
	_ "github.com/coredns/coredns/plugin/forward"
	_ "github.com/coredns/coredns/plugin/hosts"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/tls"
)

func main() {
	coremain.Run()
}
