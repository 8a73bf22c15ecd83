package build

import (
	"maps"

	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
)

// WithCacheByObject is a cluster option that sets the cache options of one
// type (label and field selectors, namespaces, transform, ...) as
// cache.Options.ByObject does, beside those other options set for other
// types: several WithCacheByObject compose, where assigning ByObject would
// replace the map. What a member caches of a type is what every controller
// and reader of that type sees in that member, as in controller-runtime.
//
//	mcmanager.WithClusterOptions(clusters.WithCacheByObject(&corev1.Secret{}, cache.ByObject{
//		Label: labels.SelectorFromSet(labels.Set{"app": "web"}),
//	}))
func WithCacheByObject(obj client.Object, by cache.ByObject) cluster.Option {
	return func(o *cluster.Options) {
		m := maps.Clone(o.Cache.ByObject) // the map may be another cluster's
		if m == nil {
			m = map[client.Object]cache.ByObject{}
		}
		m[obj] = by
		o.Cache.ByObject = m
	}
}

// WithCacheNamespaces is a cluster option that restricts the cache to
// namespaces (cache.Options.DefaultNamespaces with default settings for
// each). Cluster-scoped types are still cached whole.
func WithCacheNamespaces(namespaces ...string) cluster.Option {
	return func(o *cluster.Options) {
		m := make(map[string]cache.Config, len(namespaces))
		for _, ns := range namespaces {
			m[ns] = cache.Config{}
		}
		o.Cache.DefaultNamespaces = m
	}
}
