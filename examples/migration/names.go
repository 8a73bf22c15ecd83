package migration

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/source"

	mcr "github.com/mcruntime/multicluster-runtime"
	mcbuilder "github.com/mcruntime/multicluster-runtime/pkg/builder"
	pkgclusters "github.com/mcruntime/multicluster-runtime/pkg/clusters"
	mchandler "github.com/mcruntime/multicluster-runtime/pkg/handler"
	mcmanager "github.com/mcruntime/multicluster-runtime/pkg/manager"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
	mcreconcile "github.com/mcruntime/multicluster-runtime/pkg/reconcile"
	mcsource "github.com/mcruntime/multicluster-runtime/pkg/source"
	"github.com/mcruntime/multicluster-runtime/providers/kubeconfig"
)

// SetupFilteredForEffect filters a source the way upstream code does,
// calling WithClusterFilter for its effect.
func SetupFilteredForEffect(mgr mcmanager.Manager, r mcreconcile.Reconciler) error {
	// snippet:migration-filter-effect
	var production mcsource.ClusterFilterFunc = func(name multicluster.ClusterName, _ cluster.Cluster) bool {
		return name != "" && name != "staging"
	}
	src := mcsource.Kind(&corev1.ConfigMap{}, mchandler.TypedEnqueueRequestForObject[*corev1.ConfigMap]())
	src.WithClusterFilter(production) // sets the filter on src, as upstream
	return mcbuilder.ControllerManagedBy(mgr).Named("production-configmaps").WatchesRawSource(src).Complete(r)
	// end-snippet
}

// Lifted returns a single-cluster handler lifted for the fleet and for one
// cluster.
func Lifted() (mchandler.TypedEventHandlerFunc[*corev1.ConfigMap, mcreconcile.Request], handler.TypedEventHandler[*corev1.ConfigMap, mcreconcile.Request]) {
	// snippet:migration-lift
	inner := &handler.TypedEnqueueRequestForObject[*corev1.ConfigMap]{}
	perCluster := mchandler.TypedLift(inner)                             // for Kind and Watches
	forEU := mchandler.TypedForCluster[*corev1.ConfigMap](inner, "eu-1") // one cluster's handler
	// end-snippet
	return perCluster, forEU
}

// SyncingForCluster returns one cluster's source as a syncing source, as
// upstream code does.
func SyncingForCluster(name multicluster.ClusterName, cl cluster.Cluster) (source.TypedSyncingSource[mcreconcile.Request], bool, error) {
	// snippet:migration-syncing-source
	var src mcsource.SyncingSource[*corev1.ConfigMap] = mcsource.Kind(&corev1.ConfigMap{},
		mchandler.TypedEnqueueRequestForObject[*corev1.ConfigMap]())
	syncing, ok, err := src.SyncingForCluster(name, cl) // nil, false, nil: the source's filter refuses the cluster
	// end-snippet
	return syncing, ok, err
}

// KubeconfigProvider configures the client of every cluster with
// RESTOptions, as upstream code does.
func KubeconfigProvider() *kubeconfig.Provider {
	// snippet:migration-rest-options
	return kubeconfig.New(kubeconfig.Options{
		Namespace: "fleet-system",
		RESTOptions: []func(*rest.Config) error{func(cfg *rest.Config) error {
			cfg.QPS, cfg.Burst = 50, 100
			return nil
		}},
		// Or, for what the library offers as cluster options:
		ClusterOptions: []cluster.Option{pkgclusters.WithRequestTimeout(30 * time.Second)},
	})
	// end-snippet
}

// ListClusters lists a provider's clusters with the kubeconfig provider's
// ListClusters, as upstream code does, and the host with them.
func ListClusters(p *kubeconfig.Provider) ([]multicluster.ClusterName, map[multicluster.ClusterName]cluster.Cluster) {
	// snippet:migration-list-clusters
	names := append(p.ListClusters(), mcmanager.LocalCluster) // engaged clusters' names, sorted, and the host
	clusters := p.EngagedClusters()                           // name → cluster, engaged ones only
	// end-snippet
	return names, clusters
}

// RootAliases uses the root package's type aliases.
func RootAliases() string {
	// snippet:migration-root-aliases
	gv := mcr.GroupVersion{Group: "fleet.example.com", Version: "v1"}
	gr := mcr.GroupResource{Group: gv.Group, Resource: "widgets"}
	meta := mcr.ObjectMeta{Name: "a"}
	// end-snippet
	return fmt.Sprint(gv, gr, meta.Name)
}
