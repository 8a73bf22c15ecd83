package builder

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	mcsource "github.com/mcruntime/multicluster-runtime/pkg/source"

	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
)

// ClusterFilterFunc decides whether a watch covers a cluster; the host is
// offered under the name "". The upstream design's name for the function
// WithClusterFilter takes.
type ClusterFilterFunc = mcsource.ClusterFilterFunc

// ClustersFromProvider is the option WithClustersFromProvider returns.
type ClustersFromProvider struct{ from *otherProvider }

// otherProvider is one WithClustersFromProvider call: the provider, and the
// context that bounds its run.
type otherProvider struct {
	ctx      context.Context
	provider multicluster.Provider
}

// WithClustersFromProvider makes a watch cover the clusters of provider
// instead of the manager's provider: the controller is engaged with them by
// provider itself, which the manager starts with the controller and runs
// until ctx ends or the manager stops. provider must be a
// multicluster.ProviderRunnable not run by anything else (not the manager's
// provider): Build fails otherwise. The watch covers the host too only with
// WithEngageWithLocalCluster(true); WithClusterFilter still applies.
//
// The clusters of provider are not the manager's: the reconciler reaches
// them with provider.Get(ctx, req.ClusterName), not mgr.GetCluster, and the
// manager's health checks, sharding and readiness do not cover them. Their
// names share the controller's namespace of names with the manager's
// clusters: a name that both providers engage is engaged with the
// controller once, by whichever engaged it last.
func WithClustersFromProvider(ctx context.Context, provider multicluster.Provider) ClustersFromProvider {
	return ClustersFromProvider{from: &otherProvider{ctx: ctx, provider: provider}}
}

// ApplyToFor makes the For watch cover the provider's clusters.
func (o ClustersFromProvider) ApplyToFor(in *ForInput) { in.engage.from = o.from }

// ApplyToOwns makes an Owns watch cover the provider's clusters.
func (o ClustersFromProvider) ApplyToOwns(in *OwnsInput) { in.engage.from = o.from }

// ApplyToWatches makes a Watches watch cover the provider's clusters.
func (o ClustersFromProvider) ApplyToWatches(in *WatchesInput) { in.engage.from = o.from }

var (
	_ ForOption     = ClustersFromProvider{}
	_ OwnsOption    = ClustersFromProvider{}
	_ WatchesOption = ClustersFromProvider{}
)

// fromCluster is a cluster that an other provider engaged: the controller's
// sources see it with its origin, so that each watch starts only in the
// clusters of its own provider. A comparable value: engaging the same cluster
// twice is the same engagement.
type fromCluster struct {
	cluster.Cluster
	from *otherProvider
}

// origin returns the provider that engaged cl, nil for the manager's.
func origin(cl cluster.Cluster) *otherProvider {
	if fc, ok := cl.(fromCluster); ok {
		return fc.from
	}
	return nil
}

// withOrigin restricts filter to the clusters from engaged (nil: the
// manager's clusters).
func withOrigin(from *otherProvider, filter func(multicluster.ClusterName, cluster.Cluster) bool) func(multicluster.ClusterName, cluster.Cluster) bool {
	return func(name multicluster.ClusterName, cl cluster.Cluster) bool {
		if name != "" && origin(cl) != from {
			return false
		}
		if filter == nil {
			return true
		}
		if fc, ok := cl.(fromCluster); ok {
			cl = fc.Cluster // filters see the cluster as its provider built it
		}
		return filter(name, cl)
	}
}

// otherProviders returns the providers of the builder's watches, each once.
func (b *TypedBuilder[request]) otherProviders() []*otherProvider {
	var out []*otherProvider
	add := func(p *otherProvider) {
		for _, o := range out {
			if o == p {
				return
			}
		}
		if p != nil {
			out = append(out, p)
		}
	}
	add(b.forInput.engage.from)
	for _, w := range b.owns {
		add(w.in.engage.from)
	}
	for _, w := range b.watches {
		add(w.in.engage.from)
	}
	return out
}

// checkOtherProviders refuses providers that cannot engage the controller.
func (b *TypedBuilder[request]) checkOtherProviders() error {
	for _, p := range b.otherProviders() {
		if p.provider == nil {
			return fmt.Errorf("mcbuilder: WithClustersFromProvider: nil provider")
		}
		if _, ok := p.provider.(multicluster.ProviderRunnable); !ok {
			return fmt.Errorf("mcbuilder: WithClustersFromProvider: provider %T engages no clusters by itself (it is not a multicluster.ProviderRunnable); give it to the manager or engage the controller from its own code", p.provider)
		}
		if p.provider == b.mgr.GetProvider() {
			return fmt.Errorf("mcbuilder: WithClustersFromProvider: provider %T is the manager's; its clusters are every watch's by default", p.provider)
		}
	}
	return nil
}

// runOtherProviders adds to the host manager, for each other provider, a
// runnable that runs it with aware (the controller) as its engager.
func (b *TypedBuilder[request]) runOtherProviders(aware multicluster.Aware) error {
	for _, p := range b.otherProviders() {
		runnable := p.provider.(multicluster.ProviderRunnable)
		from := p
		engage := multicluster.AwareFunc(func(ctx context.Context, name multicluster.ClusterName, cl cluster.Cluster) error {
			return aware.Engage(ctx, name, fromCluster{Cluster: cl, from: from})
		})
		err := b.mgr.GetLocalManager().Add(manager.RunnableFunc(func(ctx context.Context) error {
			ctx, cancel := context.WithCancel(ctx)
			defer cancel()
			stop := context.AfterFunc(from.ctx, cancel)
			defer stop()
			if err := runnable.Start(ctx, engage); err != nil {
				return fmt.Errorf("mcbuilder: provider %T of WithClustersFromProvider: %w", from.provider, err)
			}
			return nil
		}))
		if err != nil {
			return fmt.Errorf("mcbuilder: starting provider %T of WithClustersFromProvider: %w", p.provider, err)
		}
	}
	return nil
}
