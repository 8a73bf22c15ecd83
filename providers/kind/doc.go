// Package kind is a provider that engages the local kind clusters
// (https://kind.sigs.k8s.io): for development, tests and the quickstart.
//
// Every Options.Interval the provider lists the clusters through a Lister
// (by default the kind Go library, which asks the container runtime) and
// reads each one's kubeconfig. A cluster whose name starts with
// Options.Prefix is engaged under its kind name; a cluster that disappears is
// disengaged; a cluster recreated under the same name (its kubeconfig, with
// new certificates or a new port, changes) is replaced. A failed listing
// keeps the fleet as it was and is retried at the next interval; a cluster
// whose kubeconfig cannot be read or used is logged and skipped, without
// affecting the others.
//
// The kubeconfigs come from the local machine's kind and are trusted like
// the user's own kubeconfig.
package kind
