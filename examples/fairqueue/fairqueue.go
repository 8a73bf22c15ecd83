// Package fairqueue holds the code of the book's page on fair queueing
// (docs/advanced/fair-queueing.md), compiled with the module so that every
// snippet builds against the current API. Nothing here is meant to be
// imported.
package fairqueue

import (
	corev1 "k8s.io/api/core/v1"

	mcbuilder "github.com/mcruntime/multicluster-runtime/pkg/builder"
	mccontroller "github.com/mcruntime/multicluster-runtime/pkg/controller"
	"github.com/mcruntime/multicluster-runtime/pkg/controller/fairqueue"
	mcmanager "github.com/mcruntime/multicluster-runtime/pkg/manager"
	mcreconcile "github.com/mcruntime/multicluster-runtime/pkg/reconcile"
)

// Weighted registers a controller whose queue gives "production" four
// requests per turn and caps every cluster at two of the eight workers.
func Weighted(mgr mcmanager.Manager, r mcreconcile.Reconciler) error {
	// snippet:fairqueue-weighted
	return mcbuilder.ControllerManagedBy(mgr).
		For(&corev1.ConfigMap{}).
		WithOptions(mccontroller.Options{
			MaxConcurrentReconciles: 8,
			NewQueue: fairqueue.NewQueueFunc(fairqueue.Options[mcreconcile.Request]{
				ClusterOf: func(r mcreconcile.Request) string { return r.ClusterName },
				Weight: func(cluster string) int {
					if cluster == "production" {
						return 4 // four requests per turn; quick: it runs with the queue locked
					}
					return 1
				},
				MaxInFlightPerCluster: 2, // a cluster holds at most 2 of the 8 workers
			}),
		}).
		Complete(r)
	// end-snippet
}

// Plain registers a controller that only watches the host, with
// controller-runtime's queue.
func Plain(mgr mcmanager.Manager, r mcreconcile.Reconciler) error {
	// snippet:fairqueue-off
	return mcbuilder.ControllerManagedBy(mgr).
		Named("host-configmaps").
		For(&corev1.ConfigMap{},
					mcbuilder.WithEngageWithLocalCluster(true),
					mcbuilder.WithEngageWithProviderClusters(false)).
		WithFairQueue(false). // controller-runtime's queue: requests in the order they come
		Complete(r)
	// end-snippet
}
