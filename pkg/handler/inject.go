package handler

import (
	"context"
	"sync/atomic"
	"time"

	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"

	"github.com/mcruntime/multicluster-runtime/internal/queue"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
	mcreconcile "github.com/mcruntime/multicluster-runtime/pkg/reconcile"
)

// TypedInjectCluster turns a handler of cluster-aware requests into a
// per-cluster one: every request h enqueues is set to the cluster the event
// came from, whatever cluster h put in it. This is Lift for controllers with
// their own request type (mcreconcile.ClusterAware).
func TypedInjectCluster[object client.Object, request mcreconcile.ClusterAware[request]](h handler.TypedEventHandler[object, request]) TypedEventHandlerFunc[object, request] {
	return func(name multicluster.ClusterName, _ cluster.Cluster) handler.TypedEventHandler[object, request] {
		return &injecting[object, request]{name: name, inner: h}
	}
}

// TypedPreserveCluster is TypedInjectCluster that keeps the cluster of the
// requests h names one for: a request that names no cluster ("") is set to
// the event's cluster, one that names a cluster goes there. A request from a
// member cannot name the host this way ("" means "this cluster"); use
// EnqueueClusterRequestsFromMapFunc for that.
func TypedPreserveCluster[object client.Object, request mcreconcile.ClusterAware[request]](h handler.TypedEventHandler[object, request]) TypedEventHandlerFunc[object, request] {
	return func(name multicluster.ClusterName, _ cluster.Cluster) handler.TypedEventHandler[object, request] {
		return &injecting[object, request]{name: name, inner: h, preserve: true}
	}
}

// EnqueueRequestsFromMapFuncWithClusterPreservation enqueues the requests fn
// maps an object to: those that name a cluster go to that cluster, those that
// do not go to the cluster the event came from.
func EnqueueRequestsFromMapFuncWithClusterPreservation(fn handler.TypedMapFunc[client.Object, mcreconcile.Request]) EventHandlerFunc {
	return TypedEnqueueRequestsFromMapFuncWithClusterPreservation(fn)
}

// TypedEnqueueRequestsFromMapFuncWithClusterPreservation is
// EnqueueRequestsFromMapFuncWithClusterPreservation for any object and
// cluster-aware request type.
func TypedEnqueueRequestsFromMapFuncWithClusterPreservation[object client.Object, request mcreconcile.ClusterAware[request]](fn handler.TypedMapFunc[object, request]) TypedEventHandlerFunc[object, request] {
	return TypedPreserveCluster(handler.TypedEnqueueRequestsFromMapFunc(fn))
}

// WithLowPriorityWhenUnchanged is controller-runtime's
// handler.WithLowPriorityWhenUnchanged for per-cluster handlers: with a
// priority queue, the events of a cluster's initial list and of resyncs
// (unchanged resourceVersion) are enqueued behind live changes. Without a
// priority queue it changes nothing.
func WithLowPriorityWhenUnchanged[object client.Object, request comparable](f TypedEventHandlerFunc[object, request]) TypedEventHandlerFunc[object, request] {
	return func(name multicluster.ClusterName, cl cluster.Cluster) handler.TypedEventHandler[object, request] {
		return handler.WithLowPriorityWhenUnchanged(f(name, cl))
	}
}

// injecting runs a handler against a queue that sets the cluster of what it adds.
type injecting[object client.Object, request mcreconcile.ClusterAware[request]] struct {
	name     multicluster.ClusterName
	inner    handler.TypedEventHandler[object, request]
	preserve bool
	// view is the injecting view of the last queue seen: a handler is fed
	// by one queue, so events do not allocate a view each.
	view atomic.Pointer[injectingQueue[request]]
}

func (h *injecting[object, request]) queue(q workqueue.TypedRateLimitingInterface[request]) workqueue.TypedRateLimitingInterface[request] {
	if v := h.view.Load(); v != nil && v.TypedRateLimitingInterface == q {
		return v
	}
	v := &injectingQueue[request]{TypedRateLimitingInterface: q, name: h.name, preserve: h.preserve}
	h.view.Store(v)
	return v
}

func (h *injecting[object, request]) Create(ctx context.Context, evt event.TypedCreateEvent[object], q workqueue.TypedRateLimitingInterface[request]) {
	h.inner.Create(ctx, evt, h.queue(q))
}

func (h *injecting[object, request]) Update(ctx context.Context, evt event.TypedUpdateEvent[object], q workqueue.TypedRateLimitingInterface[request]) {
	h.inner.Update(ctx, evt, h.queue(q))
}

func (h *injecting[object, request]) Delete(ctx context.Context, evt event.TypedDeleteEvent[object], q workqueue.TypedRateLimitingInterface[request]) {
	h.inner.Delete(ctx, evt, h.queue(q))
}

func (h *injecting[object, request]) Generic(ctx context.Context, evt event.TypedGenericEvent[object], q workqueue.TypedRateLimitingInterface[request]) {
	h.inner.Generic(ctx, evt, h.queue(q))
}

// injectingQueue sets the cluster of the requests added to it. It is a
// priority queue so that handlers keep their priorities.
type injectingQueue[request mcreconcile.ClusterAware[request]] struct {
	workqueue.TypedRateLimitingInterface[request]
	name     multicluster.ClusterName
	preserve bool
}

var _ priorityqueue.PriorityQueue[mcreconcile.Request] = &injectingQueue[mcreconcile.Request]{}

func (q *injectingQueue[request]) set(item request) request {
	if q.preserve && item.Cluster() != "" {
		return item
	}
	return item.WithCluster(q.name)
}

func (q *injectingQueue[request]) Add(item request) { q.TypedRateLimitingInterface.Add(q.set(item)) }
func (q *injectingQueue[request]) AddAfter(item request, d time.Duration) {
	q.TypedRateLimitingInterface.AddAfter(q.set(item), d)
}
func (q *injectingQueue[request]) AddRateLimited(item request) {
	q.TypedRateLimitingInterface.AddRateLimited(q.set(item))
}
func (q *injectingQueue[request]) Forget(item request) {
	q.TypedRateLimitingInterface.Forget(q.set(item))
}
func (q *injectingQueue[request]) NumRequeues(item request) int {
	return q.TypedRateLimitingInterface.NumRequeues(q.set(item))
}
func (q *injectingQueue[request]) Done(item request) { q.TypedRateLimitingInterface.Done(q.set(item)) }

func (q *injectingQueue[request]) AddWithOpts(o priorityqueue.AddOpts, items ...request) {
	set := make([]request, len(items))
	for i, item := range items {
		set[i] = q.set(item)
	}
	queue.AddWithOpts(q.TypedRateLimitingInterface, o, set...)
}

func (q *injectingQueue[request]) GetWithPriority() (request, int, bool) {
	return queue.GetWithPriority(q.TypedRateLimitingInterface)
}
