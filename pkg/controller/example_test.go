package controller_test

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	mccontroller "github.com/mcruntime/multicluster-runtime/pkg/controller"
	mchandler "github.com/mcruntime/multicluster-runtime/pkg/handler"
	mcmanager "github.com/mcruntime/multicluster-runtime/pkg/manager"
	mcreconcile "github.com/mcruntime/multicluster-runtime/pkg/reconcile"
	mcsource "github.com/mcruntime/multicluster-runtime/pkg/source"
)

// A controller with a request type of its own, built without the builder:
// mcreconcile.WithCluster tags controller-runtime's request with its cluster.
func ExampleNewTyped() {
	type request = mcreconcile.WithCluster[reconcile.Request]
	var mgr mcmanager.Manager
	c, err := mccontroller.NewTyped("pods", mgr, mccontroller.TypedOptions[request]{
		Reconciler: reconcile.TypedFunc[request](func(ctx context.Context, req request) (reconcile.Result, error) {
			_ = req.ClusterName // and req.Request.NamespacedName
			return reconcile.Result{}, nil
		}),
	})
	if err != nil {
		panic(err)
	}
	enqueue := handler.TypedEnqueueRequestsFromMapFunc(func(_ context.Context, pod *corev1.Pod) []request {
		return []request{{Request: reconcile.Request{NamespacedName: client.ObjectKeyFromObject(pod)}}}
	})
	err = c.MultiClusterWatch(mcsource.TypedKind(&corev1.Pod{}, mchandler.TypedInjectCluster[*corev1.Pod, request](enqueue)))
	if err != nil {
		panic(err)
	}
}
