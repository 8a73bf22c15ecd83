package handler

import (
	"time"

	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/mcruntime/multicluster-runtime/internal/queue"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
	mcreconcile "github.com/mcruntime/multicluster-runtime/pkg/reconcile"
)

// clusterQueue presents the controller's multi-cluster queue to a
// single-cluster handler: what the handler adds is tagged with the cluster.
// It is a priority queue so that controller-runtime's handlers keep their
// priorities (initial-list events go behind live ones).
func clusterQueue(name multicluster.ClusterName, q workqueue.TypedRateLimitingInterface[mcreconcile.Request]) *taggingQueue {
	return &taggingQueue{name: name, q: q}
}

type taggingQueue struct {
	name multicluster.ClusterName
	q    workqueue.TypedRateLimitingInterface[mcreconcile.Request]
}

var _ priorityqueue.PriorityQueue[reconcile.Request] = &taggingQueue{}

func (t *taggingQueue) tag(r reconcile.Request) mcreconcile.Request {
	return mcreconcile.Request{Request: r, ClusterName: t.name}
}

func (t *taggingQueue) Add(item reconcile.Request) { t.q.Add(t.tag(item)) }
func (t *taggingQueue) AddAfter(item reconcile.Request, d time.Duration) {
	t.q.AddAfter(t.tag(item), d)
}
func (t *taggingQueue) AddRateLimited(item reconcile.Request) { t.q.AddRateLimited(t.tag(item)) }
func (t *taggingQueue) Forget(item reconcile.Request)         { t.q.Forget(t.tag(item)) }
func (t *taggingQueue) NumRequeues(item reconcile.Request) int {
	return t.q.NumRequeues(t.tag(item))
}
func (t *taggingQueue) Done(item reconcile.Request) { t.q.Done(t.tag(item)) }
func (t *taggingQueue) Len() int                    { return t.q.Len() }
func (t *taggingQueue) ShutDown()                   { t.q.ShutDown() }
func (t *taggingQueue) ShutDownWithDrain()          { t.q.ShutDownWithDrain() }
func (t *taggingQueue) ShuttingDown() bool          { return t.q.ShuttingDown() }

// Get hands out the next item of the shared queue without its cluster. Handlers
// only add to queues; Get exists to satisfy the interface.
func (t *taggingQueue) Get() (reconcile.Request, bool) {
	item, shutdown := t.q.Get()
	return item.Request, shutdown
}

func (t *taggingQueue) GetWithPriority() (reconcile.Request, int, bool) {
	item, prio, shutdown := queue.GetWithPriority(t.q)
	return item.Request, prio, shutdown
}

func (t *taggingQueue) AddWithOpts(o priorityqueue.AddOpts, items ...reconcile.Request) {
	tagged := make([]mcreconcile.Request, len(items))
	for i, item := range items {
		tagged[i] = t.tag(item)
	}
	queue.AddWithOpts(t.q, o, tagged...)
}
