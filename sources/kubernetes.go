package sources

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	k8s "k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/dnsd/dnsd/config"
	"github.com/dnsd/dnsd/internal/health"
	"github.com/dnsd/dnsd/pipeline"
	"github.com/dnsd/dnsd/sources/kubernetes"
)

// kubeState is the kubernetes kind's process-lifetime state: its metrics
// (registered once) and the cluster connections, shared by every source
// with the same kubeconfig and context (and pod watching), whatever their
// other settings, across zones and reloads.
type kubeState struct {
	mu         sync.Mutex
	metrics    *kubernetes.Metrics
	registered bool
	klog       bool // client-go's global logger goes to dnsd's log
	clients    map[string]*kubeClient
}

type kubeClient struct {
	key     string
	refs    int
	backend *kubernetes.Backend
}

func (st *kubeState) close() {
	st.mu.Lock()
	clients := st.clients
	st.clients = nil
	st.mu.Unlock()
	for _, c := range clients {
		_ = c.backend.Close()
	}
}

// kubeMetrics returns the kind's metrics, registering them on first use.
func (r *Registry) kubeMetrics() *kubernetes.Metrics {
	st := &r.kube
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.metrics == nil {
		st.metrics = kubernetes.NewMetrics()
	}
	if !st.registered {
		st.registered = true
		for _, c := range st.metrics.Collectors() {
			if err := r.registerer.Register(c); err != nil {
				var already prometheus.AlreadyRegisteredError
				if !errors.As(err, &already) {
					r.logger.Warn("kubernetes metrics", "err", err)
				}
			}
		}
	}
	return st.metrics
}

// kubeClientAcquire returns the shared connection for key, opening it
// with open the first time.
func (r *Registry) kubeClientAcquire(key string, open func() (*kubernetes.Backend, error)) (*kubeClient, error) {
	st := &r.kube
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.clients == nil {
		st.clients = make(map[string]*kubeClient)
	}
	if c := st.clients[key]; c != nil {
		c.refs++
		return c, nil
	}
	if !st.klog {
		// client-go logs a few things through klog's process-wide logger
		// (the informers log through their context's); keep them in dnsd's
		// log format.
		st.klog = true
		klog.SetSlogLogger(r.logger.With("source", "kubernetes"))
	}
	b, err := open()
	if err != nil {
		return nil, err
	}
	c := &kubeClient{key: key, refs: 1, backend: b}
	st.clients[key] = c
	return c, nil
}

func (r *Registry) kubeClientRelease(c *kubeClient) {
	st := &r.kube
	st.mu.Lock()
	c.refs--
	last := c.refs == 0 && st.clients[c.key] == c
	if last {
		delete(st.clients, c.key)
	}
	st.mu.Unlock()
	if last {
		_ = c.backend.Close()
		r.logger.Info("kubernetes connection closed", "key", c.key)
	}
}

// kubeView is the registry's backend value: one Source over a shared
// connection. It implements pipeline.Syncer for dnsd_source_synced.
type kubeView struct {
	*kubernetes.Source
	releaser
}

func (v *kubeView) Close() error { return v.closeThen(v.Source) }

var _ pipeline.Syncer = (*kubeView)(nil)

// kubernetesSource builds a kubernetes source. Sources with equal settings
// and zones are one registry backend (kept across reloads); sources with
// the same connection settings share one clientset and its informers.
func (r *Registry) kubernetesSource(ctx context.Context, cfg *config.Config, z config.Zone, c *config.Kubernetes, set *Set) (pipeline.Source, error) {
	cc := kubernetes.ClientConfig{Kubeconfig: c.Kubeconfig, Context: c.Context, UserAgent: "dnsd", Logger: r.logger.With("source", "kubernetes")}
	if r.dryRun {
		// `dnsd check`: load the client configuration (files only), start
		// nothing.
		if _, err := kubernetes.RESTConfig(cc); err != nil {
			return nil, err
		}
		return kubeDryRunSource{kind: config.KindKubernetes, ttl: pipeline.TTLSeconds(c.TTL)}, nil
	}
	withPods := c.Pods == kubernetes.PodsVerified && c.Expose != "external"
	podNames := c.EndpointPodNames && c.Expose != "external"
	clientKey := fmt.Sprintf("kubeconfig=%q context=%q pods=%t pod_names=%t", c.Kubeconfig, c.Context, withPods, podNames)
	ns := slices.Clone(c.Namespaces)
	slices.Sort(ns)
	key := fmt.Sprintf("%s zones=%q ttl=%s pods=%s namespaces=%q endpoint_pod_names=%t expose=%s",
		clientKey, strings.Join(z.Names, " "), c.TTL, c.Pods, strings.Join(ns, ","), c.EndpointPodNames, c.Expose)
	v, _, err := r.acquire(set, config.KindKubernetes, key, func() (any, io.Closer, error) {
		metrics := r.kubeMetrics()
		client, err := r.kubeClientAcquire(clientKey, func() (*kubernetes.Backend, error) {
			cc := cc
			cc.Health = health.New(cc.Logger)
			rc, err := kubernetes.RESTConfig(cc)
			if err != nil {
				return nil, err
			}
			cs, err := k8s.NewForConfig(rc)
			if err != nil {
				return nil, fmt.Errorf("client: %w", err)
			}
			r.logger.Info("kubernetes connection opened", "host", rc.Host, "context", c.Context, "pods", withPods)
			return kubernetes.NewBackend(cs, kubernetes.BackendOptions{
				Pods: withPods, PodNames: podNames, Logger: r.logger.With("source", "kubernetes"), Metrics: metrics,
				Health: cc.Health, Endpoint: rc.Host, Serials: &r.serials,
			}), nil
		})
		if err != nil {
			return nil, nil, err
		}
		src, err := kubernetes.NewSource(client.backend, kubernetes.Options{
			Zones:            z.Names,
			TTL:              c.TTL,
			Pods:             c.Pods,
			Namespaces:       c.Namespaces,
			EndpointPodNames: podNames,
			External:         c.Expose == "external",
			Logger:           r.logger.With("source", "kubernetes", "zone", z.Key),
		})
		if err != nil {
			r.kubeClientRelease(client)
			return nil, nil, err
		}
		view := &kubeView{Source: src, releaser: releaser{release: func() { r.kubeClientRelease(client) }}}
		return view, view, nil
	})
	if err != nil {
		return nil, err
	}
	return v.(*kubeView).Source, nil
}

// kubeDryRunSource stands for a kubernetes source that `dnsd check`
// compiles but never starts; it is never asked.
type kubeDryRunSource struct {
	kind string
	ttl  uint32
}

func (d kubeDryRunSource) Lookup(context.Context, *pipeline.Question) pipeline.Result {
	return pipeline.Result{Status: pipeline.Failed, Err: errors.New("dry run")}
}
func (d kubeDryRunSource) Kind() string   { return d.kind }
func (d kubeDryRunSource) TTL() uint32    { return d.ttl }
func (d kubeDryRunSource) Serial() uint32 { return 0 }
