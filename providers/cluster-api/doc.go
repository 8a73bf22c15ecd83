// Package capi is a provider that engages the workload clusters of Cluster
// API (cluster.x-k8s.io): one member per Cluster object on the host (the
// management cluster), named "<namespace>/<name>", reached with the
// kubeconfig that Cluster API keeps in the Secret "<name>-kubeconfig" (key
// "value") beside it.
//
// A Cluster is engaged once Options.IsReady says so (by default when its
// control plane is initialised) and Options.Predicates accept it. It is
// disengaged when it is deleted or being deleted, stops being ready or
// selected, or its Secret disappears. A change of the Secret's content alone
// (credential rotation, the Cluster object unchanged) re-engages the cluster
// with the new credentials; the new cluster replaces the old one once it is
// engaged. A missing or unusable Secret is reported with a Warning Event on
// the Cluster and retried with backoff; other Clusters are not affected.
// Events and logs never carry the Secret's content.
//
// The kubeconfig Secrets are untrusted input: whoever can write one must not
// run code in the controller or make it send a local file. They are read
// with clusters.RESTConfigFromUntrustedKubeconfig: exec plugins,
// auth-provider plugins and local file references are refused unless the
// exec command is listed in Options.AllowedExecCommands.
//
// The provider watches v1beta2 Clusters by default; set Options.ObjectToWatch
// to &v1beta1.Cluster{} (sigs.k8s.io/cluster-api/api/core/v1beta1) for
// installations that do not serve v1beta2.
//
// # RBAC
//
// The provider reads, on the host, with the manager's identity:
//
//   - cluster.x-k8s.io clusters: get, list, watch: cluster-wide, or only in
//     Options.Namespaces (a Role per namespace is then enough);
//   - core secrets: get, list, watch, in the same namespaces. RBAC cannot
//     narrow list and watch to names, so grant it only where Clusters live;
//     the provider asks the API server only for Secrets labelled
//     cluster.x-k8s.io/cluster-name (Cluster API labels the kubeconfig Secrets
//     it writes), keeps no others in memory, and reads only
//     "<cluster>-kubeconfig" among them;
//   - events.k8s.io events: create, patch (the Events on Clusters).
//
// For example:
//
//	rules:
//	- apiGroups: ["cluster.x-k8s.io"]
//	  resources: ["clusters"]
//	  verbs: ["get", "list", "watch"]
//	- apiGroups: [""]
//	  resources: ["secrets"]
//	  verbs: ["get", "list", "watch"]
//	- apiGroups: ["events.k8s.io"]
//	  resources: ["events"]
//	  verbs: ["create", "patch"]
//
// What the controllers may do in each workload cluster is decided by the
// identity in that cluster's kubeconfig.
package capi
