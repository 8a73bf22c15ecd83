package multi_test

import (
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	mcmanager "github.com/mcruntime/multicluster-runtime/pkg/manager"
	"github.com/mcruntime/multicluster-runtime/providers/multi"
	"github.com/mcruntime/multicluster-runtime/providers/namespace"
)

// Two API servers' namespaces form one fleet: namespace "x" of the hub is
// cluster "hub#x", of the edge server "edge#x".
func ExampleNew() {
	hubCfg := ctrl.GetConfigOrDie()
	edgeCfg := rest.CopyConfig(hubCfg) // in practice: another API server's config
	edgeCfg.Host = "https://edge.example.com:6443"

	provider := multi.New(multi.Options{Separator: "#"})
	for prefix, cfg := range map[string]*rest.Config{"hub": hubCfg, "edge": edgeCfg} {
		cl, err := cluster.New(cfg)
		if err != nil {
			panic(err)
		}
		if err := provider.AddProvider(prefix, namespace.New(cl)); err != nil {
			panic(err)
		}
	}
	mgr, err := mcmanager.New(hubCfg, provider, mcmanager.Options{})
	if err != nil {
		panic(err)
	}
	// Add controllers with mcbuilder.ControllerManagedBy(mgr); providers may
	// be added (provider.AddProvider) and removed (provider.RemoveProvider)
	// while it runs.
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		panic(err)
	}
}
