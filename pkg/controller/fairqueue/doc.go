// Package fairqueue provides a controller workqueue that serves the clusters
// of a fleet in turn, so that one busy cluster cannot starve the others.
//
// A controller-runtime controller has one queue and a few workers. With a
// plain queue, a request for a quiet cluster waits behind everything queued
// for a busy one: thousands of items after an initial list or a relist. The
// fair queue keeps one ready list per cluster and hands out items
// round-robin across the clusters that have work, optionally weighted, while
// keeping controller-runtime's semantics:
//
//   - per-key dedup: an item queued or being processed is never handed out
//     twice; an item added again while it is processed is handed out again
//     after Done;
//   - AddAfter, AddRateLimited, Forget and NumRequeues, backed by the
//     controller's rate limiter;
//   - priorities (priorityqueue.AddOpts): higher first within a cluster's
//     turn, fair across clusters;
//   - the workqueue metrics, reported through a workqueue.MetricsProvider
//     (by default controller-runtime's, the same series a plain controller
//     reports).
//
// A cluster can also be held to a number of requests in processing at once
// (Options.MaxInFlightPerCluster): its items wait until one of its requests
// is Done, so that a member whose reconciles are slow cannot take every
// worker.
//
// A cluster's lane can be paused (Queue.Pause): its items are kept and
// deduplicated, and none is handed out until Queue.Resume. Multi-cluster
// controllers hold the requests of a paused cluster this way.
//
// The queue is generic over the request type; Options.ClusterOf names a
// request's cluster. It implements workqueue.TypedRateLimitingInterface and
// priorityqueue.PriorityQueue, so controller-runtime's controller uses it as
// its own through controller.TypedOptions.NewQueue. Multi-cluster controllers
// (package mccontroller) use it by default.
package fairqueue
