package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/klog/v2"

	"github.com/dnsd/dnsd/config"
	"github.com/dnsd/dnsd/internal/health"
	"github.com/dnsd/dnsd/pipeline"
	"github.com/dnsd/dnsd/sources/kind"
)

// Kind is the kubernetes source kind. It holds the kind's process-lifetime
// state: its metrics (registered once) and the cluster connections, shared
// by every source with the same kubeconfig and context (and whether
// endpoints keep their pods' names), whatever their other settings, across
// zones and reloads; pods: verified starts a Pod informer on it.
type Kind struct {
	settings   *config.Settings
	mu         sync.Mutex
	metrics    *Metrics
	registered bool
	klog       bool // client-go's process-wide logger goes to dnsd's log
	clients    kind.Shared[*Backend]
}

var _ kind.Kind = (*Kind)(nil)

// NewKind returns the kubernetes kind.
func NewKind() *Kind { return &Kind{settings: describe()} }

// Name implements config.KindParser.
func (*Kind) Name() string { return "kubernetes" }

// DefaultFallthrough implements config.KindParser: unknown cluster names
// are NXDOMAIN, as the Kubernetes DNS specification wants.
func (*Kind) DefaultFallthrough() bool { return false }

// Settings implements config.KindParser.
func (k *Kind) Settings() *config.Settings { return k.settings }

// Build implements kind.Kind. Sources with equal settings and zones are
// one registry backend (kept across reloads); sources with the same
// connection settings share one connection and its informers.
func (k *Kind) Build(_ context.Context, env *kind.Env, z config.Zone, settings any) (pipeline.Source, error) {
	c := settings.(*Config)
	logger := env.Logger.With("source", "kubernetes")
	cc := ClientConfig{Kubeconfig: c.Kubeconfig, Context: c.Context, UserAgent: "dnsd", Logger: logger}
	if env.DryRun {
		// `dnsd check`: load the client configuration (files only), start
		// nothing.
		if _, err := RESTConfig(cc); err != nil {
			return nil, err
		}
		return dryRunSource{ttl: pipeline.TTLSeconds(c.TTL)}, nil
	}
	// One connection per kubeconfig and context; a source with pods:
	// verified starts the Pod informer on it when it needs it
	// (Backend.podInformer).
	podNames := c.EndpointPodNames && c.Expose != "external"
	clientKey := fmt.Sprintf("kubeconfig=%q context=%q", c.Kubeconfig, c.Context)
	ns := slices.Clone(c.Namespaces)
	slices.Sort(ns)
	key := fmt.Sprintf("%s zones=%q ttl=%s pods=%s namespaces=%q endpoint_pod_names=%t expose=%s",
		clientKey, strings.Join(z.Names, " "), c.TTL, c.Pods, strings.Join(ns, ","), c.EndpointPodNames, c.Expose)
	v, _, err := env.Acquire(key, func() (any, io.Closer, error) {
		metrics := k.registerMetrics(env)
		backend, release, opened, err := k.clients.Acquire(clientKey, func() (*Backend, error) {
			k.redirectKlog(logger)
			cc := cc
			cc.Health = health.New(cc.Logger)
			rc, err := RESTConfig(cc)
			if err != nil {
				return nil, err
			}
			api, err := NewAPI(rc)
			if err != nil {
				return nil, err
			}
			env.Logger.Info("kubernetes connection opened", "host", rc.Host, "context", c.Context)
			return NewBackend(api, BackendOptions{
				Logger: logger, Metrics: metrics,
				Health: cc.Health, Endpoint: rc.Host, Serials: env.Serials,
			}), nil
		})
		if err != nil {
			return nil, nil, err
		}
		src, err := NewSource(backend, Options{
			Zones:            z.Names,
			TTL:              c.TTL,
			Pods:             c.Pods,
			Namespaces:       c.Namespaces,
			EndpointPodNames: podNames,
			External:         c.Expose == "external",
			Logger:           logger.With("zone", z.Key),
			Bulk:             env.Bulk,
		})
		if err != nil {
			release()
			return nil, nil, err
		}
		return src, &kind.View[*Source]{Value: src, Release: release, Opened: opened}, nil
	})
	if err != nil {
		return nil, err
	}
	return v.(*Source), nil
}

var _ pipeline.Syncer = (*Source)(nil)

// Close closes every cluster connection still open (process exit).
func (k *Kind) Close() error {
	k.clients.CloseAll()
	return nil
}

// redirectKlog sends client-go's few log lines, written through klog's
// process-wide logger (the informers log through their context's), to
// dnsd's log, once.
func (k *Kind) redirectKlog(logger *slog.Logger) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if !k.klog {
		k.klog = true
		klog.SetSlogLogger(logger)
	}
}

// registerMetrics returns the kind's metrics, registering them on first
// use.
func (k *Kind) registerMetrics(env *kind.Env) *Metrics {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.metrics == nil {
		k.metrics = NewMetrics()
	}
	if !k.registered {
		k.registered = true
		for _, c := range k.metrics.Collectors() {
			if err := env.Registerer.Register(c); err != nil {
				var already prometheus.AlreadyRegisteredError
				if !errors.As(err, &already) {
					env.Logger.Warn("kubernetes metrics", "err", err)
				}
			}
		}
	}
	return k.metrics
}

// dryRunSource stands for a kubernetes source that `dnsd check` compiles
// but never starts; it is never asked.
type dryRunSource struct {
	ttl uint32
}

func (d dryRunSource) Lookup(context.Context, *pipeline.Question) pipeline.Result {
	return pipeline.Result{Status: pipeline.Failed, Err: errors.New("dry run")}
}
func (d dryRunSource) Kind() string   { return "kubernetes" }
func (d dryRunSource) TTL() uint32    { return d.ttl }
func (d dryRunSource) Serial() uint32 { return 0 }
