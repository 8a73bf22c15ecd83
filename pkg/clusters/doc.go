// Package clusters holds Clusters, the cluster lifecycle that Providers embed:
// start each cluster with its own context, apply every registered field index
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
