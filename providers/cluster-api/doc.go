// Package capi is a provider that engages the workload clusters of Cluster
// API (cluster.x-k8s.io): one cluster per Cluster object on the host (the
// management cluster), named "<namespace>/<name>", reached with the
// kubeconfig that Cluster API keeps in the Secret "<name>-kubeconfig" (key
// "value") beside it. v1beta2 Clusters are read by default; set
// Options.ObjectToWatch to &v1beta1.Cluster{} for installations that do not
// serve v1beta2.
//
// The provider is built on the inventory kit (pkg/inventory), which reads
// the Clusters and their Secrets through a cache of its own, publishes to
// the fleet engine and records Events; the provider adds what a Cluster asks
// for. A Cluster is engaged once Options.IsReady says so (by default when its
// control plane is initialised) and Options.Predicates accept it, and
// disengaged when it is deleted or being deleted, stops being ready or
// selected, or its Secret disappears. A new token alone in the Secret (the
// same server and CA) is applied to the running cluster in place; any other
// change of the Secret's content re-engages the cluster with it. A
// missing or unusable Secret is reported with a Warning Event on the Cluster
// and retried with backoff; other Clusters are not affected. Events and logs
// never carry the Secret's content.
//
// The kubeconfig Secrets are untrusted input, read with
// clusters.RESTConfigFromUntrustedKubeconfig: exec plugins, auth-provider
// plugins and local file references are refused unless the exec command is
// listed in Options.AllowedExecCommands.
//
// # RBAC
//
// On the host, with the manager's identity, cluster-wide or only in
// Options.Namespaces (a Role per namespace is then enough):
//
//   - cluster.x-k8s.io clusters: get, list, watch;
//   - core secrets: get, list, watch. RBAC cannot narrow list and watch to
//     names, so grant it only where Clusters live; the provider asks only for
//     Secrets labelled cluster.x-k8s.io/cluster-name (as Cluster API labels
//     the kubeconfig Secrets it writes) and reads "<cluster>-kubeconfig";
//   - events.k8s.io events: create, patch.
//
// What the controllers may do in each workload cluster is decided by the
// identity in that cluster's kubeconfig.
package capi
