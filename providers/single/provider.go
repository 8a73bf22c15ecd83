package single

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
	"github.com/mcruntime/multicluster-runtime/providers/clusters"
)

var (
	_ multicluster.Provider         = &Provider{}
	_ multicluster.ProviderRunnable = &Provider{}
	_ multicluster.ListingProvider  = &Provider{}
)

// Provider serves one cluster under one name.
type Provider struct {
	inner *clusters.Provider
	name  multicluster.ClusterName
	cl    cluster.Cluster
}

// New returns a provider of cl under name. The fleet engine starts cl when the
// manager starts, unless the application runs it already (both work).
func New(name multicluster.ClusterName, cl cluster.Cluster) *Provider {
	return &Provider{inner: clusters.New(), name: name, cl: cl}
}

// Start engages the cluster, then blocks until ctx ends.
func (p *Provider) Start(ctx context.Context, aware multicluster.Aware) error {
	if err := p.inner.Add(ctx, p.name, p.cl); err != nil {
		return fmt.Errorf("single provider: %w", err)
	}
	return p.inner.Start(ctx, aware)
}

// Listed is closed once Start has published the cluster
// (multicluster.ListingProvider): the manager is not Ready before it is
// engaged, or given up on.
func (p *Provider) Listed() <-chan struct{} { return p.inner.Listed() }

// Get returns the cluster if name is its name and it is engaged.
func (p *Provider) Get(ctx context.Context, name multicluster.ClusterName) (cluster.Cluster, error) {
	return p.inner.Get(ctx, name)
}

// IndexField registers an index on the cluster.
func (p *Provider) IndexField(ctx context.Context, obj client.Object, field string, extract client.IndexerFunc) error {
	return p.inner.IndexField(ctx, obj, field, extract)
}
