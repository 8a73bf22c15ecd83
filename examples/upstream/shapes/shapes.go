// Package shapes compiles the upstream design's call shape of every name
// issue 41 found here with another shape (and of the names upstream has that
// this library lacked): each function below is written as a program on
// sigs.k8s.io/multicluster-runtime writes the call, with only the import
// prefix changed. The method values assigned to function types pin each
// signature exactly: a name whose shape drifts from upstream's stops this
// package from building. shapes_test.go runs the calls that need no API
// server. The kind and Cluster API rows are in their modules'
// shapes_test.go (providers/kind, providers/cluster-api).
package shapes

import (
	"context"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/mcruntime/multicluster-runtime/pkg/clusters"
	mccontroller "github.com/mcruntime/multicluster-runtime/pkg/controller"
	mchandler "github.com/mcruntime/multicluster-runtime/pkg/handler"
	mcmanager "github.com/mcruntime/multicluster-runtime/pkg/manager"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
	mcreconcile "github.com/mcruntime/multicluster-runtime/pkg/reconcile"
	mcsource "github.com/mcruntime/multicluster-runtime/pkg/source"
	clusterinventoryapi "github.com/mcruntime/multicluster-runtime/providers/cluster-inventory-api"
	"github.com/mcruntime/multicluster-runtime/providers/cluster-inventory-api/apis/v1alpha1"
	"github.com/mcruntime/multicluster-runtime/providers/cluster-inventory-api/credentials"
	"github.com/mcruntime/multicluster-runtime/providers/cluster-inventory-api/kubeconfigstrategy"
	"github.com/mcruntime/multicluster-runtime/providers/kubeconfig"
	"github.com/mcruntime/multicluster-runtime/providers/multi"
	"github.com/mcruntime/multicluster-runtime/providers/namespace"
	"github.com/mcruntime/multicluster-runtime/providers/nop"
)

// Exact signatures of the rows, as upstream declares them.
var (
	_ func() []multicluster.ClusterName                                                                                  = (*kubeconfig.Provider)(nil).ListClusters
	_ func(context.Context, multicluster.ClusterName, cluster.Cluster) error                                             = (*clusters.Registry[cluster.Cluster])(nil).Add
	_ func(context.Context, multicluster.ClusterName, cluster.Cluster) error                                             = (*clusters.Registry[cluster.Cluster])(nil).AddOrReplace
	_ func(func(multicluster.ClusterName, cluster.Cluster) error) error                                                  = (*clusters.Registry[cluster.Cluster])(nil).ForEach
	_ func(multicluster.ClusterName, cluster.Cluster)                                                                    = (*clusters.Registry[cluster.Cluster])(nil).RemoveIfEqual
	_ func(multicluster.Provider, mcmanager.Manager) multi.RunnableProvider                                              = multi.AsRunnable
	_ func(mcmanager.Manager) error                                                                                      = (*clusterinventoryapi.Provider)(nil).SetupWithManager
	_ func(context.Context, *v1alpha1.ClusterProfile) bool                                                               = clusterinventoryapi.Options{}.IsReady
	_ func() multicluster.ClusterName                                                                                    = (*namespace.NamespacedCluster)(nil).Name
	_ func(context.Context, multicluster.Aware) error                                                                    = (*nop.Provider)(nil).Start
	_ multicluster.ProviderRunnable                                                                                      = nop.New()
	_ func(mccontroller.Controller, mcsource.TypedSource[client.Object, mcreconcile.Request]) error                      = mccontroller.Controller.MultiClusterWatch
	_ *kubeconfigstrategy.AccessProviderOption                                                                           = kubeconfigstrategy.Option{}.AccessProvider
	_ *credentials.AccessProvidersConfig                                                                                 = kubeconfigstrategy.AccessProviderOption{}.Provider
	_ func(handler.EventHandler, multicluster.ClusterName) handler.TypedEventHandler[client.Object, mcreconcile.Request] = mchandler.ForCluster
)

// ListAndHost lists a kubeconfig provider's clusters and appends the host,
// as upstream programs do with ListClusters, and ranges over the names.
func ListAndHost(p *kubeconfig.Provider) []string {
	names := append(p.ListClusters(), mcmanager.LocalCluster)
	var out []string
	for _, name := range names {
		out = append(out, "cluster="+name)
	}
	return out
}

// MapToRequests is upstream's TypedEnqueueRequestsFromMapFunc: the map
// function returns mcreconcile.Requests, and one that names no cluster goes
// to the event's.
func MapToRequests() mchandler.TypedEventHandlerFunc[*v1alpha1.ClusterProfile, mcreconcile.Request] {
	return mchandler.TypedEnqueueRequestsFromMapFunc(func(_ context.Context, p *v1alpha1.ClusterProfile) []mcreconcile.Request {
		return []mcreconcile.Request{{Request: reconcile.Request{NamespacedName: client.ObjectKeyFromObject(p)}}}
	})
}

// RegistryCalls uses clusters.Registry as upstream code does.
func RegistryCalls(ctx context.Context, r *clusters.Registry[cluster.Cluster], name multicluster.ClusterName, cl cluster.Cluster) ([]multicluster.ClusterName, error) {
	if err := r.Add(ctx, name, cl); err != nil {
		return nil, err
	}
	if err := r.AddOrReplace(ctx, name, cl); err != nil {
		return nil, err
	}
	var seen []multicluster.ClusterName
	if err := r.ForEach(func(name multicluster.ClusterName, _ cluster.Cluster) error {
		seen = append(seen, name)
		return nil
	}); err != nil {
		return nil, err
	}
	r.RemoveIfEqual(name, cl)
	return seen, nil
}

// OneCluster is upstream's ForCluster and TypedForCluster, handler first.
func OneCluster(name multicluster.ClusterName) (mchandler.EventHandler, handler.TypedEventHandler[*v1alpha1.ClusterProfile, mcreconcile.Request]) {
	h := mchandler.ForCluster(&handler.EnqueueRequestForObject{}, name)
	typed := mchandler.TypedForCluster[*v1alpha1.ClusterProfile](&handler.TypedEnqueueRequestForObject[*v1alpha1.ClusterProfile]{}, name)
	return h, typed
}

// Runnable is upstream's multi.AsRunnable(p, mgr).
func Runnable(p multicluster.Provider, mgr mcmanager.Manager) multi.RunnableProvider {
	return multi.AsRunnable(p, mgr)
}

// SetUpProfiles is upstream's ClusterProfile provider: SetupWithManager(mgr),
// IsReady with a context, and the access providers through
// KubeconfigStrategyOption (Provider is this library's KEP-5339 config, not
// sigs.k8s.io/cluster-inventory-api's access.Config; see the migration page).
func SetUpProfiles(mgr mcmanager.Manager, aps []credentials.AccessProvider) (*clusterinventoryapi.Provider, error) {
	provider, err := clusterinventoryapi.New(clusterinventoryapi.Options{
		KubeconfigStrategyOption: kubeconfigstrategy.Option{
			AccessProvider: &kubeconfigstrategy.AccessProviderOption{
				Provider: &credentials.AccessProvidersConfig{Providers: aps},
			},
		},
		IsReady: func(ctx context.Context, p *v1alpha1.ClusterProfile) bool {
			return ctx.Err() == nil && clusterinventoryapi.ControlPlaneHealthy(p)
		},
	})
	if err != nil {
		return nil, err
	}
	return provider, provider.SetupWithManager(mgr)
}

// Source is upstream's mcsource.TypedSource[object, request] and its
// ForCluster with the bool that says whether the cluster is watched.
func Source(name multicluster.ClusterName, cl cluster.Cluster) (source.TypedSource[mcreconcile.Request], bool, error) {
	var src mcsource.TypedSource[*v1alpha1.ClusterProfile, mcreconcile.Request] = mcsource.Kind(&v1alpha1.ClusterProfile{},
		mchandler.TypedEnqueueRequestForObject[*v1alpha1.ClusterProfile]())
	return src.ForCluster(name, cl)
}

// SyncingSource is upstream's SyncingForCluster, with the bool.
func SyncingSource(name multicluster.ClusterName, cl cluster.Cluster) (source.TypedSyncingSource[mcreconcile.Request], bool, error) {
	var src mcsource.SyncingSource[*v1alpha1.ClusterProfile] = mcsource.Kind(&v1alpha1.ClusterProfile{},
		mchandler.TypedEnqueueRequestForObject[*v1alpha1.ClusterProfile]())
	return src.SyncingForCluster(name, cl)
}

// Watch is upstream's MultiClusterWatch of a TypedSource[client.Object, request].
func Watch(c mccontroller.Controller, src mcsource.TypedSource[client.Object, mcreconcile.Request]) error {
	return c.MultiClusterWatch(src)
}

// NamespaceName is upstream's NamespacedCluster.Name().
func NamespaceName(cl cluster.Cluster) (multicluster.ClusterName, bool) {
	nc, ok := cl.(*namespace.NamespacedCluster)
	if !ok {
		return "", false
	}
	return nc.Name(), true
}

// Nop is upstream's nop provider as a ProviderRunnable.
func Nop() multicluster.ProviderRunnable { return nop.New() }

// KubeconfigRESTOptions is the kubeconfig provider's RESTOptions, the shape
// kind's now has too.
func KubeconfigRESTOptions() *kubeconfig.Provider {
	return kubeconfig.New(kubeconfig.Options{RESTOptions: []func(*rest.Config) error{func(cfg *rest.Config) error {
		cfg.QPS = 50
		return nil
	}}})
}
