package reconcile

import (
	"fmt"

	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
)

// ClusterAware is the constraint on the request types of multi-cluster
// controllers: a request knows the cluster it belongs to, and a handler can
// set it. Request implements it; so does WithCluster, which tags any
// single-cluster request type with a cluster.
//
// A controller with its own request type is built with
// mcbuilder.TypedControllerManagedBy[MyRequest] or mccontroller.NewTyped:
//
//	type MyRequest struct {
//		Key         string
//		ClusterName multicluster.ClusterName
//	}
//
//	func (r MyRequest) Cluster() multicluster.ClusterName { return r.ClusterName }
//	func (r MyRequest) WithCluster(name multicluster.ClusterName) MyRequest {
//		r.ClusterName = name
//		return r
//	}
type ClusterAware[request comparable] interface {
	comparable

	// Cluster is the cluster the request belongs to; "" is the host cluster.
	Cluster() multicluster.ClusterName
	// WithCluster returns a copy of the request that belongs to name.
	WithCluster(name multicluster.ClusterName) request
}

// Cluster is the cluster the request belongs to; "" is the host cluster.
func (r Request) Cluster() multicluster.ClusterName { return r.ClusterName }

// WithCluster returns a copy of r that belongs to name.
func (r Request) WithCluster(name multicluster.ClusterName) Request {
	r.ClusterName = name
	return r
}

// WithCluster tags a single-cluster request of any type with its cluster, so
// that a controller-runtime request type becomes a multi-cluster one:
// mcreconcile.WithCluster[MyKey] is a ClusterAware request.
type WithCluster[request comparable] struct {
	// Request is the single-cluster request.
	Request request
	// ClusterName is the cluster the request belongs to; "" is the host cluster.
	ClusterName multicluster.ClusterName
}

// Cluster is the cluster the request belongs to.
func (r WithCluster[request]) Cluster() multicluster.ClusterName { return r.ClusterName }

// WithCluster returns a copy of r that belongs to name.
func (r WithCluster[request]) WithCluster(name multicluster.ClusterName) WithCluster[request] {
	r.ClusterName = name
	return r
}

// String reads cluster://<cluster>/<request>, or the plain request for the
// host cluster.
func (r WithCluster[request]) String() string {
	if r.ClusterName == "" {
		return fmt.Sprint(r.Request)
	}
	return fmt.Sprintf("cluster://%s/%v", r.ClusterName, r.Request)
}

// clusterAware compiles only if T satisfies ClusterAware.
func clusterAware[T ClusterAware[T]]() {}

var (
	_ = clusterAware[Request]
	_ = clusterAware[WithCluster[string]]
)
