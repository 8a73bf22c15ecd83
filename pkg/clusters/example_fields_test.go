package clusters_test

import (
	"k8s.io/client-go/rest"

	"github.com/mcruntime/multicluster-runtime/pkg/clusters"
)

// A cluster built by NewCluster caches objects without managed fields and
// kubectl's last applied configuration; KeepManagedFields keeps both, for a
// controller that reads field ownership from its cache.
func ExampleKeepManagedFields() {
	build := func(cfg *rest.Config) error {
		cl, err := clusters.NewCluster(cfg, clusters.KeepManagedFields())
		if err != nil {
			return err
		}
		_ = cl // add it to the provider's Clusters, which starts and engages it
		return nil
	}
	_ = build
}
