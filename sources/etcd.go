package sources

import (
	"context"
	"fmt"

	"github.com/dnsd/dnsd/config"
	"github.com/dnsd/dnsd/pipeline"
)

// etcdState is the etcd kind's process-lifetime state.
type etcdState struct{}

func (st *etcdState) close() {}

// etcdSource builds a etcd source.
func (r *Registry) etcdSource(ctx context.Context, cfg *config.Config, z config.Zone, c *config.Etcd, set *Set) (pipeline.Source, error) {
	return nil, fmt.Errorf("source kind %q is not available yet in this build", config.KindEtcd)
}
