// Command kubebuilder-plugin is an external kubebuilder plugin (kubebuilder
// v4's plugin protocol: one JSON request on stdin, one JSON response on
// stdout) that turns the project go/v4 scaffolds into a multi-cluster one:
//
//	kubebuilder init --plugins go/v4,multicluster/v1-alpha --domain example.com --repo example.com/fleet-operator
//	kubebuilder create api --plugins go/v4,multicluster/v1-alpha --group fleet --version v1 --kind Guestbook
//
// init replaces go/v4's cmd/main.go with one that builds a Multi-Cluster
// Manager (pkg/manager) over the provider chosen by --provider (kubeconfig
// Secrets, kubeconfig files, Cluster API, ClusterProfiles or namespaces,
// wired in cmd/providers.go), and makes go.mod require the library. create api
// replaces go/v4's controller with a multi-cluster reconciler (mcbuilder,
// mcreconcile.Request, mgr.GetCluster), its test with one on every member of a
// fleet of real control planes (pkg/fleettest), and the suite_test.go with one
// that starts that fleet. create webhook wires go/v4's webhook on the host
// cluster. Files it wrote before (an earlier create api) are left as they
// are, so create api can be run again for more kinds.
//
// Kubebuilder finds the plugin in $EXTERNAL_PLUGINS_PATH (default
// ~/.config/kubebuilder/plugins on Linux) under its name and version:
//
//	dir=~/.config/kubebuilder/plugins/multicluster.mcruntime.io/v1-alpha
//	GOBIN=$dir go install github.com/mcruntime/multicluster-runtime/cmd/kubebuilder-plugin@latest
//	mv $dir/kubebuilder-plugin $dir/multicluster.mcruntime.io
//
// Installed at a release, the plugin makes projects require the library at
// that release (init's --library-version says otherwise); --library-dir
// points them at a checkout instead.
//
// docs/getting-started/kubebuilder.md shows the commands and the project
// they produce.
package main
