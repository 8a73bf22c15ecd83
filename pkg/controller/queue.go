package controller

import (
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"

	"github.com/mcruntime/multicluster-runtime/pkg/controller/fairqueue"
	mcreconcile "github.com/mcruntime/multicluster-runtime/pkg/reconcile"
)

// NewQueueFunc is the type of Options.NewQueue.
type NewQueueFunc = TypedNewQueueFunc[mcreconcile.Request]

// TypedNewQueueFunc is the type of TypedOptions.NewQueue.
type TypedNewQueueFunc[request comparable] = func(controllerName string, rateLimiter workqueue.TypedRateLimiter[request]) workqueue.TypedRateLimitingInterface[request]

// DefaultMaxConcurrentReconciles is the number of workers of a multi-cluster
// controller whose options, and the manager's, leave MaxConcurrentReconciles
// unset and whose queue is the fair queue. Each cluster then gets what
// controller-runtime gives a controller of one cluster by default, one
// reconcile at a time, and clusters are reconciled side by side: a member
// that does not answer holds one worker for at most the request bound of its
// client, and the fleet's other members keep the rest. A reconciler that
// keeps state across clusters without a lock sets MaxConcurrentReconciles to
// 1, which serves the whole fleet with one worker, as the upstream design does.
const DefaultMaxConcurrentReconciles = 16

// FairQueue returns the queue a multi-cluster controller uses when
// Options.NewQueue is nil: a fairqueue that serves the clusters with work in
// turn, so that a busy cluster cannot starve the others. Priorities are kept
// unless UsePriorityQueue is false, in which case each cluster's items are
// handed out in FIFO order as by controller-runtime's plain queue.
//
// With MaxConcurrentReconciles N > 1, one cluster holds at most
// MaxInFlightPerCluster(N) workers at once, so that a member whose reconciles
// are slow cannot take every worker. For other weights or caps, set
// Options.NewQueue to fairqueue.NewQueueFunc.
func FairQueue[request mcreconcile.ClusterAware[request]](o TypedOptions[request]) TypedNewQueueFunc[request] {
	return fairQueue(o, MaxInFlightPerCluster(o.MaxConcurrentReconciles))
}

func fairQueue[request mcreconcile.ClusterAware[request]](o TypedOptions[request], perCluster int) TypedNewQueueFunc[request] {
	return fairqueue.NewQueueFunc(fairqueue.Options[request]{
		ClusterOf:             func(r request) string { return r.Cluster() },
		MaxInFlightPerCluster: perCluster,
		FIFO:                  !ptr.Deref(o.UsePriorityQueue, true),
	})
}

// defaultQueue sets o's queue when it has none: the fair queue, with
// DefaultMaxConcurrentReconciles workers and one per cluster when o leaves the
// number of workers unset.
func defaultQueue[request mcreconcile.ClusterAware[request]](o *TypedOptions[request]) {
	if o.NewQueue != nil {
		return
	}
	if o.MaxConcurrentReconciles > 0 {
		o.NewQueue = FairQueue(*o)
		return
	}
	o.MaxConcurrentReconciles = DefaultMaxConcurrentReconciles
	o.NewQueue = fairQueue(*o, 1)
}

// MaxInFlightPerCluster is the cap of requests of one cluster in processing
// for a controller with n workers set explicitly: half of them (at least
// one), and no cap with a single worker, which one cluster holds anyway.
func MaxInFlightPerCluster(n int) int {
	if n <= 1 {
		return 0
	}
	return max(1, n/2)
}

// PlainQueue returns controller-runtime's default queue for o, which serves
// requests in the order they come whatever their cluster: its priority queue,
// or its plain rate-limiting queue when UsePriorityQueue is false.
func PlainQueue[request comparable](o TypedOptions[request]) TypedNewQueueFunc[request] {
	return func(name string, rl workqueue.TypedRateLimiter[request]) workqueue.TypedRateLimitingInterface[request] {
		if ptr.Deref(o.UsePriorityQueue, true) {
			return priorityqueue.New(name, func(po *priorityqueue.Opts[request]) {
				po.Log = o.Logger.WithValues("controller", name)
				po.RateLimiter = rl
			})
		}
		return workqueue.NewTypedRateLimitingQueueWithConfig(rl, workqueue.TypedRateLimitingQueueConfig[request]{Name: name})
	}
}
