// Package clusterinventoryapi provides a multicluster.Provider for any
// cluster inventory that exposes SIG-Multicluster's ClusterProfile API
// (multicluster.x-k8s.io/v1alpha1, KEP-4322): Open Cluster Management, Fleet,
// Karmada, Clusternet, and others.
//
// The provider is built on the inventory kit (pkg/inventory), which reads
// ClusterProfiles on the hub (the manager's host cluster) through a cache of
// its own, runs the host controller on every replica, publishes clusters to
// the fleet engine, gives each name one source, records Events and tells
// readiness when every profile present at start-up has been considered. The
// provider adds what a profile asks for: its name, whether it is ready, and
// its rest.Config, from an access provider (package credentials):
//
//	aps, err := clusterinventoryapi.LoadAccessProviders("/etc/fleet/access-providers.yaml")
//	...
//	provider, err := clusterinventoryapi.New(clusterinventoryapi.Options{AccessProviders: aps})
//	mgr, err := mcmanager.New(hubConfig, provider, mcmanager.Options{})
//	err = provider.SetupWithManagerContext(ctx, mgr)
//
// # Readiness
//
// A profile is ready when its ControlPlaneHealthy condition is True
// (Options.IsReady replaces the check). A profile that stops being ready, or
// is deleted, disengages its cluster; one that becomes ready again engages a
// new cluster.
//
// # Credentials (KEP-5339)
//
// A profile carries no credentials: it lists access providers, each with a
// kubeconfig cluster entry, and the first of Options.AccessProviders that it
// lists authenticates to that entry through its exec plugin. The command
// always comes from the controller's configuration, and the profile does
// not decide where the credentials go (Options.ProfilePolicy and each access
// provider's AllowedServers do): see package credentials, whose names this
// package re-exports.
//
// # Names and ClusterSets (KEP-2149)
//
// A cluster is named "<namespace>/<name>" after its profile (NamespacedName).
// With Options.ClusterName set to ClusterID it is named after the profile's
// cluster.clusterset.k8s.io property instead; a profile without it, or whose
// ID is not one KEP-2149 allows (an RFC 1123 DNS subdomain of at most 128
// characters: no spaces, slashes or U+FFFD, which the API server stores for
// bytes that are not UTF-8), is reported, and a profile claiming an ID
// another profile holds waits until that one lets go. Provider.ClusterSet
// returns the clusterset.k8s.io property of an engaged cluster's profile,
// and Provider.ProfileOf the profile a cluster comes from.
//
// # Failures
//
// A profile that names no configured access provider, an invalid or refused
// cluster entry, an invalid cluster name or a cluster ID another profile
// holds can only be fixed by changing the profile: it is logged and recorded
// as a Warning Event once per change of the profile's generation, and not
// retried. A plugin that fails (non-zero exit, output that is not an
// ExecCredential) or a server that does not answer is logged and recorded as
// a Warning Event on the profile, then retried with backoff; a cluster
// already running keeps its last good configuration meanwhile. Each cluster
// is engaged in its own goroutine: one broken profile never holds up the
// others. A change to a profile's access information (compared by a hash of
// the cluster entry and the access provider's configuration) re-creates and
// re-engages its cluster; other status changes (conditions, properties) do
// not. A plugin that hangs holds up its own cluster, and the provider's
// shutdown until it exits; the other clusters are not affected.
//
// # Permissions
//
// On the hub the provider needs get, list and watch on clusterprofiles
// (multicluster.x-k8s.io), in Options.Namespace or cluster-wide, and create,
// patch and update on events.k8s.io Events. The CRD is in
// providers/cluster-inventory-api/config/crd; the API types are in the
// apis/v1alpha1 package.
package clusterinventoryapi
