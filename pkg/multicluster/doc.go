// Package multicluster holds the contracts between the Multi-Cluster Manager,
// the components that work per cluster, and the Providers that discover
// clusters.
//
// A Provider decides which clusters exist and how to reach them. When a cluster
// becomes available it calls Aware.Engage with a context that lives as long as
// the cluster is part of the fleet; cancelling that context disengages it. The
// Multi-Cluster Manager is Aware, and passes every engagement on to the
// controllers, sources and runnables that subscribed to it. Built-in providers
// publish desired clusters to the manager's fleet engine instead
// (fleet.Publisher, through pkg/clusters.Members), which builds, starts and
// engages them the same way.
package multicluster
