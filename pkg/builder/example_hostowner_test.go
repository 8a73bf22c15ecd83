package builder_test

import (
	"context"

	corev1 "k8s.io/api/core/v1"

	mcbuilder "github.com/mcruntime/multicluster-runtime/pkg/builder"
	mcmanager "github.com/mcruntime/multicluster-runtime/pkg/manager"
	mcreconcile "github.com/mcruntime/multicluster-runtime/pkg/reconcile"
)

// A host-only controller under sharding: it keeps a status roll-up of a hub
// object and writes to the host alone, so it says so, and the replica that
// owns the host's work is the one that reconciles it.
func ExampleTypedBuilder_WithHostReconcilesOnHostOwner() {
	var mgr mcmanager.Manager // from mcmanager.New(..., mcmanager.WithSharding(...))
	err := mcbuilder.ControllerManagedBy(mgr).
		Named("rollup").
		For(&corev1.ConfigMap{},
			mcbuilder.WithEngageWithLocalCluster(true),
			mcbuilder.WithEngageWithProviderClusters(false)).
		WithHostReconcilesOnHostOwner(true).
		Complete(mcreconcile.Func(func(ctx context.Context, req mcreconcile.Request) (mcreconcile.Result, error) {
			// req.ClusterName is "": read the hub object and write its
			// status through mgr.GetLocalManager().GetClient().
			return mcreconcile.Result{}, nil
		}))
	if err != nil {
		panic(err)
	}
}
