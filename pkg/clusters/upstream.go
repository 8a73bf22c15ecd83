package clusters

import (
	"context"
	"reflect"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
)

// Index is a field index registered with IndexField: every cluster gets it
// before its cache starts.
type Index struct {
	Object    client.Object
	Field     string
	Extractor client.IndexerFunc
}

// Indexers returns the indexes registered with IndexField, in order.
func (c *Clusters[T]) Indexers() []Index {
	var out []Index
	c.indexes.Range(func(obj client.Object, field string, extract client.IndexerFunc) {
		out = append(out, Index{Object: obj, Field: field, Extractor: extract})
	})
	return out
}

// GetTyped is Get with the cluster's concrete type: the named cluster, or an
// error wrapping multicluster.ErrClusterNotFound.
func (c *Clusters[T]) GetTyped(_ context.Context, name multicluster.ClusterName) (T, error) {
	cl, ok := c.Lookup(name)
	if !ok {
		return cl, multicluster.WithCluster(name, multicluster.ErrClusterNotFound)
	}
	return cl, nil
}

// sameCluster reports whether a present cluster a is kept for b: the same
// instance, or equal by eq (the EqualClusters field of Clusters or Registry).
func sameCluster[T cluster.Cluster](eq func(a, b T) bool, a, b T) bool {
	return any(a) == any(b) || (eq != nil && eq(a, b))
}

// EqualClusters reports whether a and b are the same instance, or connect to
// the same API server in the same way: their rest.Configs are equal (host,
// path, credentials, TLS, impersonation, limits; functions in the config,
// such as a transport wrapper, compare by identity). Use it as
// Clusters.EqualClusters or Registry.EqualClusters so that re-adding a
// rebuilt but unchanged cluster does not restart it.
func EqualClusters[T cluster.Cluster](a, b T) bool {
	if any(a) == any(b) {
		return true
	}
	if any(a) == nil || any(b) == nil {
		return false
	}
	return equalConfigs(a.GetConfig(), b.GetConfig())
}

// equalConfigs compares two rest.Configs: values deeply, functions by
// identity (reflect.DeepEqual holds functions equal only when both are nil).
func equalConfigs(a, b *rest.Config) bool {
	if a == nil || b == nil {
		return a == b
	}
	fa, fb := rest.CopyConfig(a), rest.CopyConfig(b)
	funcs := func(x, y any) bool { return reflect.ValueOf(x).Pointer() == reflect.ValueOf(y).Pointer() }
	if !funcs(fa.WrapTransport, fb.WrapTransport) || !funcs(fa.Dial, fb.Dial) || !funcs(fa.Proxy, fb.Proxy) {
		return false
	}
	fa.WrapTransport, fb.WrapTransport = nil, nil
	fa.Dial, fb.Dial = nil, nil
	fa.Proxy, fb.Proxy = nil, nil
	return reflect.DeepEqual(fa, fb)
}
