package sources

import (
	"context"
	"fmt"

	"github.com/dnsd/dnsd/config"
	"github.com/dnsd/dnsd/pipeline"
)

// kubeState is the kubernetes kind's process-lifetime state.
type kubeState struct{}

func (st *kubeState) close() {}

// kubernetesSource builds a kubernetes source.
func (r *Registry) kubernetesSource(ctx context.Context, cfg *config.Config, z config.Zone, c *config.Kubernetes, set *Set) (pipeline.Source, error) {
	return nil, fmt.Errorf("source kind %q is not available yet in this build", config.KindKubernetes)
}
