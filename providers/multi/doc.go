// Package multi provides a Provider that composes other providers under name
// prefixes, for fleets drawn from several sources at once (for example local
// kind clusters next to Cluster API clusters).
//
// A cluster named "dev" by the provider registered under prefix "kind" is
// known to the manager as "kind#dev" (the separator is configurable). Get
// routes a name to its provider by the prefix; IndexField reaches every inner
// provider exactly once, including providers added later.
//
// Providers may be added and removed while the manager runs. An inner
// provider that is a multicluster.ProviderRunnable is started by the multi
// provider, with an Aware that prefixes the names of the clusters it engages,
// and stopped when it is removed; removing a provider disengages all of its
// clusters. A provider that is not runnable only serves Get and IndexField:
// clusters it engages by other means are not prefixed.
//
// The multi provider keeps no record of the clusters: its inner providers
// hand them, prefixed, to the fleet engine, which holds them. Started with an
// Aware that is not the manager (a test's tracker, say), it runs an engine of
// its own for that Aware. It is a multicluster.ListingProvider: listed once
// every inner provider registered at start that lists has listed.
package multi
