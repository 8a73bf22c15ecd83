package source

import (
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
	mcreconcile "github.com/mcruntime/multicluster-runtime/pkg/reconcile"
)

// Source is a multi-cluster source of events of any object, for
// mcreconcile.Request.
type Source = TypedSource[client.Object, mcreconcile.Request]

// TypedSource is a multi-cluster source of events of an object type for a
// request type, in upstream's shape: object names the type watched and is
// not used by the method, so a TypedSource of any object type is also a
// TypedSource[client.Object, request], what controllers take.
type TypedSource[object client.Object, request comparable] interface {
	// ForCluster returns the source to start for the cluster and true, or
	// nil and false if this source does not watch it (its cluster filter
	// refused the cluster). The returned source is started with a context
	// that ends when the cluster disengages.
	ForCluster(name multicluster.ClusterName, cl cluster.Cluster) (source.TypedSource[request], bool, error)
}

// Func adapts a function to Source.
type Func = TypedFunc[mcreconcile.Request]

// TypedFunc adapts a function to TypedSource: a nil source it returns
// without an error means the cluster is not watched.
type TypedFunc[request comparable] func(name multicluster.ClusterName, cl cluster.Cluster) (source.TypedSource[request], error)

// ForCluster calls f.
func (f TypedFunc[request]) ForCluster(name multicluster.ClusterName, cl cluster.Cluster) (source.TypedSource[request], bool, error) {
	src, err := f(name, cl)
	return src, err == nil && src != nil, err
}

var _ Source = Func(nil)

// ClusterFilter decides whether a source watches a cluster. The host cluster
// is offered under the name "".
type ClusterFilter func(name multicluster.ClusterName, cl cluster.Cluster) bool

// ClusterFilterFunc is ClusterFilter under the upstream design's name.
type ClusterFilterFunc = ClusterFilter

// EngageOptions decide which clusters a source watches.
type EngageOptions struct {
	// LocalCluster makes the source watch the host cluster. Default false.
	LocalCluster bool
	// ProviderClusters makes the source watch the clusters the provider engages.
	// Default false; the builder turns it on when the manager has a provider.
	ProviderClusters bool
	// Filter, if set, further restricts the clusters watched.
	Filter ClusterFilter
}

// Accepts reports whether a source with these options watches the cluster.
func (o EngageOptions) Accepts(name multicluster.ClusterName, cl cluster.Cluster) bool {
	if name == "" && !o.LocalCluster || name != "" && !o.ProviderClusters {
		return false
	}
	return o.Filter == nil || o.Filter(name, cl)
}

// WithEngageOptions restricts src to the clusters opts accept.
func WithEngageOptions[request comparable](src TypedSource[client.Object, request], opts EngageOptions) TypedSource[client.Object, request] {
	return &filtered[request]{inner: src, opts: opts}
}

type filtered[request comparable] struct {
	inner TypedSource[client.Object, request]
	opts  EngageOptions
}

func (f *filtered[request]) ForCluster(name multicluster.ClusterName, cl cluster.Cluster) (source.TypedSource[request], bool, error) {
	if !f.opts.Accepts(name, cl) {
		return nil, false, nil
	}
	return f.inner.ForCluster(name, cl)
}

func (f *filtered[request]) String() string { return fmt.Sprint(f.inner) }
