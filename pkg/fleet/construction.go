package fleet

import (
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/mcruntime/multicluster-runtime/pkg/fleet/build"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
)

// Constructor is implemented by a Publisher that holds the cluster options
// and the client settings hook of the clusters its members build (see
// Options.ClusterOptions and Options.Settings): the engine, the
// Multi-Cluster Manager, and every door that wraps one. Whoever builds a
// member's cluster (pkg/clusters.Members, a provider's own Build) asks the
// door it publishes to, so that the manager's options reach every cluster
// as the engine's own options, with no context value carrying them.
type Constructor interface {
	// Construction returns the cluster options and the settings hook for
	// the member published under name; nil for none. The hook is bound to
	// the name the engine knows the cluster by: it ignores the name it is
	// called with, since a wrapper (the multi provider) publishes the
	// provider's name under another.
	Construction(name multicluster.ClusterName) (opts []cluster.Option, settings build.SettingsFunc)
}

var (
	_ Constructor = &Engine{}
	_ Constructor = &OwnEngine{}
)

// ConstructionOf returns p's Construction for name if p is a Constructor,
// else none.
func ConstructionOf(p Publisher, name multicluster.ClusterName) ([]cluster.Option, build.SettingsFunc) {
	if c, ok := p.(Constructor); ok {
		return c.Construction(name)
	}
	return nil, nil
}

// Construction returns the options and hook of e's Options for name.
func (e *Engine) Construction(name multicluster.ClusterName) ([]cluster.Option, build.SettingsFunc) {
	return e.opts.construction(name)
}

// Construction returns the options and hook of o's Options for name, whether
// an engine runs or not.
func (o *OwnEngine) Construction(name multicluster.ClusterName) ([]cluster.Option, build.SettingsFunc) {
	return o.opts.construction(name)
}

func (o Options) construction(name multicluster.ClusterName) ([]cluster.Option, build.SettingsFunc) {
	var opts []cluster.Option
	if o.ClusterOptions != nil {
		opts = o.ClusterOptions(name)
	}
	var hook build.SettingsFunc
	if settings := o.Settings; settings != nil {
		hook = func(_ multicluster.ClusterName, source client.Object, cfg *rest.Config) []cluster.Option {
			return settings(name, source, cfg)
		}
	}
	return opts, hook
}
