package secondary

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/dnsd/dnsd/config"
	"github.com/dnsd/dnsd/internal/health"
	"github.com/dnsd/dnsd/pipeline"
	"github.com/dnsd/dnsd/sources/kind"
)

// Kind is the secondary source kind. It holds the kind's metrics,
// registered once.
type Kind struct {
	settings *config.Settings
	mu       sync.Mutex
	metrics  *Metrics
}

var _ kind.Kind = (*Kind)(nil)

// NewKind returns the secondary kind.
func NewKind() *Kind { return &Kind{settings: describe()} }

// Name implements config.KindParser.
func (*Kind) Name() string { return "secondary" }

// DefaultFallthrough implements config.KindParser: the copy is the
// zone's authoritative data.
func (*Kind) DefaultFallthrough() bool { return false }

// Settings implements config.KindParser.
func (k *Kind) Settings() *config.Settings { return k.settings }

// Build implements kind.Kind: one backend per zone, primaries, key and
// state_dir, kept across reloads that change none of them.
func (k *Kind) Build(_ context.Context, env *kind.Env, _ config.Zone, settings any) (pipeline.Source, error) {
	c := *settings.(*Config)
	c.StateDir = env.Config.StateDir
	if err := oneCopy(env.Config, &c); err != nil {
		return nil, err
	}
	if env.DryRun { // a source that is never asked
		return NewSource(&Backend{cfg: &c, health: health.New(nil)}), nil
	}
	m, err := k.registerMetrics(env)
	if err != nil {
		return nil, err
	}
	v, _, err := env.Acquire(backendKey(&c), func() (any, io.Closer, error) {
		b, err := Open(&c, env.Logger, env.Serials, m)
		if err != nil {
			return nil, nil, err
		}
		return b, b, nil
	})
	if err != nil {
		return nil, err
	}
	return NewSource(v.(*Backend)), nil
}

// registerMetrics creates and registers the kind's metrics on first use.
func (k *Kind) registerMetrics(env *kind.Env) (*Metrics, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.metrics == nil {
		m := NewMetrics()
		for _, c := range m.Collectors() {
			if err := env.Registerer.Register(c); err != nil {
				return nil, fmt.Errorf("secondary metrics: %w", err)
			}
		}
		k.metrics = m
	}
	return k.metrics, nil
}

// backendKey names c's backend: what its copy depends on.
func backendKey(c *Config) string {
	ps := make([]string, len(c.Primaries))
	for i, p := range c.Primaries {
		ps[i] = p.String()
	}
	key := fmt.Sprintf("zone=%s primaries=%s state_dir=%q", c.Zone, strings.Join(ps, ","), c.StateDir)
	if c.Key != nil {
		sum := sha256.Sum256([]byte(c.Key.Name + " " + c.Key.Algorithm + " " + c.Key.Secret))
		key += fmt.Sprintf(" tsig=%s secrets=%x", c.Key.Name, sum[:8])
	}
	return key
}

// oneCopy refuses a config in which zone c.Zone is a secondary twice (in
// two views) with other primaries or another key: dnsd keeps one copy of
// a zone in state_dir, which two backends would overwrite in turn.
func oneCopy(cfg *config.Config, c *Config) error {
	if cfg == nil {
		return nil
	}
	key := backendKey(c)
	check := func(zones []config.Zone) error {
		for _, z := range zones {
			for _, s := range z.Sources {
				o, ok := s.Settings.(*Config)
				if !ok || s.Kind != "secondary" || o.Zone != c.Zone {
					continue
				}
				oc := *o
				oc.StateDir = c.StateDir
				if backendKey(&oc) != key {
					return fmt.Errorf("%s: zone %s is a secondary elsewhere with other primaries or tsig: dnsd keeps one copy of a zone, so every secondary source of it must name the same primaries and key", s.Pos, strings.TrimSuffix(c.Zone, "."))
				}
			}
		}
		return nil
	}
	if err := check(cfg.Zones); err != nil {
		return err
	}
	for _, v := range cfg.Views {
		if err := check(v.Zones); err != nil {
			return err
		}
	}
	return nil
}
