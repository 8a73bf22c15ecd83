package namespace_test

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	mcbuilder "github.com/mcruntime/multicluster-runtime/pkg/builder"
	mcmanager "github.com/mcruntime/multicluster-runtime/pkg/manager"
	mcreconcile "github.com/mcruntime/multicluster-runtime/pkg/reconcile"
	"github.com/mcruntime/multicluster-runtime/providers/namespace"
)

// Every Namespace of the API server becomes a cluster; the reconciler reads
// its ConfigMaps in namespace "default" of each.
func ExampleNew() {
	cfg := ctrl.GetConfigOrDie()
	cl, err := cluster.New(cfg) // its cache is shared by all virtual clusters
	if err != nil {
		panic(err)
	}
	provider := namespace.New(cl)

	mgr, err := mcmanager.New(cfg, provider, mcmanager.Options{})
	if err != nil {
		panic(err)
	}
	err = mcbuilder.ControllerManagedBy(mgr).
		For(&corev1.ConfigMap{}).
		Complete(mcreconcile.Func(func(ctx context.Context, req mcreconcile.Request) (reconcile.Result, error) {
			// req.ClusterName is the namespace; req.Namespace is "default".
			cl, err := mgr.GetCluster(ctx, req.ClusterName)
			if err != nil {
				return reconcile.Result{}, err
			}
			cm := &corev1.ConfigMap{}
			if err := cl.GetClient().Get(ctx, req.NamespacedName, cm); err != nil {
				return reconcile.Result{}, client.IgnoreNotFound(err)
			}
			return reconcile.Result{}, nil
		}))
	if err != nil {
		panic(err)
	}
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		panic(err)
	}
}
