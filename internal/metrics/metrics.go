// Package metrics holds the library's Prometheus metrics, registered with
// controller-runtime's registry so that the manager's metrics endpoint serves
// them beside controller-runtime's own.
package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	// Clusters counts the fleet's clusters by lifecycle state.
	Clusters = NewGaugeVec("multicluster_clusters",
		"Clusters of the fleet by lifecycle state (wanted, admitted, starting, engaged, disconnected).",
		"state")

	// Transitions counts every lifecycle transition.
	Transitions = NewCounterVec("multicluster_cluster_transitions_total",
		"Lifecycle transitions of clusters, by the state left and the state entered.",
		"from", "to")

	// Engagements counts attempts to engage a cluster with every subscriber.
	Engagements = NewCounterVec("multicluster_cluster_engagements_total",
		"Attempts to engage a cluster with every controller and runnable, by result (success, failure).",
		"result")

	// Disengagements counts engagements that ended, by why.
	Disengagements = NewCounterVec("multicluster_cluster_disengagements_total",
		"Engagements that ended, by reason (removed, replaced, unhealthy, stopped, provider-stopped, not-owned).",
		"reason")

	// Healthy is 1 for a cluster that answered its last probe, 0 otherwise.
	Healthy = NewGaugeVec("multicluster_cluster_healthy",
		"1 if the cluster answered its last health probe, 0 if not (series capped, see the manager's health options).",
		"cluster")

	// Engaged is 1 while the cluster is engaged on this replica, 0 while it
	// runs here otherwise (admitted, starting, disconnected): averaged over
	// a range, the fraction of the time it was available.
	Engaged = NewGaugeVec("multicluster_cluster_engaged",
		"1 while the cluster is engaged on this replica, 0 while it runs here but is not (series capped and released as multicluster_cluster_healthy).",
		"cluster")

	// LastTransition is the time of the cluster's last lifecycle transition.
	LastTransition = NewGaugeVec("multicluster_cluster_last_transition_timestamp_seconds",
		"Unix time of the cluster's last lifecycle transition on this replica (series capped and released as multicluster_cluster_healthy).",
		"cluster")

	// DisconnectedSeconds adds up the time clusters spent disconnected.
	DisconnectedSeconds = NewCounterVec("multicluster_cluster_disconnected_seconds_total",
		"Seconds the cluster spent disconnected on this replica, added when it leaves the disconnected state (series capped and released as multicluster_cluster_healthy).",
		"cluster")

	// Probes counts health probes by cluster and result.
	Probes = NewCounterVec("multicluster_cluster_probes_total",
		"Health probes of the cluster by result (ok, failed, unauthorized) (series capped and released as multicluster_cluster_healthy).",
		"cluster", "result")

	// WatchSilences counts the times every watch of an engaged cluster was
	// found silent for longer than the bound while its API server answered.
	WatchSilences = NewCounterVec("multicluster_cluster_watch_silences_total",
		"Times every watch of the engaged cluster was found silent (no event, no bookmark) for longer than the health options' WatchSilence while /readyz answered (series capped and released as multicluster_cluster_healthy).",
		"cluster")

	// WatchSilentSeconds is how long every watch of a cluster found silent
	// had been so at its last probe.
	WatchSilentSeconds = NewGaugeVec("multicluster_cluster_watch_silent_seconds",
		"Seconds every watch of the engaged cluster had received nothing at its last probe, while longer than the health options' WatchSilence; 0 once its watches deliver again (no series before a first silence; capped and released as multicluster_cluster_healthy).",
		"cluster")

	// Paused is 1 for a cluster that is paused.
	Paused = NewGaugeVec("multicluster_cluster_paused",
		"1 while the cluster is paused: engaged, but its requests held (no series while it is not).",
		"cluster")

	// ProbeDuration observes health probes.
	ProbeDuration = register(prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "multicluster_cluster_probe_duration_seconds",
		Help:    "Duration of cluster health probes.",
		Buckets: []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
	}))

	// DroppedRequests counts requests and events dropped by the library.
	DroppedRequests = NewCounterVec("multicluster_dropped_requests_total",
		"Requests and events the library dropped, by controller and reason.",
		"controller", "reason")

	// WatchFailures counts watches that could not be set up or synced in a cluster.
	WatchFailures = NewCounterVec("multicluster_watch_failures_total",
		"Watches of a controller that failed to start or sync in a cluster, by controller (retried with backoff).",
		"controller")

	// WatchSyncFailures counts watches that did not sync in a cluster, by
	// type: a list that keeps failing shows here within seconds.
	WatchSyncFailures = NewCounterVec("multicluster_watch_sync_failures_total",
		"Watches that did not sync in a cluster, by controller, cluster and type (the first 1000 clusters of each controller; the others share the cluster label <other>).",
		"controller", "cluster", "type")

	// DrainOverruns counts fences released while reconciles against their
	// cluster were still running after the drain timeout.
	DrainOverruns = register(prometheus.NewCounter(prometheus.CounterOpts{
		Name: "multicluster_drain_overruns_total",
		Help: "Fences released although reconciles against the cluster outlived the drain timeout.",
	}))

	// Reconciles counts reconciles per cluster when enabled (cardinality-capped).
	Reconciles = NewCounterVec("multicluster_reconcile_total",
		"Reconciles by controller, cluster and result (success, error, requeue); enabled per controller, series capped.",
		"controller", "cluster", "result")
)

// NewCounterVec returns a counter vector registered with controller-runtime's
// registry, so that the manager's metrics endpoint serves it: a metric is
// declared and registered in one place. It panics on a name already
// registered, as package initialisation should.
func NewCounterVec(name, help string, labels ...string) *prometheus.CounterVec {
	return register(prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels))
}

// NewGaugeVec is NewCounterVec for a gauge vector.
func NewGaugeVec(name, help string, labels ...string) *prometheus.GaugeVec {
	return register(prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels))
}

func register[C prometheus.Collector](c C) C {
	metrics.Registry.MustRegister(c)
	return c
}

// OtherClusters is the cluster label of series for clusters beyond a cap.
const OtherClusters = "<other>"

// MaxWatchSyncSeries caps the clusters with series of their own in
// WatchSyncFailures, per controller.
const MaxWatchSyncSeries = 1000

// SeriesCap admits a bounded number of label values for per-cluster series:
// beyond the cap, new clusters get no series of their own, so a fleet of
// thousands cannot blow up the metrics endpoint.
type SeriesCap struct {
	Max int

	mu   sync.Mutex
	have map[string]struct{}
}

// Admit reports whether key may have a series, admitting it if there is room.
func (c *SeriesCap) Admit(key string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.have[key]; ok {
		return true
	}
	if len(c.have) >= c.Max {
		return false
	}
	if c.have == nil {
		c.have = map[string]struct{}{}
	}
	c.have[key] = struct{}{}
	return true
}

// Release forgets key, making room for another.
func (c *SeriesCap) Release(key string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.have[key]
	delete(c.have, key)
	return ok
}
