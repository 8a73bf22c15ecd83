package migration

import (
	"context"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	mcbuilder "github.com/mcruntime/multicluster-runtime/pkg/builder"
	"github.com/mcruntime/multicluster-runtime/pkg/clusters"
	mcmanager "github.com/mcruntime/multicluster-runtime/pkg/manager"
	"github.com/mcruntime/multicluster-runtime/pkg/manager/coordinator/sharded"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
	mcreconcile "github.com/mcruntime/multicluster-runtime/pkg/reconcile"
	clusterinventoryapi "github.com/mcruntime/multicluster-runtime/providers/cluster-inventory-api"
	"github.com/mcruntime/multicluster-runtime/providers/cluster-inventory-api/credentials"
	"github.com/mcruntime/multicluster-runtime/providers/cluster-inventory-api/kubeconfigstrategy"
	"github.com/mcruntime/multicluster-runtime/providers/multi"
)

// SetupFromOtherProvider watches the ConfigMaps of the clusters of another
// provider than the manager's.
func SetupFromOtherProvider(ctx context.Context, mgr mcmanager.Manager, other multicluster.Provider, r mcreconcile.Reconciler) error {
	// snippet:migration-clusters-from-provider
	return mcbuilder.ControllerManagedBy(mgr).
		Named("other-fleet-configmaps").
		For(&corev1.ConfigMap{}, mcbuilder.WithClustersFromProvider(ctx, other)).
		Complete(r) // r reaches the clusters with other.Get(ctx, req.ClusterName)
	// end-snippet
}

// Registry keeps the clusters the manager engages, for code that is not a
// controller.
func Registry(mgr mcmanager.Manager) (*clusters.Registry[cluster.Cluster], error) {
	// snippet:migration-registry
	registry := clusters.NewRegistry[cluster.Cluster]()
	registry.EqualClusters = clusters.EqualClusters[cluster.Cluster]
	if err := mgr.Add(registry); err != nil { // engaged with every cluster, as a controller is
		return nil, err
	}
	// Later, anywhere: registry.ClusterNames(), registry.Get(ctx, name),
	// registry.ForEach(func(name, cl) error { ...; return nil })
	// end-snippet
	return registry, nil
}

// Sharded shares the fleet between replicas, in the upstream design's form.
func Sharded(cfg *rest.Config, provider multicluster.Provider, kube client.Client, log logr.Logger) (mcmanager.Manager, error) {
	// snippet:migration-coordinator
	coordinator := sharded.New(kube, log,
		sharded.WithShardLease("fleet-system", "my-controller"),
		sharded.WithPeerWeight(2),
		sharded.WithLeaseTimings(15*time.Second, 10*time.Second, 2*time.Second))
	return mcmanager.New(cfg, provider, manager.Options{}, mcmanager.WithCoordinator(coordinator))
	// end-snippet
}

// ShardedFasterHandOff is where upstream code tunes its probe and rehash
// intervals: here, the Lease timings decide how fast a lost replica's
// clusters move.
func ShardedFasterHandOff(kube client.Client, log logr.Logger) *sharded.Coordinator {
	// snippet:migration-sharded-intervals
	return sharded.New(kube, log, sharded.WithLeaseTimings(8*time.Second, 5*time.Second, time.Second))
	// end-snippet
}

// MultiProvider composes providers with a logger of its own, and no
// ChannelSize.
func MultiProvider() *multi.Provider {
	// snippet:migration-multi
	return multi.New(multi.Options{Separator: "#", LoggerSuffix: "regions"}) // no ChannelSize: nothing is buffered
	// end-snippet
}

// ClusterProfiles builds the ClusterProfile provider in the upstream
// design's form, configuring its clusters with ClusterOptions where upstream
// code gives a NewCluster.
func ClusterProfiles(aps []clusterinventoryapi.AccessProvider) (*clusterinventoryapi.Provider, error) {
	// snippet:migration-cluster-profiles
	return clusterinventoryapi.New(clusterinventoryapi.Options{
		KubeconfigStrategyOption: kubeconfigstrategy.Option{
			// Upstream: Provider: accessConfig (an *access.Config of sigs.k8s.io/cluster-inventory-api)
			AccessProvider: &kubeconfigstrategy.AccessProviderOption{
				Provider: &credentials.AccessProvidersConfig{Providers: aps},
			},
		},
		// Where upstream code sets NewCluster, pass the cluster options it applied:
		ClusterOptions: []cluster.Option{clusters.WithRequestTimeout(30 * time.Second)},
	})
	// end-snippet
}
