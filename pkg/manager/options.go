package manager

import (
	"time"

	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/mcruntime/multicluster-runtime/pkg/fleet"
)

// Option configures what the Multi-Cluster Manager adds to controller-runtime's
// manager: health checks, sharding, ...
type Option func(*options)

type options struct {
	health           fleet.HealthOptions
	cacheSyncTimeout time.Duration
	sharding         func(manager.Manager) (fleet.Admission, error)
}

// HealthOptions configure the probes of engaged clusters: every engaged
// cluster's /readyz is probed each Interval (default 10s) with Timeout
// (default 5s); after FailureThreshold (default 5) failures in a row, the
// cluster is disconnected: disengaged from every controller and runnable and
// retried with backoff until it answers again. Disabled turns probing off.
type HealthOptions = fleet.HealthOptions

// WithHealthChecks configures the health probes; they are on by default.
func WithHealthChecks(h HealthOptions) Option {
	return func(o *options) { o.health = h }
}

// WithClusterStartTimeout bounds how long a cluster the engine builds may take
// to start and sync its cache before the attempt fails and is retried.
// Default fleet.DefaultCacheSyncTimeout.
func WithClusterStartTimeout(d time.Duration) Option {
	return func(o *options) { o.cacheSyncTimeout = d }
}
