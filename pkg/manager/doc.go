// Package manager provides the Multi-Cluster Manager. Import it as mcmanager.
//
// The Multi-Cluster Manager wraps a controller-runtime manager for the host
// cluster and runs the fleet engine (pkg/fleet), which owns the lifecycle of
// every cluster. Providers publish desired members to it (SetMember) or hand
// it clusters they run (Engage); the engine engages every cluster with the
// multicluster.Aware runnables added to the manager (controllers among them),
// and replays the current set to those added late, so no cluster is lost to
// the order of registration.
//
// The manager serves the fleet's status endpoint, /clusters, on its metrics
// listener: each cluster's state, since when, pause, owner, last probe and
// last error (see package status and WithStatusEndpoint).
package manager
