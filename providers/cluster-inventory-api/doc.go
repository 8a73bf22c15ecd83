// Package clusterinventoryapi provides a multicluster.Provider for any
// cluster inventory that exposes SIG-Multicluster's ClusterProfile API
// (multicluster.x-k8s.io/v1alpha1, KEP-4322): Open Cluster Management, Fleet,
// Karmada, Clusternet, and others.
//
// The provider runs as a controller on the hub (the manager's host cluster)
// that watches ClusterProfiles and engages one cluster per profile that is
// ready:
//
//	aps, err := clusterinventoryapi.LoadAccessProviders("/etc/fleet/access-providers.yaml")
//	...
//	provider, err := clusterinventoryapi.New(clusterinventoryapi.Options{AccessProviders: aps})
//	mgr, err := mcmanager.New(hubConfig, provider, mcmanager.Options{})
//	err = provider.SetupWithManager(ctx, mgr)
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
// A profile carries no credentials. Its status.accessProviders (or the
// deprecated status.credentialProviders) lists access provider names, each
// with a kubeconfig cluster entry: server, CA data, proxy URL, TLS server name
// and extensions. The controller is configured with access providers
// (Options.AccessProviders, or a file in the KEP's format read by
// LoadAccessProviders), each an exec credential plugin. The first configured
// name that the profile lists is used: the rest.Config is the profile's
// cluster entry authenticated by that plugin, through client-go's exec
// credential support, which runs the command, hands it the cluster entry and
// the entry's client.authentication.k8s.io/exec extension in
// KUBERNETES_EXEC_INFO when provideClusterInfo is set, and refreshes
// expiring credentials. The command and its arguments always come from the
// controller's configuration: a profile only selects among them. Nor does a
// profile decide where the credentials go: a cluster entry that references
// a local file (certificate-authority), or sets proxy-url,
// insecure-skip-tls-verify or tls-server-name, is refused unless
// Options.ProfilePolicy allows it, and a server on loopback, link-local, the
// unspecified address or the hub's own address is refused unless the access
// provider's AllowedServers lists it (AllowedServers may also restrict every
// other server). Credentials and the plugin's output are never logged.
//
// A profile may add arguments and environment variables to the command
// through the reserved cluster extensions ExtensionAdditionalArgs and
// ExtensionAdditionalEnvs only as far as the access provider's KEP-5339
// policies allow: ProfileSourcedCLIArgsPolicy (Append, or Ignore by default)
// and ProfileSourcedEnvVarsPolicy (AppendIfNotExists, Replace, or Ignore by
// default). LoadAccessProviders reads the file format of the
// cluster-inventory-api project's library (the -clusterprofile-provider-file
// flag of controllers built on it) and refuses unknown fields.
//
// cmd/serviceaccount-token-plugin is a reference plugin for development and
// tests: it returns ServiceAccount tokens requested with the operator's own
// kubeconfig.
//
// # Names and ClusterSets (KEP-2149)
//
// A cluster is named "<namespace>/<name>" after its profile (NamespacedName).
// With Options.ClusterName set to ClusterID it is named after the profile's
// cluster.clusterset.k8s.io property instead; a profile without it, or whose
// ID is not a valid cluster name (clusters.ValidateClusterName), is
// reported, and a profile claiming an ID another profile holds waits until
// that one lets go. Provider.ClusterSet returns the clusterset.k8s.io
// property of an engaged cluster's profile, and Provider.ProfileOf the
// profile a cluster comes from.
//
// # Failures
//
// A profile that names no configured access provider, an invalid or refused
// cluster entry, an invalid cluster name or a cluster ID another profile
// holds can only be fixed by changing the profile: it is logged and recorded
// as a Warning Event once, and not retried; reconciling it again to the same
// failure reports nothing. A plugin that fails (non-zero exit, output that is
// not an ExecCredential) or a server that does not answer is logged and
// recorded as a Warning Event on the profile, then retried with backoff; a cluster
// already running keeps its last good configuration meanwhile. Each cluster
// is engaged in its own goroutine: one broken profile never holds up the
// others. A change to a profile's access information (compared by a hash of
// the cluster entry and the access provider's configuration) re-creates and
// re-engages its cluster; other status changes (conditions, properties) do
// not.
//
// client-go bounds neither the plugin's run time nor its output: a plugin
// must bound its own work (the reference plugin has -timeout). A plugin that
// hangs holds up its own cluster, and the provider's shutdown until it
// exits; the other clusters are not affected.
//
// # Permissions
//
// On the hub the provider needs get, list and watch on clusterprofiles
// (multicluster.x-k8s.io), in Options.Namespace or cluster-wide, and create,
// patch and update on events.k8s.io Events. The CRD is in
// providers/cluster-inventory-api/config/crd; the API types are in the
// apis/v1alpha1 package.
package clusterinventoryapi
