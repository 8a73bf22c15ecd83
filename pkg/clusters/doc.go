// Package clusters holds what providers build on. Members publishes desired
// members (a name, a content hash and how to build the cluster) to the
// Multi-Cluster Manager's fleet engine (pkg/fleet), which owns their
// lifecycle; NewCluster builds a cluster with the defaults providers need
// (building lives in pkg/fleet/build, below the engine; the names here
// forward to it).
// Clusters is for providers that build their clusters themselves: handed the
// manager, it publishes each as a pre-built member (the engine starts, syncs,
// engages, probes and tears it down) and answers Get with what the engine
// engaged; handed another multicluster.Aware (a test's), it does the same
// with an engine of that Aware's own (fleet.DoorFor). A Clusters binds the
// Aware of its first call.
//
// Members builds each cluster with the manager's settings hook
// (SettingsFunc, given by mcmanager.WithClusterSettings and carried in the
// build's context), which sees the cluster's name, its source object
// (SetSource) and a copy of its config without credentials, and may change
// its client settings only; SetPaused publishes a pause from the source
// without rebuilding.
//
// A provider only decides which clusters exist; Clusters does the rest:
//
//	type Provider struct {
//		clusters.Clusters[cluster.Cluster]
//	}
//
//	// when the inventory says a cluster appeared or changed:
//	err := p.AddOrReplace(ctx, name, cl, aware)
//	// when it is gone:
//	p.Remove(name)
package clusters
