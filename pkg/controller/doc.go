// Package controller provides a controller that reconciles objects across the
// fleet from one queue. Import it as mccontroller.
//
// The controller wraps controller-runtime's typed controller: workers,
// metrics and logging are controller-runtime's. Its queue is by default a
// fair queue (package fairqueue) that serves the clusters with work in turn,
// with controller-runtime's dedup, rate limiting and priorities; see
// FairQueue, and PlainQueue to opt out. Unless MaxConcurrentReconciles is
// set, it runs DefaultMaxConcurrentReconciles workers and one reconcile per
// cluster at a time, so that a member that does not answer holds one worker.
// What it adds is engagement: when a cluster is engaged, every multi-cluster
// source watched by the controller starts a watch in that cluster, feeding the
// shared queue with requests tagged by cluster name; when the cluster
// disengages, those watches are removed, the contexts of its reconciles in
// flight are cancelled, and requests still queued for it are dropped without
// calling the reconciler.
package controller
