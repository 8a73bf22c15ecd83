package kubeconfig

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
)

// DefaultControllerName is the upstream design's name for ControllerName,
// the default of Options.ControllerName.
const DefaultControllerName = ControllerName

// ListClusters returns the clusters the provider has engaged, by name. A
// cluster disengaged while the map is built is left out.
func (p *Provider) ListClusters() map[multicluster.ClusterName]cluster.Cluster {
	out := map[multicluster.ClusterName]cluster.Cluster{}
	for _, name := range p.ClusterNames() {
		if cl, err := p.Get(context.Background(), name); err == nil {
			out[name] = cl
		}
	}
	return out
}
