package source

import (
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
	mcreconcile "github.com/mcruntime/multicluster-runtime/pkg/reconcile"
)

// Source is a multi-cluster source of events.
type Source = TypedSource[mcreconcile.Request]

// TypedSource is a multi-cluster source of events for a request type.
type TypedSource[request comparable] interface {
	// ForCluster returns the source to start for the cluster, or nil if this
	// source does not watch it. The returned source is started with a context
	// that ends when the cluster disengages.
	ForCluster(name multicluster.ClusterName, cl cluster.Cluster) (source.TypedSource[request], error)
}

// Func adapts a function to Source.
type Func = TypedFunc[mcreconcile.Request]

// TypedFunc adapts a function to TypedSource.
type TypedFunc[request comparable] func(name multicluster.ClusterName, cl cluster.Cluster) (source.TypedSource[request], error)

// ForCluster calls f.
func (f TypedFunc[request]) ForCluster(name multicluster.ClusterName, cl cluster.Cluster) (source.TypedSource[request], error) {
	return f(name, cl)
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
func WithEngageOptions[request comparable](src TypedSource[request], opts EngageOptions) TypedSource[request] {
	return &filtered[request]{inner: src, opts: opts}
}

type filtered[request comparable] struct {
	inner TypedSource[request]
	opts  EngageOptions
}

func (f *filtered[request]) ForCluster(name multicluster.ClusterName, cl cluster.Cluster) (source.TypedSource[request], error) {
	if !f.opts.Accepts(name, cl) {
		return nil, nil
	}
	return f.inner.ForCluster(name, cl)
}

func (f *filtered[request]) String() string { return fmt.Sprint(f.inner) }
