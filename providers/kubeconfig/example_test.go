package kubeconfig_test

import (
	"context"
	"fmt"

	"k8s.io/client-go/rest"

	mcmanager "github.com/mcruntime/multicluster-runtime/pkg/manager"
	"github.com/mcruntime/multicluster-runtime/providers/kubeconfig"
)

// New watches labelled kubeconfig Secrets in one namespace of the host; the
// Multi-Cluster Manager runs the provider and SetupWithManager adds the
// controller that reads the Secrets.
func ExampleNew() {
	provider := kubeconfig.New(kubeconfig.Options{Namespace: "fleet-system"})
	names := provider.ClusterNames() // nothing engaged before the manager starts
	fmt.Println(len(names), kubeconfig.DefaultKubeconfigSecretLabel+"=true", kubeconfig.DefaultKubeconfigSecretKey)

	setup := func(ctx context.Context, hostConfig *rest.Config) (mcmanager.Manager, error) {
		mgr, err := mcmanager.New(hostConfig, provider, mcmanager.Options{})
		if err != nil {
			return nil, err
		}
		return mgr, provider.SetupWithManager(ctx, mgr)
	}
	_ = setup
	// Output: 0 multicluster-runtime.io/kubeconfig=true kubeconfig
}
