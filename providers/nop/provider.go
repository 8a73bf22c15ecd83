package nop

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
)

var (
	_ multicluster.Provider         = &Provider{}
	_ multicluster.ProviderRunnable = &Provider{}
)

// Provider has no clusters.
type Provider struct{}

// New returns a provider without clusters.
func New() *Provider { return &Provider{} }

// Get always returns an error wrapping multicluster.ErrClusterNotFound.
func (p *Provider) Get(_ context.Context, name multicluster.ClusterName) (cluster.Cluster, error) {
	return nil, fmt.Errorf("cluster %q: %w (the nop provider has no clusters)", name, multicluster.ErrClusterNotFound)
}

// IndexField succeeds: an index over no clusters has nothing to apply to, and
// this provider never engages one later.
func (p *Provider) IndexField(context.Context, client.Object, string, client.IndexerFunc) error {
	return nil
}

// Start engages nothing and returns when ctx ends: the nop provider is a
// multicluster.ProviderRunnable, as upstream's is, so that it can stand
// where one is asked for (mcbuilder.WithClustersFromProvider, the multi
// provider).
func (p *Provider) Start(ctx context.Context, _ multicluster.Aware) error {
	<-ctx.Done()
	return nil
}
