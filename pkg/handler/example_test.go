package handler_test

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mcbuilder "github.com/mcruntime/multicluster-runtime/pkg/builder"
	mchandler "github.com/mcruntime/multicluster-runtime/pkg/handler"
	mcmanager "github.com/mcruntime/multicluster-runtime/pkg/manager"
	mcreconcile "github.com/mcruntime/multicluster-runtime/pkg/reconcile"
)

// Requests that name a cluster go there; the others stay in the cluster the
// event came from.
func ExampleEnqueueRequestsFromMapFuncWithClusterPreservation() {
	var mgr mcmanager.Manager
	var r mcreconcile.Reconciler
	_ = mcbuilder.ControllerManagedBy(mgr).
		Named("mirror").
		Watches(&corev1.Secret{}, mchandler.EnqueueRequestsFromMapFuncWithClusterPreservation(
			func(_ context.Context, obj client.Object) []mcreconcile.Request {
				req := mcreconcile.Request{}
				req.Namespace, req.Name = obj.GetNamespace(), obj.GetName()
				central := req.WithCluster("central") // always to the cluster "central"
				return []mcreconcile.Request{req, central}
			})).
		Complete(r)
}

// With controller-runtime's priority queue, each member's initial list (and
// resyncs) go behind live changes.
func ExampleWithLowPriorityWhenUnchanged() {
	var mgr mcmanager.Manager
	var r mcreconcile.Reconciler
	_ = mcbuilder.ControllerManagedBy(mgr).
		Named("configmaps").
		Watches(&corev1.ConfigMap{}, mchandler.WithLowPriorityWhenUnchanged(mchandler.EnqueueRequestForObject)).
		Complete(r)
}
