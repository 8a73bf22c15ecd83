package single

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/cluster"

	pkgclusters "github.com/mcruntime/multicluster-runtime/pkg/clusters"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
)

var (
	_ multicluster.Provider         = &Provider{}
	_ multicluster.ProviderRunnable = &Provider{}
)

// Provider serves one cluster under one name.
type Provider struct {
	pkgclusters.Clusters[cluster.Cluster]
	name multicluster.ClusterName
	cl   cluster.Cluster
}

// New returns a provider of cl under name. The provider starts cl.
func New(name multicluster.ClusterName, cl cluster.Cluster) *Provider {
	return &Provider{Clusters: pkgclusters.New[cluster.Cluster](), name: name, cl: cl}
}

// Start starts and engages the cluster, then blocks until ctx ends.
func (p *Provider) Start(ctx context.Context, aware multicluster.Aware) error {
	if err := p.Add(ctx, p.name, p.cl, aware); err != nil {
		return err
	}
	<-ctx.Done()
	return nil
}
