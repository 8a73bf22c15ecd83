// Package kubeconfig provides a multicluster.Provider that discovers clusters
// from kubeconfig-bearing Secrets in a namespace of the host cluster.
//
// Every Secret in Options.Namespace labelled
// "multicluster-runtime.io/kubeconfig=true" or, as in the upstream design,
// "sigs.k8s.io/multicluster-runtime-kubeconfig=true" (Options.KubeconfigSecretLabel
// replaces both) whose data holds a kubeconfig under the key
// "kubeconfig" (Options.KubeconfigSecretKey) becomes a cluster named after the
// Secret. The kubeconfig's current context is used.
//
// The provider is built on the inventory kit (pkg/inventory): it runs as a
// controller on the host cluster's manager, registered by SetupWithManager; the Multi-Cluster Manager runs the provider itself:
//
//	provider := kubeconfig.New(kubeconfig.Options{Namespace: "fleet-system"})
//	mgr, err := mcmanager.New(hostConfig, provider, mcmanager.Options{})
//	...
//	err = provider.SetupWithManager(ctx, mgr)
//
// Behaviour:
//
//   - a new or changed kubeconfig (compared by a hash of its content) creates
//     the cluster, or re-creates and re-engages it; a change to the Secret's
//     metadata alone (annotations, other labels) does nothing; a change of
//     its token, basic credentials or client certificate and key alone (same
//     server, CA and proxy) is applied to the running cluster in place
//     (clusters.Members.Set): no rebuild, no relist, no reconcile again; a
//     token that is a JWT about to expire while the Secret gave no other is
//     recorded once as a ClusterCredentialsExpiring Warning Event;
//   - deleting the Secret or removing the label disengages the cluster;
//   - a missing key or a malformed kubeconfig is logged and recorded as a
//     Warning Event on the Secret once per change of the Secret (only a
//     change can fix it); an unreachable server is recorded as a
//     ClusterEngageFailed Warning Event and retried by the fleet engine with
//     backoff; a cluster already running keeps its last good configuration
//     meanwhile, and other Secrets are never held up;
//   - credentials never appear in logs, events or errors.
//
// Kubeconfigs in Secrets are untrusted: anyone who can write a labelled
// Secret in the namespace chooses them. A kubeconfig that names an exec or
// auth-provider plugin, or any local file (tokenFile, client certificate or
// key files, CA file), is refused with a KubeconfigRefused Warning Event and
// an error log line naming the Secret; nothing is run and no file is read.
// Installations that rely on an exec plugin allow its command by name in
// Options.KubeconfigPolicy.AllowedExecCommands.
//
// Before engaging a cluster the provider checks, with a bounded request, that
// its server answers and accepts the credentials.
//
// On the host the provider needs, in its namespace only: get, list and watch
// on Secrets, and create, patch and update on events.k8s.io Events. It reads
// Secrets through a cache of its own restricted to the namespace and the
// label, so other Secrets are neither fetched nor kept in memory.
//
// To onboard a member cluster, run the kubeconfig-secret command
// (cmd/kubeconfig-secret) or call onboard.Cluster (package
// providers/kubeconfig/onboard): it creates a ServiceAccount in the member
// with the RBAC rules you give it, requests a token for it and writes the
// kubeconfig Secret on the host.
package kubeconfig
