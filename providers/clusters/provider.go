package clusters

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"sigs.k8s.io/controller-runtime/pkg/cluster"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	pkgclusters "github.com/mcruntime/multicluster-runtime/pkg/clusters"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
)

var (
	_ multicluster.Provider         = &Provider{}
	_ multicluster.ProviderRunnable = &Provider{}
)

// Provider engages the clusters added to it. Clusters added before the
// manager starts are engaged when it starts.
type Provider struct {
	pkgclusters.Clusters[cluster.Cluster]

	mu      sync.Mutex
	ctx     context.Context // the provider's run, once started
	aware   multicluster.Aware
	pending map[multicluster.ClusterName]pendingCluster
	lives   map[multicluster.ClusterName]*clusterLife
}

// clusterLife ends a cluster added after start: its context derives from the
// provider's and must be cancelled when the cluster goes.
type clusterLife struct{ cancel context.CancelFunc }

type pendingCluster struct {
	ctx context.Context
	cl  cluster.Cluster
}

// New returns a provider without clusters.
func New() *Provider {
	return &Provider{Clusters: pkgclusters.New[cluster.Cluster](), pending: map[multicluster.ClusterName]pendingCluster{}, lives: map[multicluster.ClusterName]*clusterLife{}}
}

// Start engages the clusters added so far and those added later, until ctx ends.
func (p *Provider) Start(ctx context.Context, aware multicluster.Aware) error {
	p.mu.Lock()
	if p.ctx != nil {
		p.mu.Unlock()
		return errors.New("clusters provider: already started")
	}
	p.ctx, p.aware = ctx, aware
	pending := p.pending
	p.pending = nil
	p.mu.Unlock()

	log := logf.FromContext(ctx).WithName("clusters-provider")
	var wg sync.WaitGroup
	for name, pc := range pending {
		wg.Go(func() {
			if err := p.add(pc.ctx, name, pc.cl); err != nil {
				log.Error(err, "Failed to engage cluster", "cluster", name)
			}
		})
	}
	wg.Wait()
	<-ctx.Done()
	return nil
}

// Add starts cl and engages it under name. Before the provider has started,
// the cluster is kept and engaged on start. The cluster stays until Remove,
// until ctx ends, or until the provider stops.
func (p *Provider) Add(ctx context.Context, name multicluster.ClusterName, cl cluster.Cluster) error {
	if name == "" {
		return errors.New(`clusters provider: the cluster name "" is reserved for the host cluster`)
	}
	p.mu.Lock()
	if p.ctx == nil {
		if _, ok := p.pending[name]; ok {
			p.mu.Unlock()
			return fmt.Errorf("cluster %q: %w", name, pkgclusters.ErrClusterExists)
		}
		p.pending[name] = pendingCluster{ctx: ctx, cl: cl}
		p.mu.Unlock()
		return nil
	}
	p.mu.Unlock()
	return p.add(ctx, name, cl)
}

func (p *Provider) add(ctx context.Context, name multicluster.ClusterName, cl cluster.Cluster) error {
	// The cluster lives within the provider's run and the caller's ctx. Its
	// context is cancelled on Remove, so that it leaves the provider's context.
	cctx, cancel := context.WithCancel(p.ctx)
	life := &clusterLife{cancel: cancel}
	p.mu.Lock()
	p.lives[name] = life
	p.mu.Unlock()
	stop := context.AfterFunc(ctx, cancel)
	context.AfterFunc(cctx, func() {
		stop()
		p.mu.Lock()
		if p.lives[name] == life {
			delete(p.lives, name)
		}
		p.mu.Unlock()
	})
	if err := p.Clusters.Add(cctx, name, cl, p.aware); err != nil {
		cancel()
		return err
	}
	return nil
}

// Remove disengages and stops the named cluster.
func (p *Provider) Remove(name multicluster.ClusterName) {
	p.mu.Lock()
	delete(p.pending, name)
	life := p.lives[name]
	p.mu.Unlock()
	p.Clusters.Remove(name)
	if life != nil {
		life.cancel()
	}
}
