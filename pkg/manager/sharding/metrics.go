package sharding

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Fence events counted in multicluster_sharding_fence_events_total.
const (
	eventAcquired      = "acquired"       // free or released fence taken
	eventTakenOver     = "taken_over"     // taken from a replica whose lease expired
	eventReleased      = "released"       // given back by the engine
	eventLost          = "lost"           // ended under the engine: renewal deadline passed, taken or deleted
	eventReleaseFailed = "release_failed" // could not be cleared: the next owner waits for expiry
)

var (
	fenceEvents = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "multicluster_sharding_fence_events_total",
		Help: "Cluster fences acquired, taken over from expired replicas, released, lost, or not released, by sharding group.",
	}, []string{"group", "event"})
	renewalFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "multicluster_sharding_renewal_failures_total",
		Help: "Failed renewals of this replica's replica Lease, by sharding group.",
	}, []string{"group"})
)

func init() {
	metrics.Registry.MustRegister(fenceEvents, renewalFailures)
}
