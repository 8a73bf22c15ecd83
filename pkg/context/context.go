package context

import (
	"context"
	"errors"

	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
	mcreconcile "github.com/mcruntime/multicluster-runtime/pkg/reconcile"
)

type clusterKey struct{}

// ErrNoCluster is returned by ClusterFrom when the context carries no cluster.
var ErrNoCluster = errors.New("no cluster name in context: wrap the reconciler with ReconcilerWithClusterInContext or call WithCluster")

// WithCluster returns a copy of ctx that carries the cluster name.
func WithCluster(ctx context.Context, name multicluster.ClusterName) context.Context {
	return context.WithValue(ctx, clusterKey{}, name)
}

// ClusterFrom returns the cluster name carried by ctx. The second result is
// false when ctx carries none; the host cluster is carried as "".
func ClusterFrom(ctx context.Context) (multicluster.ClusterName, bool) {
	name, ok := ctx.Value(clusterKey{}).(multicluster.ClusterName)
	return name, ok
}

// ReconcilerWithClusterInContext adapts a single-cluster reconciler into a
// multi-cluster one: the request's cluster name travels in the context, where
// mcmanager.Manager.ClusterFromContext finds it.
func ReconcilerWithClusterInContext(r reconcile.Reconciler) mcreconcile.Reconciler {
	return mcreconcile.Func(func(ctx context.Context, req mcreconcile.Request) (reconcile.Result, error) {
		return r.Reconcile(WithCluster(ctx, req.ClusterName), req.Request)
	})
}
