package fleettest

import (
	"context"
	"fmt"
	"maps"
	"sync"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	pkgclusters "github.com/mcruntime/multicluster-runtime/pkg/clusters"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
)

// NamedProvider publishes members of a Fleet under names the test chooses,
// several names on one control plane if it likes (clusters that share an
// API server), the way built-in providers publish members: under sharding a
// replica builds only the clusters it owns. Give each replica of a sharded
// test a NamedProvider of its own, with the same names.
type NamedProvider struct {
	fleet   *Fleet
	members pkgclusters.Members

	mu      sync.Mutex
	names   map[multicluster.ClusterName]int
	running bool
}

var _ multicluster.ProviderRunnable = &NamedProvider{}

// NewNamedProvider returns a provider of member names[name] under each name.
func NewNamedProvider(f *Fleet, names map[multicluster.ClusterName]int) *NamedProvider {
	return &NamedProvider{fleet: f, names: maps.Clone(names)}
}

// Start publishes the names and follows Set and Remove until ctx ends.
func (p *NamedProvider) Start(ctx context.Context, aware multicluster.Aware) error {
	p.mu.Lock()
	if p.running {
		p.mu.Unlock()
		return fmt.Errorf("fleettest named provider: %w", multicluster.ErrAlreadyStarted)
	}
	p.running = true
	p.members.Start(ctx, aware, logf.FromContext(ctx).WithName("fleettest-named-provider"))
	for name, i := range p.names {
		p.publishLocked(name, i)
	}
	p.mu.Unlock()
	<-ctx.Done()
	p.members.Wait()
	return nil
}

func (p *NamedProvider) publishLocked(name multicluster.ClusterName, i int) {
	cfg := p.fleet.Config(i)
	p.members.Set(name, cfg.Host, cfg, nil) // a member's server address stands for its configuration
}

// Set publishes member i under name (again).
func (p *NamedProvider) Set(name multicluster.ClusterName, i int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.names[name] = i
	if p.running {
		p.publishLocked(name, i)
	}
}

// Remove withdraws name: it is disengaged; the control plane keeps running.
func (p *NamedProvider) Remove(name multicluster.ClusterName) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.names, name)
	if p.running {
		p.members.Remove(name)
	}
}

// Get returns the cluster engaged under name.
func (p *NamedProvider) Get(ctx context.Context, name multicluster.ClusterName) (cluster.Cluster, error) {
	return p.members.Get(ctx, name)
}

// IndexField indexes every cluster of the provider, now and later.
func (p *NamedProvider) IndexField(ctx context.Context, obj client.Object, field string, extract client.IndexerFunc) error {
	return p.members.IndexField(ctx, obj, field, extract)
}
