// Package security holds the code of the book's page on security
// (docs/advanced/security.md), compiled with the module so that every
// snippet builds against the current API. Nothing here is meant to be
// imported.
package security

import (
	"fmt"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	pkgclusters "github.com/mcruntime/multicluster-runtime/pkg/clusters"
	"github.com/mcruntime/multicluster-runtime/providers/kubeconfig"
)

// KubeconfigProvider allows one cloud credential helper in the kubeconfigs
// of Secrets, and nothing else that runs a command or reads a file.
func KubeconfigProvider() *kubeconfig.Provider {
	// snippet:security-kubeconfig-policy
	return kubeconfig.New(kubeconfig.Options{
		KubeconfigPolicy: pkgclusters.KubeconfigPolicy{
			// Compared with the command exactly as the kubeconfig writes it.
			AllowedExecCommands: []string{"/usr/local/bin/cloud-auth"},
			MaxSize:             256 << 10, // default 1 MiB
		},
	})
	// end-snippet
}

// FromSecret parses a kubeconfig read from a cluster, as a custom provider
// should.
func FromSecret(namespace, name string, data []byte) (*rest.Config, error) {
	// snippet:security-untrusted
	cfg, err := pkgclusters.RESTConfigFromUntrustedKubeconfig(data, pkgclusters.KubeconfigPolicy{})
	if err != nil {
		// errors.Is(err, pkgclusters.ErrKubeconfigRefused) for an exec or
		// auth-provider plugin, a local file reference or a kubeconfig too
		// large: the error names the field, never its value.
		return nil, fmt.Errorf("secret %s/%s: %w", namespace, name, err)
	}
	return cfg, nil
	// end-snippet
}

// Build builds a member cluster with a shorter request bound and a client
// rate limit.
func Build(cfg *rest.Config) (cluster.Cluster, error) {
	// snippet:security-new-cluster
	return pkgclusters.NewCluster(cfg,
		pkgclusters.WithRequestTimeout(5*time.Second), // default 15s (DefaultRequestTimeout)
		pkgclusters.WithClientRateLimits(50, 100),     // default: no client-side limit
	)
	// end-snippet
}
