// Package manager provides the Multi-Cluster Manager. Import it as mcmanager.
//
// The Multi-Cluster Manager wraps a controller-runtime manager for the host
// cluster and keeps the set of engaged clusters. Providers engage clusters
// through it; it passes every engagement on to the multicluster.Aware runnables
// added to it (controllers among them), and replays the current set to those
// added late, so no cluster is lost to the order of registration.
package manager
