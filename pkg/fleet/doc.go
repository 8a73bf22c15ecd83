// Package fleet is the engine that owns the lifecycle of every cluster of the
// fleet. The Multi-Cluster Manager runs one; everything that works per cluster
// (controllers, sources, users' multicluster.Aware runnables, GetCluster,
// readiness, metrics, sharding) reads or subscribes to its one record per
// cluster name.
//
// # States
//
//	wanted → admitted → starting → engaged ⇄ disconnected → gone
//
// A provider publishes a cluster (wanted); this replica admits it when it may
// run it (always, unless sharding assigns it elsewhere); the engine builds and
// starts it and waits for its cache (starting); then engages it with every
// subscriber, all or nothing (engaged). Health probes that fail
// HealthOptions.FailureThreshold times in a row disconnect it: every
// subscriber lets go of it, GetCluster answers with an error matching both
// multicluster.ErrClusterNotConnected and multicluster.ErrClusterNotFound, and
// it is probed with capped exponential backoff until it answers, then built
// (or engaged) again, so that its initial list re-enqueues every object. A
// cluster that cannot be started is disconnected too, and retried. When its
// provider removes it, it is gone. Every transition is logged with the
// cluster's name and counted in multicluster_cluster_transitions_total;
// multicluster_clusters{state} counts the clusters in each state.
//
// # Two front doors, one way in
//
// Built-in providers publish desired members (SetMember: a name, a content
// hash and how to build the cluster); the engine does the rest, and replaces
// the cluster when the hash changes. Providers written as the seeds describe
// start their clusters themselves and call Engage (through the manager).
// Inside the engine such an adopted cluster is a member with a pre-built
// cluster: admitted, fenced, probed, drained, handed off and torn down by the
// same code as every other member; only, the engine cannot rebuild what it
// did not build.
//
// # Draining
//
// Reconciles hold their cluster (Hold) while they run. Before a cluster's
// fence is released (removal, hand-off, fence loss, shutdown), the cluster is
// disengaged, its cache stopped, and its reconciles in flight waited for,
// bounded by Options.DrainTimeout; an overrun is logged and counted.
//
// # Health
//
// One scheduler probes every engaged cluster's /readyz (readable by every
// authenticated identity, so no RBAC is needed) each HealthOptions.Interval,
// on Options.MaxConcurrentProbes workers: no goroutine per cluster. It keeps
// the probes to come in a queue ordered by time, so that a round costs the
// probes due, not the size of the fleet, and takes the engine's lock for
// reading only; a healthy answer does too. A 401 or 403 asks the provider for fresh credentials at once
// (Member.Refresh).
package fleet
