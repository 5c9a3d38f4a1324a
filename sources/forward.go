package sources

import (
	"context"
	"fmt"

	"github.com/dnsd/dnsd/config"
	"github.com/dnsd/dnsd/pipeline"
)

// forwardState is the forward kind's process-lifetime state.
type forwardState struct{}

func (st *forwardState) close() {}

func (st *forwardState) swapped(cfg *config.Config, p *pipeline.Pipeline) {}

// forwardSource builds a forward source.
func (r *Registry) forwardSource(ctx context.Context, cfg *config.Config, z config.Zone, c *config.Forward, set *Set) (pipeline.Source, error) {
	return nil, fmt.Errorf("source kind %q is not available yet in this build", config.KindForward)
}
