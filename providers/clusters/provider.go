package clusters

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"sigs.k8s.io/controller-runtime/pkg/cluster"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	pkgclusters "github.com/mcruntime/multicluster-runtime/pkg/clusters"
	"github.com/mcruntime/multicluster-runtime/pkg/fleet"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
)

var (
	_ multicluster.Provider         = &Provider{}
	_ multicluster.ProviderRunnable = &Provider{}
	_ multicluster.ListingProvider  = &Provider{}
)

// Provider engages the clusters added to it. Clusters added before the
// manager starts are engaged when it starts. The fleet engine starts each
// cluster (unless the application already did), probes it, and disengages and
// re-engages it with its health.
type Provider struct {
	pkgclusters.View // Get, IndexField, ClusterNames

	members pkgclusters.Members

	mu      sync.Mutex
	started bool
	pending map[multicluster.ClusterName]cluster.Cluster
	lives   map[multicluster.ClusterName]func() bool // stops the AfterFunc on the caller's ctx
	listed  chan struct{}                            // closed once the clusters added before Start are published
}

// New returns a provider without clusters.
func New() *Provider {
	p := &Provider{pending: map[multicluster.ClusterName]cluster.Cluster{}, lives: map[multicluster.ClusterName]func() bool{}, listed: make(chan struct{})}
	p.View = p.members.View()
	return p
}

// Start engages the clusters added so far and those added later, until ctx ends.
func (p *Provider) Start(ctx context.Context, aware multicluster.Aware) error {
	p.mu.Lock()
	if p.started {
		p.mu.Unlock()
		return fmt.Errorf("clusters provider: %w", multicluster.ErrAlreadyStarted)
	}
	p.started = true
	p.members.Start(ctx, aware, logf.FromContext(ctx).WithName("clusters-provider"))
	pending := p.pending
	p.pending = nil
	p.mu.Unlock()

	for name, cl := range pending {
		p.members.SetCluster(name, cl, nil)
	}
	close(p.listed)
	<-ctx.Done()
	p.members.Wait()
	return nil
}

// Listed is closed once Start has published the clusters added before it
// (multicluster.ListingProvider): the manager is not Ready before they are
// engaged, or given up on.
func (p *Provider) Listed() <-chan struct{} { return p.listed }

// Add engages cl under name. Before the provider has started, the cluster is
// kept and engaged on start; after, Add returns once the cluster is engaged,
// or with the error of its first failed attempt (the cluster is then
// removed), or at once while this replica does not run it (the manager has
// not started, or sharding assigns it to another replica: it is engaged
// where it runs). The cluster stays until Remove, until ctx ends, or until
// the provider stops.
func (p *Provider) Add(ctx context.Context, name multicluster.ClusterName, cl cluster.Cluster) error {
	if name == "" {
		return errors.New(`clusters provider: the cluster name "" is reserved for the host cluster`)
	}
	if err := pkgclusters.ValidateClusterName(name); err != nil {
		return fmt.Errorf("clusters provider: %w", err)
	}
	p.mu.Lock()
	if _, ok := p.members.Hash(name); ok || p.pending[name] != nil {
		p.mu.Unlock()
		return fmt.Errorf("cluster %q: %w", name, pkgclusters.ErrClusterExists)
	}
	if stop := p.lives[name]; stop != nil {
		stop()
	}
	p.lives[name] = context.AfterFunc(ctx, func() { p.Remove(name) })
	if !p.started {
		p.pending[name] = cl
		p.mu.Unlock()
		return nil
	}
	p.mu.Unlock()

	outcome := make(chan error, 1)
	if !p.members.SetMember(fleet.Member{Name: name, Hash: fmt.Sprintf("%p", cl), Cluster: cl, Outcome: outcome}) {
		p.Remove(name)
		return fmt.Errorf("cluster %q: the provider has stopped", name)
	}
	select {
	case err := <-outcome:
		if err != nil {
			p.Remove(name)
		}
		return err
	case <-ctx.Done():
		return fmt.Errorf("cluster %q: %w", name, ctx.Err())
	}
}

// Remove disengages and stops the named cluster.
func (p *Provider) Remove(name multicluster.ClusterName) {
	p.mu.Lock()
	delete(p.pending, name)
	if stop := p.lives[name]; stop != nil {
		stop()
		delete(p.lives, name)
	}
	p.mu.Unlock()
	p.members.Remove(name)
}
