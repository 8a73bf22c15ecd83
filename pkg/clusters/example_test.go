package clusters_test

import (
	"fmt"
	"time"

	"k8s.io/client-go/rest"

	"github.com/mcruntime/multicluster-runtime/pkg/clusters"
)

// NewCluster builds a provider's cluster with the library's defaults: lazy,
// shared discovery, no client-side rate limit, and every request bounded.
// Options change the bound and set a rate limit.
func ExampleNewCluster() {
	build := func(cfg *rest.Config) error {
		cl, err := clusters.NewCluster(cfg,
			clusters.WithRequestTimeout(5*time.Second),
			clusters.WithClientRateLimits(100, 200),
		)
		if err != nil {
			return err
		}
		_ = cl // add it to the provider's Clusters, which starts and engages it
		return nil
	}
	_ = build
	fmt.Println(clusters.DefaultRequestTimeout)
	// Output: 15s
}

// Cluster names derived from input are checked before use.
func ExampleValidateClusterName() {
	for _, name := range []string{"eu-west-1", "prod\nINFO forged", ""} {
		fmt.Println(clusters.ValidateClusterName(name))
	}
	// Output:
	// <nil>
	// invalid cluster name: "prod\nINFO forged" contains the control or formatting character U+000A
	// invalid cluster name: empty
}

// Kubeconfigs read from a cluster may not run commands or read local files,
// unless the operator allows a command by name.
func ExampleRESTConfigFromUntrustedKubeconfig() {
	kubeconfig := []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://10.0.0.1:6443"}}]
users: [{name: u, user: {exec: {apiVersion: client.authentication.k8s.io/v1, command: cloud-auth, interactiveMode: Never}}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`)
	_, err := clusters.RESTConfigFromUntrustedKubeconfig(kubeconfig, clusters.KubeconfigPolicy{})
	fmt.Println(err)
	cfg, err := clusters.RESTConfigFromUntrustedKubeconfig(kubeconfig, clusters.KubeconfigPolicy{AllowedExecCommands: []string{"cloud-auth"}})
	fmt.Println(cfg.Host, err)
	// Output:
	// kubeconfig refused: context "x" uses [user exec plugin (its command is not among the allowed exec commands)]
	// https://10.0.0.1:6443 <nil>
}
