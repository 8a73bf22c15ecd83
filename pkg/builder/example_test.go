package builder_test

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	mcbuilder "github.com/mcruntime/multicluster-runtime/pkg/builder"
	mccontroller "github.com/mcruntime/multicluster-runtime/pkg/controller"
	"github.com/mcruntime/multicluster-runtime/pkg/controller/fairqueue"
	mcmanager "github.com/mcruntime/multicluster-runtime/pkg/manager"
	mcreconcile "github.com/mcruntime/multicluster-runtime/pkg/reconcile"
)

// A uniform reconciler: the same logic in every cluster of the fleet. The
// request says which cluster the ConfigMap lives in.
func ExampleControllerManagedBy() {
	var mgr mcmanager.Manager // from mcmanager.New
	err := mcbuilder.ControllerManagedBy(mgr).
		Named("configmaps").
		For(&corev1.ConfigMap{}).
		Owns(&corev1.Secret{}).
		Complete(mcreconcile.Func(func(ctx context.Context, req mcreconcile.Request) (mcreconcile.Result, error) {
			cl, err := mgr.GetCluster(ctx, req.ClusterName)
			if err != nil {
				return mcreconcile.Result{}, err // ClusterNotFound: dropped, not retried
			}
			cm := &corev1.ConfigMap{}
			if err := cl.GetClient().Get(ctx, req.NamespacedName, cm); err != nil {
				return mcreconcile.Result{}, client.IgnoreNotFound(err)
			}
			logf.FromContext(ctx).Info("Reconciled", "configmap", cm.Name) // the logger carries the cluster
			return mcreconcile.Result{}, nil
		}))
	if err != nil {
		panic(err)
	}
}

// Watch the host cluster and the fleet with one controller.
func ExampleWithEngageWithLocalCluster() {
	var mgr mcmanager.Manager
	var reconciler mcreconcile.Reconciler
	_ = mcbuilder.ControllerManagedBy(mgr).
		For(&corev1.ConfigMap{},
			mcbuilder.WithEngageWithLocalCluster(true),     // requests with ClusterName ""
			mcbuilder.WithEngageWithProviderClusters(true), // and from every member
		).
		Complete(reconciler)
}

// The controller's queue serves the clusters with work in turn, so that a
// busy cluster cannot starve the others. Weights and the per-cluster worker
// cap are the fair queue's options; WithFairQueue(false) restores
// controller-runtime's queue, which serves requests in the order they come.
func ExampleBuilder_WithFairQueue() {
	var mgr mcmanager.Manager
	var reconciler mcreconcile.Reconciler
	_ = mcbuilder.ControllerManagedBy(mgr).
		For(&corev1.ConfigMap{}).
		WithOptions(mccontroller.Options{
			MaxConcurrentReconciles: 8,
			NewQueue: fairqueue.NewQueueFunc(fairqueue.Options[mcreconcile.Request]{
				ClusterOf: func(r mcreconcile.Request) string { return r.ClusterName },
				Weight: func(cluster string) int {
					if cluster == "production" {
						return 4 // four requests per turn
					}
					return 1
				},
				MaxInFlightPerCluster: 2, // a cluster holds at most 2 of the 8 workers
			}),
		}).
		Complete(reconciler)

	_ = mcbuilder.ControllerManagedBy(mgr).
		Named("unfair").
		For(&corev1.ConfigMap{}).
		WithFairQueue(false).
		Complete(reconciler)
}
