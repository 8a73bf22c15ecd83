package onboard_test

import (
	"context"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mcruntime/multicluster-runtime/providers/kubeconfig/onboard"
)

// Cluster adds a member to the fleet: a ServiceAccount with read access to
// ConfigMaps in the member, and its kubeconfig Secret on the host.
func ExampleCluster() {
	add := func(ctx context.Context, memberConfig *rest.Config, host client.Client) error {
		_, err := onboard.Cluster(ctx, memberConfig, host, onboard.Options{
			ClusterName: "eu-west-1",
			Namespace:   "fleet-system",
			Rules: []rbacv1.PolicyRule{{
				APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"},
			}},
		})
		return err
	}
	_ = add
}
