// Package clusters holds what providers build on. Members publishes desired
// members (a name, a content hash and how to build the cluster) to the
// Multi-Cluster Manager's fleet engine (pkg/fleet), which owns their
// lifecycle; NewCluster builds a cluster with the defaults providers need.
// Clusters is for providers that hold pre-built clusters and engage them
// themselves: it starts each cluster with its own context, apply every registered field index
// before its cache starts, wait (bounded, by notification) for the cache, then
// engage it; tear it down when removed or replaced, never touching a
// replacement.
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
