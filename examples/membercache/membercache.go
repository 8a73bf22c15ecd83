// Package membercache holds the code of the book's pages on what member
// caches hold (docs/advanced/performance.md#what-member-caches-hold,
// docs/patterns/builder.md#metadata-only-and-partial-caches), compiled with
// the module so that every snippet builds against the current API. Nothing
// here is meant to be imported.
package membercache

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	mcbuilder "github.com/mcruntime/multicluster-runtime/pkg/builder"
	"github.com/mcruntime/multicluster-runtime/pkg/clusters"
	mchandler "github.com/mcruntime/multicluster-runtime/pkg/handler"
	mcmanager "github.com/mcruntime/multicluster-runtime/pkg/manager"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
	mcreconcile "github.com/mcruntime/multicluster-runtime/pkg/reconcile"
	"github.com/mcruntime/multicluster-runtime/providers/kubeconfig"
	"github.com/mcruntime/multicluster-runtime/providers/namespace"
)

// KeepPerManager returns a manager whose members keep managed fields and
// kubectl's last applied configuration in their caches.
func KeepPerManager(cfg *rest.Config, provider multicluster.Provider) (mcmanager.Manager, error) {
	// snippet:keep-managed-fields-manager
	return mcmanager.New(cfg, provider, mcmanager.Options{},
		// Every member the fleet engine builds, whichever provider publishes it.
		mcmanager.WithClusterOptions(clusters.KeepManagedFields()),
	)
	// end-snippet
}

// KeepPerCluster keeps them in one member only, and in every member of one
// provider.
func KeepPerCluster(cfg *rest.Config, provider multicluster.Provider) (mcmanager.Manager, *kubeconfig.Provider, error) {
	// snippet:keep-managed-fields-cluster
	// By name, whichever provider publishes the cluster:
	mgr, err := mcmanager.New(cfg, provider, mcmanager.Options{},
		mcmanager.WithClusterOptionsFor(func(name multicluster.ClusterName) []cluster.Option {
			if name == "audit" {
				return []cluster.Option{clusters.KeepManagedFields()}
			}
			return nil
		}),
	)
	// Or for every cluster of one provider:
	audited := kubeconfig.New(kubeconfig.Options{
		ClusterOptions: []cluster.Option{clusters.KeepManagedFields()},
	})
	// end-snippet
	return mgr, audited, err
}

// SharedNamespaceCache builds the namespace provider's shared cluster with
// the members' default.
func SharedNamespaceCache(cfg *rest.Config) (*namespace.Provider, error) {
	// snippet:namespace-strip
	// NewCluster's default: the shared cache drops managed fields and
	// kubectl's last applied configuration, as a member's does.
	shared, err := clusters.NewCluster(cfg)
	if err != nil {
		return nil, err
	}
	provider := namespace.New(shared)
	// end-snippet
	return provider, nil
}

// PartialCaches returns a manager whose members cache only the Secrets
// labelled app=web, and a controller that reads nothing but metadata.
func PartialCaches(cfg *rest.Config, provider multicluster.Provider, r mcreconcile.Reconciler) (mcmanager.Manager, error) {
	// snippet:member-cache-options
	// What a member caches of a type is set where its cache is built, as
	// controller-runtime's Options.Cache.ByObject is for the host.
	mgr, err := mcmanager.New(cfg, provider, mcmanager.Options{},
		mcmanager.WithClusterOptions(
			clusters.WithCacheByObject(&corev1.Secret{}, cache.ByObject{
				Label: labels.SelectorFromSet(labels.Set{"app": "web"}),
			}),
		),
	)
	// end-snippet
	if err != nil {
		return nil, err
	}
	// snippet:metadata-only
	err = mcbuilder.ControllerManagedBy(mgr).
		// The reconciler reads a Deployment's metadata only (r reads
		// &metav1.PartialObjectMetadata with the Deployment's kind).
		For(&appsv1.Deployment{}, mcbuilder.OnlyMetadata).
		Owns(&corev1.ConfigMap{}, mcbuilder.OnlyMetadata).
		WatchesMetadata(&corev1.Secret{}, mchandler.EnqueueRequestsFromMapFunc(secretToApp)).
		Complete(r)
	// end-snippet
	return mgr, err
}

// secretToApp enqueues the Deployment a Secret's "app" label names, in the
// Secret's cluster.
func secretToApp(_ context.Context, s client.Object) []reconcile.Request {
	app := s.GetLabels()["app"]
	if app == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: s.GetNamespace(), Name: app}}}
}
