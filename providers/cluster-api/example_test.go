package capi_test

import (
	"context"
	"fmt"

	"k8s.io/client-go/rest"
	//lint:ignore SA1019 v1beta1 is deprecated upstream, and supported here for installations that serve nothing newer.
	clusterv1beta1 "sigs.k8s.io/cluster-api/api/core/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	mcmanager "github.com/mcruntime/multicluster-runtime/pkg/manager"
	capi "github.com/mcruntime/multicluster-runtime/providers/cluster-api"
)

// New engages the Cluster API Clusters of the host once their control plane
// is initialised; the Multi-Cluster Manager runs the provider and
// SetupWithManager adds the controller that reads Clusters and their
// kubeconfig Secrets.
func ExampleNew() {
	provider := capi.New(capi.Options{
		// Only Clusters labelled for this fleet.
		Predicates: []predicate.Predicate{predicate.NewPredicateFuncs(func(o client.Object) bool {
			return o.GetLabels()["example.com/fleet"] == "prod"
		})},
	})
	fmt.Println(len(provider.ClusterNames()), "<cluster>"+capi.KubeconfigSecretSuffix, capi.KubeconfigSecretKey)

	setup := func(ctx context.Context, hostConfig *rest.Config) (mcmanager.Manager, error) {
		mgr, err := mcmanager.New(hostConfig, provider, mcmanager.Options{})
		if err != nil {
			return nil, err
		}
		return mgr, provider.SetupWithManager(mgr)
	}
	_ = setup
	// Output: 0 <cluster>-kubeconfig value
}

// An installation of Cluster API that serves only v1beta1.
func ExampleNew_v1beta1() {
	provider := capi.New(capi.Options{ObjectToWatch: &clusterv1beta1.Cluster{}})
	_ = provider
}
