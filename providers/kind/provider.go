package kind

import (
	"context"
	"fmt"
	"strings"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	kindcluster "sigs.k8s.io/kind/pkg/cluster"

	"github.com/mcruntime/multicluster-runtime/pkg/inventory"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
)

var (
	_ multicluster.Provider         = &Provider{}
	_ multicluster.ProviderRunnable = &Provider{}
	_ multicluster.ListingProvider  = &Provider{}
	_ Lister                        = &kindcluster.Provider{}
)

// DefaultInterval is the time between two listings when Options.Interval is zero.
const DefaultInterval = 5 * time.Second

// Lister lists kind clusters and gives their kubeconfigs. The kind library's
// *cluster.Provider (sigs.k8s.io/kind/pkg/cluster) is one; tests supply
// their own.
type Lister interface {
	// List returns the names of the existing clusters.
	List() ([]string, error)
	// KubeConfig returns the kubeconfig of cluster name; internal asks for the
	// address seen from inside the container network (the provider asks for
	// the one seen from the host: internal false).
	KubeConfig(name string, internal bool) (string, error)
}

// Options configure a Provider. The zero value engages every kind cluster
// of the local container runtime.
type Options struct {
	// Prefix selects the clusters whose name starts with it. Default: all.
	Prefix string
	// ClusterOptions are applied to every cluster the provider creates.
	ClusterOptions []cluster.Option
	// RESTOptions adjust each cluster's rest.Config (QPS, timeouts, ...)
	// before it is built, in order (upstream's shape). An error leaves the
	// cluster out of this listing, logged with the cluster's name; the next
	// listing tries again.
	RESTOptions []func(*rest.Config) error
	// Lister lists the clusters. Default: the kind library, with the
	// container runtime it detects at the first listing.
	Lister Lister
	// Interval is the time between two listings. Default DefaultInterval.
	Interval time.Duration
}

// Provider engages the local kind clusters. Pass it to mcmanager.New, which
// runs it; it is built on the inventory kit's listing mode. The kind library
// cannot be interrupted: a listing in progress when the manager stops is
// waited for.
type Provider struct {
	*inventory.Kit[client.Object] // Get, IndexField, ClusterNames, Start, Listed

	opts   Options
	lister Lister
}

// New returns a provider for the kind clusters described by opts.
func New(opts Options) *Provider {
	if opts.Interval <= 0 {
		opts.Interval = DefaultInterval
	}
	p := &Provider{opts: opts, lister: opts.Lister}
	p.Kit = inventory.New(inventory.Options[client.Object]{
		Name: "kind-provider", List: p.list, Interval: opts.Interval, ClusterOptions: opts.ClusterOptions,
	})
	return p
}

// list lists the kind clusters and reads their kubeconfigs. A cluster whose
// kubeconfig cannot be read or used is logged and keeps its last good one.
func (p *Provider) list(ctx context.Context) ([]inventory.Desired, error) {
	if p.lister == nil {
		p.lister = kindcluster.NewProvider() // detects the container runtime: not in New
	}
	names, err := p.lister.List()
	if err != nil {
		return nil, fmt.Errorf("listing kind clusters: %w", err)
	}
	var desired []inventory.Desired
	for _, name := range names {
		if !strings.HasPrefix(name, p.opts.Prefix) {
			continue
		}
		d, err := p.desire(name)
		if err != nil {
			logf.FromContext(ctx).Error(err, "Skipping kind cluster; it keeps its last good configuration, if any", "cluster", name)
		}
		desired = append(desired, d)
	}
	return desired, nil
}

func (p *Provider) desire(name string) (inventory.Desired, error) {
	kc, err := p.lister.KubeConfig(name, false)
	if err != nil {
		return inventory.Desired{Name: name}, fmt.Errorf("cluster %q: reading its kubeconfig: %w", name, err)
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig([]byte(kc))
	if err != nil { // clientcmd quotes the offending YAML: keep credentials out of logs
		return inventory.Desired{Name: name}, fmt.Errorf("cluster %q: its kubeconfig is malformed", name)
	}
	for i, opt := range p.opts.RESTOptions {
		if err := opt(cfg); err != nil {
			return inventory.Desired{Name: name}, fmt.Errorf("cluster %q: RESTOptions[%d]: %w", name, i, err)
		}
	}
	return inventory.Desired{Name: name, Config: cfg, Hash: inventory.Hash([]byte(kc))}, nil
}
