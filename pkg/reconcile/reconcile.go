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
	return &ClusterNotFoundWrapper[request]{Reconciler: r}
}

// ClusterNotFoundWrapper is the reconciler NewClusterNotFoundWrapper returns.
// mcbuilder wraps every reconciler in it unless told otherwise
// (WithClusterNotFoundWrapper(false)).
type ClusterNotFoundWrapper[request comparable] struct {
	// Reconciler is the wrapped reconciler.
	Reconciler reconcile.TypedReconciler[request]
}

var _ Reconciler = &ClusterNotFoundWrapper[Request]{}

// Reconcile calls the wrapped reconciler and ends the request without requeue
// if the error wraps multicluster.ErrClusterNotFound.
func (w *ClusterNotFoundWrapper[request]) Reconcile(ctx context.Context, req request) (reconcile.Result, error) {
	res, err := w.Reconciler.Reconcile(ctx, req)
	if errors.Is(err, multicluster.ErrClusterNotFound) {
		return reconcile.Result{}, nil
	}
	return res, err
}

// String names the wrapped reconciler, for logs.
func (w *ClusterNotFoundWrapper[request]) String() string { return "ClusterNotFoundWrapper" }
