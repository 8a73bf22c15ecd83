package reconcile

import (
	"context"
	"errors"

	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
)

// Request is a reconcile.Request tagged with the cluster it belongs to.
// The empty ClusterName is the host cluster.
type Request struct {
	reconcile.Request

	// ClusterName is the cluster the object lives in.
	ClusterName multicluster.ClusterName
}

// String reads cluster://<cluster>/<namespace>/<name>, or the plain key for the
// host cluster.
func (r Request) String() string {
	if r.ClusterName == "" {
		return r.NamespacedName.String()
	}
	if r.Namespace == "" {
		return "cluster://" + r.ClusterName + "/" + r.Name
	}
	return "cluster://" + r.ClusterName + "/" + r.Namespace + "/" + r.Name
}

// Reconciler reconciles multi-cluster requests.
type Reconciler = reconcile.TypedReconciler[Request]

// Func adapts a function to Reconciler.
type Func = reconcile.TypedFunc[Request]

// Result is controller-runtime's reconcile.Result.
type Result = reconcile.Result

// NewClusterNotFoundWrapper returns a reconciler that turns an error wrapping
// multicluster.ErrClusterNotFound into success without requeue: work for a
// cluster that left the fleet is dropped rather than retried forever.
func NewClusterNotFoundWrapper[request comparable](r reconcile.TypedReconciler[request]) reconcile.TypedReconciler[request] {
	return &clusterNotFoundWrapper[request]{inner: r}
}

type clusterNotFoundWrapper[request comparable] struct {
	inner reconcile.TypedReconciler[request]
}

func (w *clusterNotFoundWrapper[request]) Reconcile(ctx context.Context, req request) (reconcile.Result, error) {
	res, err := w.inner.Reconcile(ctx, req)
	if errors.Is(err, multicluster.ErrClusterNotFound) {
		return reconcile.Result{}, nil
	}
	return res, err
}

// String names the wrapped reconciler, for logs.
func (w *clusterNotFoundWrapper[request]) String() string { return "ClusterNotFoundWrapper" }
