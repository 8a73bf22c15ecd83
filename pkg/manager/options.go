package manager

import (
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/mcruntime/multicluster-runtime/pkg/clusters"
	"github.com/mcruntime/multicluster-runtime/pkg/fleet"
	"github.com/mcruntime/multicluster-runtime/pkg/manager/sharding"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
)

// Option configures what the Multi-Cluster Manager adds to controller-runtime's
// manager: health checks, sharding, ...
type Option func(*options)

type options struct {
	reconcileSeries  int
	health           fleet.HealthOptions
	cacheSyncTimeout time.Duration
	listingTimeout   time.Duration
	sharding         func(manager.Manager) (fleet.Admission, error)
	clusterOptions   func(multicluster.ClusterName) []cluster.Option
	clusterSettings  clusters.SettingsFunc
	statusPath       *string // nil: status.DefaultPath (statusendpoint.go)
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

// WithSharding shares the fleet between the replicas of this controller
// process: each cluster is run by exactly one live replica, decided before
// its cache starts (see package sharding for the Leases, the assignment, the
// hand-off guarantees and the RBAC needed). Leave leader election off:
// sharding replaces it. Members published by built-in providers and clusters
// adopted through Engage are admitted, fenced, drained and handed off alike;
// Engage of a cluster another replica owns returns at once, and the cluster
// is engaged here if this replica comes to own it.
//
// The host's work has one owner too (sharding.HostKey): the runnables that
// controller-runtime's manager would start only once elected (added through
// Add or GetLocalManager().Add, needing leader election by its rules, and
// not multicluster.Aware) run on the replica that holds the host's fence,
// started for each of its tenures and stopped and drained before the fence
// is released; so do the host requests of controllers built
// WithHostReconcilesOnHostOwner (see HostOwner). A controller-runtime
// controller starts once per process: a replica that loses the host while
// it lives and owns it again later ends with that error, as a manager that
// loses leader election does. Every replica also takes a census of who runs
// the clusters it knows (multicluster_sharding_clusters).
func WithSharding(opts sharding.Options) Option {
	return func(o *options) {
		o.sharding = func(mgr manager.Manager) (fleet.Admission, error) {
			if opts.Logger == nil {
				log := mgr.GetLogger().WithName("sharding")
				opts.Logger = &log
			}
			c, err := sharding.New(mgr.GetConfig(), opts)
			if err != nil {
				return nil, err
			}
			if err := mgr.Add(c); err != nil {
				return nil, err
			}
			return c, nil
		}
	}
}

// WithPerClusterReconcileMetrics counts every reconcile of the manager's
// multi-cluster controllers by controller, cluster and result (success, error,
// requeue) in multicluster_reconcile_total, for at most maxClusters clusters:
// clusters beyond the cap get no series of their own, so a large fleet cannot
// blow up the metrics endpoint. Off by default; controller-runtime's own
// controller_runtime_reconcile_total counts reconciles per controller.
func WithPerClusterReconcileMetrics(maxClusters int) Option {
	return func(o *options) { o.reconcileSeries = maxClusters }
}

// WithClusterStartTimeout bounds how long a cluster the engine builds may take
// to start and sync its cache before the attempt fails and is retried.
// Default fleet.DefaultCacheSyncTimeout.
func WithClusterStartTimeout(d time.Duration) Option {
	return func(o *options) { o.cacheSyncTimeout = d }
}

// The coordinator bounds the engine's drain before a fence is released.
var _ fleet.DrainBound = &sharding.Coordinator{}

// WithListingTimeout bounds how long the readiness check "clusters" waits for
// a provider that is a multicluster.ListingProvider to list the clusters it
// finds at start-up; after it, readiness no longer waits for the listing and
// the overrun is logged. Default fleet.DefaultListingTimeout (1 minute).
func WithListingTimeout(d time.Duration) Option {
	return func(o *options) { o.listingTimeout = d }
}

// WithClusterOptions applies opts to every cluster the manager's fleet engine
// builds for a provider (file, kubeconfig, kind, cluster-api,
// cluster-inventory-api, and every provider built on pkg/clusters.Members or
// pkg/inventory), before the provider's own ClusterOptions: what Options.Cache
// and its neighbours are to the host cluster, these are to the members. For
// example, clusters.KeepManagedFields() keeps the managed fields every member
// cache otherwise drops, and clusters.WithCacheByObject selects what members
// cache of a type. Clusters a provider builds and engages itself (the
// clusters, single and namespace providers, custom providers that call
// Engage) are built by their owner and do not get them. Options given more
// than once add up.
func WithClusterOptions(opts ...cluster.Option) Option {
	return WithClusterOptionsFor(func(multicluster.ClusterName) []cluster.Option { return opts })
}

// WithClusterOptionsFor is WithClusterOptions with options chosen per
// cluster: forCluster is called with the cluster's name each time the engine
// builds it, e.g. to keep managed fields in one member only.
func WithClusterOptionsFor(forCluster func(name multicluster.ClusterName) []cluster.Option) Option {
	return func(o *options) {
		prev := o.clusterOptions
		o.clusterOptions = func(name multicluster.ClusterName) []cluster.Option {
			if prev == nil {
				return forCluster(name)
			}
			return append(prev(name), forCluster(name)...)
		}
	}
}

// ClusterSettingsFunc adjusts one cluster's client settings and options when
// it is built; see clusters.SettingsFunc.
type ClusterSettingsFunc = clusters.SettingsFunc

// WithClusterSettings adjusts the client of each cluster the manager's fleet
// engine builds for a provider built on pkg/clusters.Members or
// pkg/inventory (file, kubeconfig, kind, cluster-api, cluster-inventory-api,
// ...), by its name and the inventory object it was read from (nil for
// providers that read none): hook may change a copy of the cluster's
// rest.Config — QPS, Burst, Timeout, UserAgent and the other client
// settings — and returns cluster options for that cluster alone (its cache
// scope, say), applied after those of WithClusterOptions and the provider's.
// It may not change the server, its trust, the proxy, the transport or the
// credentials: such a build fails, naming the cluster and the fields, and is
// reported on the source object and retried as any failed build. By
// default, no hook: every cluster is built as its provider says (no
// client-side rate limit, see clusters.NewCluster). The hook runs at every
// build, on the engine's goroutine for the cluster; keep it fast and do not
// call the manager from it. Hooks given more than once run in order, each on
// the config the previous one adjusted.
//
// For example, a lower rate for one member:
//
//	mcmanager.WithClusterSettings(func(name multicluster.ClusterName, _ client.Object, cfg *rest.Config) []cluster.Option {
//		if name == "edge-17" {
//			cfg.QPS, cfg.Burst = 5, 10
//		}
//		return nil
//	})
func WithClusterSettings(hook ClusterSettingsFunc) Option {
	return func(o *options) {
		if hook == nil {
			return
		}
		prev := o.clusterSettings
		if prev == nil {
			o.clusterSettings = hook
			return
		}
		o.clusterSettings = func(name multicluster.ClusterName, source client.Object, cfg *rest.Config) []cluster.Option {
			return append(prev(name, source, cfg), hook(name, source, cfg)...)
		}
	}
}
