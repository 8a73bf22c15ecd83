// Package credentials turns a ClusterProfile's access provider entry into a
// rest.Config (KEP-5339): which credential plugin the controller runs for a
// profile, what the profile may add to it, and where the credentials may go.
// The ClusterProfile provider (package clusterinventoryapi, which re-exports
// these names) is built on it.
//
// A profile carries no credentials. Its status.accessProviders (or the
// deprecated status.credentialProviders) lists access provider names, each
// with a kubeconfig cluster entry: server, CA data, proxy URL, TLS server name
// and extensions. The controller is configured with access providers (a
// file in the KEP's format read by LoadAccessProviders), each an exec
// credential plugin. SelectAccessProvider picks the first configured name
// that the profile lists; RESTConfig builds the profile's cluster entry
// authenticated by that plugin, through client-go's exec credential support,
// which runs the command, hands it the cluster entry and the entry's
// client.authentication.k8s.io/exec extension in KUBERNETES_EXEC_INFO when
// provideClusterInfo is set, and refreshes expiring credentials. The command
// and its arguments always come from the controller's configuration: a
// profile only selects among them. Nor does a profile decide where the
// credentials go: a cluster entry that references a local file
// (certificate-authority), or sets proxy-url, insecure-skip-tls-verify or
// tls-server-name, is refused unless the ProfilePolicy allows it, and a
// server on loopback, link-local, the unspecified address or the hub's own
// address is refused unless the access provider's AllowedServers lists it
// (AllowedServers may also restrict every other server). Credentials and the
// plugin's output are never logged.
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
// client-go bounds neither the plugin's run time nor its output: a plugin
// must bound its own work. cmd/serviceaccount-token-plugin is a reference
// plugin for development and tests: it returns ServiceAccount tokens
// requested with the operator's own kubeconfig.
package credentials
