// Package upstreamdep is a provider module built on upstream's import path.
package upstreamdep

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"
)

// Provider has no clusters.
type Provider struct{}

var _ multicluster.Provider = &Provider{}

// New returns a provider.
func New() *Provider { return &Provider{} }

// Get finds no cluster.
func (*Provider) Get(_ context.Context, name multicluster.ClusterName) (cluster.Cluster, error) {
	return nil, fmt.Errorf("cluster %s: %w", name, multicluster.ErrClusterNotFound)
}

// IndexField indexes nothing.
func (*Provider) IndexField(context.Context, client.Object, string, client.IndexerFunc) error {
	return nil
}
