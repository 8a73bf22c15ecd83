package manager_test

import (
	"context"
	"os"

	"sigs.k8s.io/controller-runtime/pkg/client/config"
	"sigs.k8s.io/controller-runtime/pkg/manager/signals"

	"github.com/mcruntime/multicluster-runtime/pkg/clusters"
	mcmanager "github.com/mcruntime/multicluster-runtime/pkg/manager"
	clustersprovider "github.com/mcruntime/multicluster-runtime/providers/clusters"
)

// A Multi-Cluster Manager runs against a host cluster and engages the clusters
// its provider discovers. Here the provider is filled from code.
func ExampleNew() {
	provider := clustersprovider.New()
	mgr, err := mcmanager.New(config.GetConfigOrDie(), provider, mcmanager.Options{})
	if err != nil {
		os.Exit(1)
	}
	// Controllers are added with mcbuilder.ControllerManagedBy(mgr); then:
	if err := mgr.Start(signals.SetupSignalHandler()); err != nil {
		os.Exit(1)
	}
}

// Inside a reconciler, the request names its cluster; the manager returns it.
func ExampleManager_GetCluster() {
	var mgr mcmanager.Manager // from mcmanager.New
	ctx := context.Background()
	cl, err := mgr.GetCluster(ctx, "cluster-a")
	if err != nil {
		return // wraps multicluster.ErrClusterNotFound if cluster-a left the fleet
	}
	_ = cl.GetClient() // reads and writes cluster-a
}

// Cluster options for every member the fleet engine builds, whichever
// provider publishes it: here, member caches keep the managed fields they
// otherwise drop.
func ExampleWithClusterOptions() {
	provider := clustersprovider.New()
	mgr, err := mcmanager.New(config.GetConfigOrDie(), provider, mcmanager.Options{},
		mcmanager.WithClusterOptions(clusters.KeepManagedFields()),
	)
	if err != nil {
		os.Exit(1)
	}
	_ = mgr
}
