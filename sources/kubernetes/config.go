package kubernetes

import (
	"slices"
	"strings"
	"time"

	"k8s.io/client-go/rest"

	"github.com/dnsd/dnsd/config"
)

// Defaults and bounds of the kubernetes block.
const (
	DefaultTTL         = 5 * time.Second
	DefaultSyncTimeout = 5 * time.Second
	// MaxTTL is the largest ttl (as CoreDNS's).
	MaxTTL = time.Hour
)

// Config is a kubernetes source's settings (its block in dnsd.yaml).
type Config struct {
	Kubeconfig       string // "" = in-cluster, then $KUBECONFIG, then ~/.kube/config; when set: readable, ~ expanded, relative to the config file
	Context          string
	Pods             string   // disabled (default) | insecure | verified
	Namespaces       []string // lower-case DNS labels; empty = all
	EndpointPodNames bool
	Expose           string        // cluster_ip (default) | external
	TTL              time.Duration // default 5s, 0..1h, whole seconds
	SyncTimeout      time.Duration // default 5s, > 0
}

// ParseSettings reads a kubernetes block.
func (*Kind) ParseSettings(b *config.SourceBlock) any {
	k := &Config{Pods: "disabled", Expose: "cluster_ip", TTL: DefaultTTL, SyncTimeout: DefaultSyncTimeout}
	m := b.Mapping
	m.OptFile("kubeconfig", &k.Kubeconfig)
	if cn := m.Str("context", &k.Context); cn != nil && k.Context != "" {
		// Said here, at the key, rather than when the connection is made.
		if known, from, ok := kubeContexts(k.Kubeconfig); ok && !slices.Contains(known, k.Context) {
			b.Errorf(cn, config.KeyPath(b.Path, "context"), "context %q is not in %s (it has: %s)", k.Context, from, strings.Join(known, ", "))
		}
	}
	m.Enum("pods", &k.Pods, "disabled", "insecure", "verified")
	vals, nodes, npath, _ := m.Strings("namespaces")
	for i, ns := range vals {
		ns = strings.ToLower(ns)
		if !isLabel1123(ns) {
			b.Errorf(nodes[i], config.IndexPath(npath, i), "bad namespace %q: must be a DNS label (a-z, 0-9 and '-', at most 63 characters, starting and ending with a letter or digit)", vals[i])
			continue
		}
		k.Namespaces = append(k.Namespaces, ns)
	}
	m.Bool("endpoint_pod_names", &k.EndpointPodNames)
	m.Enum("expose", &k.Expose, "cluster_ip", "external")
	m.Duration("ttl", &k.TTL, config.DurLimit{Max: MaxTTL, Seconds: true})
	m.Duration("sync_timeout", &k.SyncTimeout, config.Positive)
	return k
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
