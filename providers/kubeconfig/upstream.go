package kubeconfig

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
)

// DefaultControllerName is the upstream design's name for ControllerName,
// the default of Options.ControllerName.
const DefaultControllerName = ControllerName

// ListClusters returns the names of the clusters the provider has engaged,
// sorted: upstream's shape (programs append the host's name and range over
// them). EngagedClusters returns the clusters themselves.
func (p *Provider) ListClusters() []multicluster.ClusterName {
	return p.ClusterNames()
}

// EngagedClusters returns the clusters the provider has engaged, by name. A
// cluster disengaged while the map is built is left out.
func (p *Provider) EngagedClusters() map[multicluster.ClusterName]cluster.Cluster {
	out := map[multicluster.ClusterName]cluster.Cluster{}
	for _, name := range p.ClusterNames() {
		if cl, err := p.Get(context.Background(), name); err == nil {
			out[name] = cl
		}
	}
	return out
}
