// Package queue holds what the wrappers around a controller's workqueue share.
package queue

import (
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
)

// AddWithOpts adds items to q with the options of a priority queue. A queue
// without priorities gets the closest plain equivalent: delayed, rate-limited
// or immediate; the priority is dropped.
func AddWithOpts[T comparable](q workqueue.TypedRateLimitingInterface[T], o priorityqueue.AddOpts, items ...T) {
	if pq, ok := q.(priorityqueue.PriorityQueue[T]); ok {
		pq.AddWithOpts(o, items...)
		return
	}
	for _, item := range items {
		switch {
		case o.After > 0:
			q.AddAfter(item, o.After)
		case o.RateLimited:
			q.AddRateLimited(item)
		default:
			q.Add(item)
		}
	}
}

// GetWithPriority gets the next item of q with its priority (0 without priorities).
func GetWithPriority[T comparable](q workqueue.TypedRateLimitingInterface[T]) (T, int, bool) {
	if pq, ok := q.(priorityqueue.PriorityQueue[T]); ok {
		return pq.GetWithPriority()
	}
	item, shutdown := q.Get()
	return item, 0, shutdown
}
