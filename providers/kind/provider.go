package kind

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	kindcluster "sigs.k8s.io/kind/pkg/cluster"

	pkgclusters "github.com/mcruntime/multicluster-runtime/pkg/clusters"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
)

var (
	_ multicluster.Provider         = &Provider{}
	_ multicluster.ProviderRunnable = &Provider{}
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
	// before it is built.
	RESTOptions []func(*rest.Config)
	// Lister lists the clusters. Default: the kind library, with the
	// container runtime it detects when the provider starts.
	Lister Lister
	// Interval is the time between two listings. Default DefaultInterval.
	Interval time.Duration
}

// Provider engages the local kind clusters. Pass it to mcmanager.New, which
// runs it.
type Provider struct {
	pkgclusters.View // Get, IndexField, ClusterNames

	opts    Options
	members pkgclusters.Members

	listed     chan struct{} // closed after the first successful listing
	listedOnce sync.Once

	mu      sync.Mutex
	running bool
}

// New returns a provider for the kind clusters described by opts.
func New(opts Options) *Provider {
	if opts.Interval <= 0 {
		opts.Interval = DefaultInterval
	}
	p := &Provider{opts: opts, listed: make(chan struct{})}
	p.members = pkgclusters.Members{ClusterOptions: opts.ClusterOptions}
	p.View = p.members.View()
	return p
}

// Start lists the clusters every Options.Interval and engages them with
// aware until ctx ends. The Multi-Cluster Manager calls it. The kind library
// cannot be interrupted: a listing in progress when ctx ends is waited for.
func (p *Provider) Start(ctx context.Context, aware multicluster.Aware) error {
	p.mu.Lock()
	if p.running {
		p.mu.Unlock()
		return errors.New("kind provider: already started")
	}
	p.running = true
	p.mu.Unlock()

	log := logf.FromContext(ctx).WithName("kind-provider")
	lister := p.opts.Lister
	if lister == nil {
		lister = kindcluster.NewProvider() // detects the container runtime: not in New
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer func() {
		cancel()
		p.members.Wait()
	}()
	p.members.Start(runCtx, aware, log)

	ticker := time.NewTicker(p.opts.Interval)
	defer ticker.Stop()
	for {
		if p.sync(log, lister) {
			p.listedOnce.Do(func() { close(p.listed) })
		}
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		}
	}
}

// Listed is closed once the kind clusters have been listed and published
// (multicluster.ListingProvider): the manager's readiness check waits for it.
func (p *Provider) Listed() <-chan struct{} { return p.listed }

var _ multicluster.ListingProvider = &Provider{}

// sync makes the members match one listing; false if kind could not list.
func (p *Provider) sync(log logr.Logger, lister Lister) bool {
	names, err := lister.List()
	if err != nil {
		log.Error(err, "Failed to list kind clusters; keeping the clusters found before")
		return false
	}
	listed := map[string]bool{}
	for _, name := range names {
		if !strings.HasPrefix(name, p.opts.Prefix) {
			continue
		}
		listed[name] = true
		if err := p.set(log, lister, name); err != nil {
			log.Error(err, "Skipping kind cluster; it keeps its last good configuration, if any", "cluster", name)
		}
	}
	for _, name := range p.members.Names() {
		if !listed[name] && p.members.Remove(name) {
			log.Info("Disengaged cluster: kind no longer lists it", "cluster", name)
		}
	}
	return true
}

// set wants cluster name to run with its current kubeconfig.
func (p *Provider) set(log logr.Logger, lister Lister, name string) error {
	kc, err := lister.KubeConfig(name, false)
	if err != nil {
		return fmt.Errorf("cluster %q: reading its kubeconfig: %w", name, err)
	}
	sum := sha256.Sum256([]byte(kc))
	hash := hex.EncodeToString(sum[:])
	old, known := p.members.Hash(name)
	if known && old == hash {
		return nil
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig([]byte(kc))
	if err != nil {
		// clientcmd quotes the offending YAML; keep credentials out of logs.
		return fmt.Errorf("cluster %q: its kubeconfig is malformed", name)
	}
	for _, opt := range p.opts.RESTOptions {
		opt(cfg)
	}
	if known {
		log.Info("Re-creating cluster: its kubeconfig changed (recreated)", "cluster", name)
	} else {
		log.Info("Engaging cluster", "cluster", name)
	}
	p.members.Set(name, hash, cfg, nil)
	return nil
}
