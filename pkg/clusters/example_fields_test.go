package clusters_test

import (
	"fmt"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"

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

// A cluster built by NewCluster asks its API server for no compressed
// responses, so that its watches hold no gzip reader; WithResponseCompression
// asks again, for a member behind a slow or metered link.
func ExampleWithResponseCompression() {
	cl, err := clusters.NewCluster(&rest.Config{Host: "https://member.example.com:6443"}, clusters.WithResponseCompression())
	if err != nil {
		panic(err)
	}
	fmt.Println(cl.GetConfig().DisableCompression)
	// Output: false
}

// TransformInternStrings is installed by NewCluster with WithInternedStrings;
// a cache that NewCluster does not build can install it itself, here after controller-runtime's
// transform that drops managed fields.
func ExampleTransformInternStrings() {
	opts := cache.Options{
		DefaultTransform: func(in any) (any, error) {
			out, err := cache.TransformStripManagedFields()(in)
			if err != nil {
				return nil, err
			}
			return clusters.TransformInternStrings()(out)
		},
	}
	_ = opts // cluster.New(cfg, func(o *cluster.Options) { o.Cache = opts })
}
