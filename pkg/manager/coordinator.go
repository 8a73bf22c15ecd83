package manager

import (
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/mcruntime/multicluster-runtime/pkg/fleet"
	"github.com/mcruntime/multicluster-runtime/pkg/manager/sharding"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
)

// Runnable is a manager.Runnable that is also multicluster.Aware: added to
// the manager, it runs with it and is engaged with every cluster of the
// fleet (this replica's share of it, under sharding).
type Runnable interface {
	manager.Runnable
	multicluster.Aware
}

// Coordinator decides which replica runs which cluster, in the upstream
// design's form (WithCoordinator). Here a coordinator is a description of
// the sharding it asks for: the manager runs it as package sharding does,
// with its per-cluster fences, bounded drain and admission before a cache
// starts, so that at most one replica runs a cluster at any instant.
// pkg/manager/coordinator/sharded makes one.
type Coordinator interface {
	// ShardingOptions returns the sharding the coordinator stands for, or
	// an error for what cannot be honoured here.
	ShardingOptions() (sharding.Options, error)
}

// WithCoordinator shares the fleet between replicas as c says: it is
// WithSharding(c.ShardingOptions()). An error of ShardingOptions fails
// New and WithMultiCluster.
func WithCoordinator(c Coordinator) Option {
	return func(o *options) {
		if c == nil {
			o.sharding = func(manager.Manager) (fleet.Admission, error) {
				return nil, fmt.Errorf("mcmanager: WithCoordinator: nil coordinator")
			}
			return
		}
		opts, err := c.ShardingOptions()
		if err != nil {
			o.sharding = func(manager.Manager) (fleet.Admission, error) {
				return nil, fmt.Errorf("mcmanager: WithCoordinator: %w", err)
			}
			return
		}
		WithSharding(opts)(o)
	}
}
