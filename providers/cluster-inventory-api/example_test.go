package clusterinventoryapi_test

import (
	"context"
	"fmt"

	"k8s.io/client-go/rest"
	clientcmdv1 "k8s.io/client-go/tools/clientcmd/api/v1"

	mcmanager "github.com/mcruntime/multicluster-runtime/pkg/manager"
	clusterinventoryapi "github.com/mcruntime/multicluster-runtime/providers/cluster-inventory-api"
)

// New takes the access providers the controller may run; a ClusterProfile
// selects one by name and the Multi-Cluster Manager runs the provider, whose
// controller SetupWithManager adds.
func ExampleNew() {
	provider, err := clusterinventoryapi.New(clusterinventoryapi.Options{
		AccessProviders: []clusterinventoryapi.AccessProvider{{
			Name: "serviceaccount-token",
			ExecConfig: clientcmdv1.ExecConfig{
				APIVersion:         "client.authentication.k8s.io/v1",
				Command:            "/usr/local/bin/serviceaccount-token-plugin",
				Args:               []string{"-kubeconfig=/etc/fleet/operator.kubeconfig", "-service-account=fleet-controller"},
				ProvideClusterInfo: true,
			},
		}},
		// Name clusters after their KEP-2149 cluster ID rather than
		// "<namespace>/<name>".
		ClusterName: clusterinventoryapi.ClusterID,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(len(provider.ClusterNames()))

	setup := func(ctx context.Context, hubConfig *rest.Config) (mcmanager.Manager, error) {
		mgr, err := mcmanager.New(hubConfig, provider, mcmanager.Options{})
		if err != nil {
			return nil, err
		}
		return mgr, provider.SetupWithManagerContext(ctx, mgr)
	}
	_ = setup
	// Output: 0
}
