package kubernetes

import (
	"slices"
	"strings"
	"time"

	"k8s.io/client-go/rest"

	"github.com/dnsd/dnsd/config"
)

// Config is a kubernetes source's settings (its block in dnsd.yaml).
type Config struct {
	// Kubeconfig is the kubeconfig file: default "": in-cluster, then
	// $KUBECONFIG, then ~/.kube/config; when set: readable, ~ expanded,
	// relative to the config file.
	Kubeconfig string `dnsd:"kubeconfig,file" doc:"kubeconfig file. Omitted: in-cluster config, then $KUBECONFIG, then ~/.kube/config."`
	// Context is the kubeconfig context; default "": the current one.
	Context string `dnsd:"context" doc:"kubeconfig context; \"\" = the current one."`
	// Pods: disabled (default) | insecure | verified.
	Pods string `dnsd:"pods" default:"disabled" enum:"disabled,insecure,verified" doc:"Pod A records (a-b-c-d.ns.pod.zone)."`
	// Namespaces are lower-case DNS labels; default none: all.
	Namespaces []string `dnsd:"namespaces" doc:"Only these namespaces are served; empty = all." item:"A namespace name." pattern:"^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?$"`
	// EndpointPodNames: endpoints without a hostname are named by their
	// pod; default false.
	EndpointPodNames bool `dnsd:"endpoint_pod_names" doc:"Name endpoints without a hostname by their pod's name instead of their dashed IP."`
	// Expose: cluster_ip (default) | external.
	Expose string `dnsd:"expose" default:"cluster_ip" enum:"cluster_ip,external" doc:"cluster_ip, or external: LoadBalancer ingress and externalIPs."`
	// TTL of the answers: default 5s, 0..1h (as CoreDNS's), whole
	// seconds.
	TTL time.Duration `dnsd:"ttl" default:"5s" dur:"ttl,max=1h" doc:"TTL of the answers (at most 1h, whole seconds)."`
	// SyncTimeout is how long readiness and a reload wait for the first
	// sync: default 5s, > 0.
	SyncTimeout time.Duration `dnsd:"sync_timeout" default:"5s" dur:"positive" doc:"How long start-up readiness and a reload wait for the first sync."`
}

// describe describes the kubernetes block.
func describe() *config.Settings {
	return config.NewSettings(config.Description[Config]{
		Schema: config.Schema{Description: "Cluster DNS from a Kubernetes API server.", Type: config.TObject},
		Fields: map[string]func(*config.Block, *Config){"context": parseContext, "namespaces": parseNamespaces},
	})
}

// parseContext reads context: one the kubeconfig has (said here, at the
// key, rather than when the connection is made).
func parseContext(b *config.Block, k *Config) {
	if cn := b.Str("context", &k.Context); cn != nil && k.Context != "" {
		if known, from, ok := kubeContexts(k.Kubeconfig); ok && !slices.Contains(known, k.Context) {
			b.Errorf(cn, config.KeyPath(b.Path, "context"), "context %q is not in %s (it has: %s)", k.Context, from, strings.Join(known, ", "))
		}
	}
}

// parseNamespaces reads namespaces: DNS labels, lower-cased.
func parseNamespaces(b *config.Block, k *Config) {
	vals, nodes, npath, _ := b.Strings("namespaces")
	for i, ns := range vals {
		ns = strings.ToLower(ns)
		if !isLabel1123(ns) {
			b.Errorf(nodes[i], config.IndexPath(npath, i), "bad namespace %q: must be a DNS label (a-z, 0-9 and '-', at most 63 characters, starting and ending with a letter or digit)", vals[i])
			continue
		}
		k.Namespaces = append(k.Namespaces, ns)
	}
}

// isLabel1123 reports whether s is an RFC 1123 label as Kubernetes names
// namespaces.
func isLabel1123(s string) bool {
	if s == "" || len(s) > 63 || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for _, c := range []byte(s) {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// SyncWait implements config.SyncWaiter.
func (c *Config) SyncWait() time.Duration { return c.SyncTimeout }

// kubeContexts lists the contexts of the kubeconfig a source would load
// (as RESTConfig: path, else in a pod none, else $KUBECONFIG or
// ~/.kube/config), and what that is; ok is false when there is none to
// read or it does not load (the connection says why).
func kubeContexts(path string) (names []string, from string, ok bool) {
	if path == "" {
		if _, err := rest.InClusterConfig(); err == nil {
			return nil, "", false // the in-cluster configuration has no contexts
		}
	}
	rules, ok := kubeconfigRules(path)
	if !ok {
		return nil, "", false
	}
	from = "the kubeconfig"
	if path != "" {
		from = "kubeconfig " + path
	}
	cfg, err := rules.Load()
	if err != nil {
		return nil, "", false
	}
	for name := range cfg.Contexts {
		names = append(names, name)
	}
	slices.Sort(names)
	return names, from, true
}
