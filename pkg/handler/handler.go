package handler

import (
	"context"
	"sync/atomic"

	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/mcruntime/multicluster-runtime/internal/queue"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
	mcreconcile "github.com/mcruntime/multicluster-runtime/pkg/reconcile"
)

// TypedEventHandlerFunc builds the event handler for one cluster. It is called
// once per engaged cluster.
type TypedEventHandlerFunc[object client.Object, request comparable] func(clusterName multicluster.ClusterName, cl cluster.Cluster) handler.TypedEventHandler[object, request]

// EventHandlerFunc is a TypedEventHandlerFunc for client.Object and mcreconcile.Request.
type EventHandlerFunc = TypedEventHandlerFunc[client.Object, mcreconcile.Request]

// Lift turns a single-cluster handler into a per-cluster one: the requests the
// handler enqueues are tagged with the cluster the event came from. The same
// handler value serves every cluster, so it must not keep per-cluster state;
// use LiftFactory for handlers that need the cluster (its scheme or mapper).
func Lift[object client.Object](h handler.TypedEventHandler[object, reconcile.Request]) TypedEventHandlerFunc[object, mcreconcile.Request] {
	return func(name multicluster.ClusterName, _ cluster.Cluster) handler.TypedEventHandler[object, mcreconcile.Request] {
		return &lifted[object]{name: name, inner: h}
	}
}

// TypedLift is Lift under the upstream design's name for typed handlers.
func TypedLift[object client.Object](h handler.TypedEventHandler[object, reconcile.Request]) TypedEventHandlerFunc[object, mcreconcile.Request] {
	return Lift(h)
}

// ForCluster returns the handler h lifted for one cluster: the requests it
// enqueues are tagged with name. It is Lift(h)(name, cl), in the upstream
// design's shape and argument order (handler first); TypedForCluster is the
// same for typed handlers.
func ForCluster(h handler.EventHandler, name multicluster.ClusterName) EventHandler {
	return TypedForCluster[client.Object](h, name)
}

// LiftFactory is Lift for handlers built per cluster.
func LiftFactory[object client.Object](build func(name multicluster.ClusterName, cl cluster.Cluster) handler.TypedEventHandler[object, reconcile.Request]) TypedEventHandlerFunc[object, mcreconcile.Request] {
	return func(name multicluster.ClusterName, cl cluster.Cluster) handler.TypedEventHandler[object, mcreconcile.Request] {
		return &lifted[object]{name: name, inner: build(name, cl)}
	}
}

// lifted runs a single-cluster handler against a queue that tags its requests
// with the cluster name. mcsource.Kind does not call it: it hands the inner
// handler its own queue for the cluster, which tags and holds (see Unlift).
type lifted[object client.Object] struct {
	name  multicluster.ClusterName
	inner handler.TypedEventHandler[object, reconcile.Request]
	// tagging is the tagging view of the last queue seen: a handler is fed
	// by one queue, so events do not allocate a view each.
	tagging atomic.Pointer[queue.Cluster[reconcile.Request, mcreconcile.Request]]
}

var _ queue.Lifted[client.Object] = &lifted[client.Object]{}

// Unlift returns the cluster and the single-cluster handler.
func (l *lifted[object]) Unlift() (multicluster.ClusterName, handler.TypedEventHandler[object, reconcile.Request]) {
	return l.name, l.inner
}

func (l *lifted[object]) queue(q workqueue.TypedRateLimitingInterface[mcreconcile.Request]) *queue.Cluster[reconcile.Request, mcreconcile.Request] {
	if t := l.tagging.Load(); t != nil && t.Wraps(q) {
		return t
	}
	t := queue.ForCluster(l.name, q, false)
	l.tagging.Store(t)
	return t
}

func (l *lifted[object]) Create(ctx context.Context, evt event.TypedCreateEvent[object], q workqueue.TypedRateLimitingInterface[mcreconcile.Request]) {
	l.inner.Create(ctx, evt, l.queue(q))
}

func (l *lifted[object]) Update(ctx context.Context, evt event.TypedUpdateEvent[object], q workqueue.TypedRateLimitingInterface[mcreconcile.Request]) {
	l.inner.Update(ctx, evt, l.queue(q))
}

func (l *lifted[object]) Delete(ctx context.Context, evt event.TypedDeleteEvent[object], q workqueue.TypedRateLimitingInterface[mcreconcile.Request]) {
	l.inner.Delete(ctx, evt, l.queue(q))
}

func (l *lifted[object]) Generic(ctx context.Context, evt event.TypedGenericEvent[object], q workqueue.TypedRateLimitingInterface[mcreconcile.Request]) {
	l.inner.Generic(ctx, evt, l.queue(q))
}

// EnqueueRequestForObject enqueues the object of every event, in the cluster the
// event came from.
func EnqueueRequestForObject(name multicluster.ClusterName, cl cluster.Cluster) handler.TypedEventHandler[client.Object, mcreconcile.Request] {
	return TypedEnqueueRequestForObject[client.Object]()(name, cl)
}

// TypedEnqueueRequestForObject is EnqueueRequestForObject for a typed object.
func TypedEnqueueRequestForObject[object client.Object]() TypedEventHandlerFunc[object, mcreconcile.Request] {
	return Lift[object](&handler.TypedEnqueueRequestForObject[object]{})
}

// EnqueueRequestForOwner enqueues the owner of type ownerType of the event's
// object, in the same cluster as the object. Options are controller-runtime's
// (handler.OnlyControllerOwner).
func EnqueueRequestForOwner(ownerType client.Object, opts ...handler.OwnerOption) EventHandlerFunc {
	return TypedEnqueueRequestForOwner[client.Object](ownerType, opts...)
}

// TypedEnqueueRequestForOwner is EnqueueRequestForOwner for a typed object.
func TypedEnqueueRequestForOwner[object client.Object](ownerType client.Object, opts ...handler.OwnerOption) TypedEventHandlerFunc[object, mcreconcile.Request] {
	return LiftFactory(func(_ multicluster.ClusterName, cl cluster.Cluster) handler.TypedEventHandler[object, reconcile.Request] {
		return handler.TypedEnqueueRequestForOwner[object](cl.GetScheme(), cl.GetRESTMapper(), ownerType, opts...)
	})
}

// EnqueueRequestsFromMapFunc enqueues the requests fn maps an object to, in the
// cluster the event came from.
func EnqueueRequestsFromMapFunc(fn handler.MapFunc) EventHandlerFunc {
	return TypedEnqueueReconcileRequestsFromMapFunc[client.Object](fn)
}

// TypedEnqueueReconcileRequestsFromMapFunc is EnqueueRequestsFromMapFunc for
// a typed object: fn returns controller-runtime's reconcile.Requests, each
// enqueued in the cluster the event came from.
func TypedEnqueueReconcileRequestsFromMapFunc[object client.Object](fn handler.TypedMapFunc[object, reconcile.Request]) TypedEventHandlerFunc[object, mcreconcile.Request] {
	return Lift(handler.TypedEnqueueRequestsFromMapFunc(fn))
}

// TypedEnqueueRequestsFromMapFunc enqueues the cluster-aware requests
// (mcreconcile.Request or a request type of the application's own) fn maps
// an object to, in upstream's shape: a request that names a cluster goes
// there, one that names none ("") goes to the cluster the event came from.
// It is TypedEnqueueRequestsFromMapFuncWithClusterPreservation. For
// reconcile.Requests, use TypedEnqueueReconcileRequestsFromMapFunc.
func TypedEnqueueRequestsFromMapFunc[object client.Object, request mcreconcile.ClusterAware[request]](fn handler.TypedMapFunc[object, request]) TypedEventHandlerFunc[object, request] {
	return TypedEnqueueRequestsFromMapFuncWithClusterPreservation(fn)
}

// ClusterMapFunc maps an object of one cluster to requests for any clusters.
type ClusterMapFunc = TypedClusterMapFunc[client.Object]

// TypedClusterMapFunc is ClusterMapFunc for a typed object.
type TypedClusterMapFunc[object client.Object] func(ctx context.Context, clusterName multicluster.ClusterName, obj object) []mcreconcile.Request

// EnqueueClusterRequestsFromMapFunc enqueues the requests fn returns as they
// are: each names its own target cluster. This is the hub-to-fleet pattern: a
// watch on the host fans out to requests for every member.
func EnqueueClusterRequestsFromMapFunc(fn ClusterMapFunc) EventHandlerFunc {
	return TypedEnqueueClusterRequestsFromMapFunc(fn)
}

// TypedEnqueueClusterRequestsFromMapFunc is EnqueueClusterRequestsFromMapFunc for a typed object.
func TypedEnqueueClusterRequestsFromMapFunc[object client.Object](fn TypedClusterMapFunc[object]) TypedEventHandlerFunc[object, mcreconcile.Request] {
	return func(name multicluster.ClusterName, _ cluster.Cluster) handler.TypedEventHandler[object, mcreconcile.Request] {
		return handler.TypedEnqueueRequestsFromMapFunc(func(ctx context.Context, obj object) []mcreconcile.Request {
			return fn(ctx, name, obj)
		})
	}
}
