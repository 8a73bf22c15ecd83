package multiclusterruntime_test

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	mcr "github.com/mcruntime/multicluster-runtime"
	mchandler "github.com/mcruntime/multicluster-runtime/pkg/handler"
	mcreconcile "github.com/mcruntime/multicluster-runtime/pkg/reconcile"
)

type defaulter struct{}

func (defaulter) Default(_ context.Context, cm *corev1.ConfigMap) error {
	if cm.Labels == nil {
		cm.Labels = map[string]string{}
	}
	cm.Labels["defaulted"] = "true"
	return nil
}

var _ admission.Defaulter[*corev1.ConfigMap] = defaulter{}

// Webhooks from the root package, as with controller-runtime's root aliases.
func ExampleNewWebhookManagedBy() {
	var mgr mcr.Manager // from mcr.NewManager
	if err := mcr.NewWebhookManagedBy(mgr, &corev1.ConfigMap{}).WithDefaulter(defaulter{}).Complete(); err != nil {
		panic(err)
	}
}

// A controller whose requests are controller-runtime's, tagged with their
// cluster by mcreconcile.WithCluster.
func ExampleNewTypedControllerManagedBy() {
	type request = mcreconcile.WithCluster[reconcile.Request]
	var mgr mcr.Manager
	enqueue := handler.TypedEnqueueRequestsFromMapFunc(func(_ context.Context, obj client.Object) []request {
		return []request{{Request: reconcile.Request{NamespacedName: client.ObjectKeyFromObject(obj)}}}
	})
	err := mcr.NewTypedControllerManagedBy[request](mgr).
		Named("configmaps").
		Watches(&corev1.ConfigMap{}, mchandler.TypedInjectCluster[client.Object, request](enqueue)).
		Complete(reconcile.TypedFunc[request](func(ctx context.Context, req request) (reconcile.Result, error) {
			_, err := mgr.GetCluster(ctx, req.ClusterName)
			return reconcile.Result{}, err
		}))
	if err != nil {
		panic(err)
	}
}
