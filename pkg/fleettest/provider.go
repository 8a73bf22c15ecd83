package fleettest

import (
	"context"
	"fmt"
	"strconv"
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

// DefaultPrefix names the members engaged by a Provider: "member-0", "member-1", ...
const DefaultPrefix = "member-"

// ProviderOptions tune a Provider. The zero value engages every member.
type ProviderOptions struct {
	// Prefix of the cluster names; member i is named Prefix+i. Default DefaultPrefix.
	Prefix string
	// Members lists the members engaged at start. Default: all of them.
	// Others can join later with Add.
	Members []int
	// ClusterOptions are applied to every cluster built for a member.
	ClusterOptions []cluster.Option
	// Faulty engages every member through its Faults (Fleet.Faults), so
	// that the test can cut it off, black-hole it, slow it down or silence
	// its watches while the controller runs.
	Faulty bool
}

// Provider is a provider for tests: it engages members of a Fleet as clusters
// named Prefix+index, and lets the test add and remove them while the manager
// runs. It builds clusters the way the kubeconfig-based providers do (probe,
// build, wait for the cache, engage, retry with backoff), so a stopped member
// is retried and logged like an unreachable cluster in production.
type Provider struct {
	pkgclusters.View // Get, IndexField, ClusterNames

	fleet   *Fleet
	prefix  string
	faulty  bool
	members pkgclusters.Members

	mu      sync.Mutex
	started bool
	running bool
	wanted  map[int]bool
}

// NewProvider returns a provider for f's members. The Multi-Cluster Manager
// runs it. A member that fails to engage (a stopped one) is retried with the
// fleet engine's backoff (see mcmanager.WithHealthChecks and fleet.Options).
func NewProvider(f *Fleet, opts ProviderOptions) *Provider {
	if opts.Prefix == "" {
		opts.Prefix = DefaultPrefix
	}
	p := &Provider{
		fleet:  f,
		prefix: opts.Prefix,
		faulty: opts.Faulty,
		wanted: map[int]bool{},
	}
	p.members = pkgclusters.Members{ClusterOptions: opts.ClusterOptions}
	p.View = p.members.View()
	if opts.Members == nil {
		for i := range f.Len() {
			p.wanted[i] = true
		}
	}
	for _, i := range opts.Members {
		if i >= 0 && i < f.Len() {
			p.wanted[i] = true
		}
	}
	return p
}

// ClusterName is the name under which member i is engaged.
func (p *Provider) ClusterName(i int) multicluster.ClusterName {
	return p.prefix + strconv.Itoa(i)
}

// Start engages the wanted members and follows Add and Remove until ctx ends;
// the clusters are disengaged when it returns.
func (p *Provider) Start(ctx context.Context, aware multicluster.Aware) error {
	p.mu.Lock()
	if p.started {
		p.mu.Unlock()
		return fmt.Errorf("fleettest provider: %w", multicluster.ErrAlreadyStarted)
	}
	p.started, p.running = true, true
	runCtx, cancel := context.WithCancel(ctx)
	defer p.members.Wait()
	defer cancel()
	p.members.Start(runCtx, aware, logf.FromContext(ctx).WithName("fleettest-provider"))
	for i := range p.wanted {
		p.set(i)
	}
	p.mu.Unlock()

	<-ctx.Done()
	p.mu.Lock()
	p.running = false
	p.mu.Unlock()
	return nil
}

// set wants member i engaged. Callers hold p.mu.
func (p *Provider) set(i int) {
	cfg := p.fleet.Config(i)
	if p.faulty {
		cfg = p.fleet.Faults(i).Config()
	}
	// The configuration of a member never changes; its server address stands
	// for it.
	p.members.Set(p.ClusterName(i), cfg.Host, cfg, nil)
}

// Add engages member i (again). Before Start, it is engaged on start.
func (p *Provider) Add(i int) error {
	if i < 0 || i >= p.fleet.Len() {
		return fmt.Errorf("fleettest provider: no member %d in a fleet of %d", i, p.fleet.Len())
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.wanted[i] = true
	if p.running {
		p.set(i)
	}
	return nil
}

// Remove disengages member i; the control plane keeps running.
func (p *Provider) Remove(i int) {
	p.mu.Lock()
	delete(p.wanted, i)
	running := p.running
	p.mu.Unlock()
	if running {
		p.members.Remove(p.ClusterName(i))
	}
}
