package sharding

import "github.com/mcruntime/multicluster-runtime/internal/metrics"

// Fence events counted in multicluster_sharding_fence_events_total.
const (
	eventAcquired      = "acquired"       // free or released fence taken
	eventTakenOver     = "taken_over"     // taken from a replica whose lease expired
	eventReleased      = "released"       // given back by the engine
	eventLost          = "lost"           // ended under the engine: renewal deadline passed, taken or deleted
	eventReleaseFailed = "release_failed" // could not be cleared: the next owner waits for expiry
)

var (
	fenceEvents = metrics.NewCounterVec("multicluster_sharding_fence_events_total",
		"Cluster fences acquired, taken over from expired replicas, released, lost, or not released, by sharding group.",
		"group", "event")
	renewalFailures = metrics.NewCounterVec("multicluster_sharding_renewal_failures_total",
		"Failed renewals of this replica's replica Lease, by sharding group.",
		"group")
)
