// Package fleetprovider is a provider module written against the upstream
// design's import path, sigs.k8s.io/multicluster-runtime, as third-party
// providers (kcp's, for instance) are: it knows nothing of
// github.com/mcruntime/multicluster-runtime.
package fleetprovider

import (
	"context"
	"fmt"
	"sync"

	"github.com/go-logr/logr"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"
)

var (
	_ multicluster.Provider         = &Provider{}
	_ multicluster.ProviderRunnable = &Provider{}
)

type index struct {
	obj     client.Object
	field   string
	extract client.IndexerFunc
}

// Provider engages one cluster per kubeconfig file.
type Provider struct {
	kubeconfigs map[string]string
	log         logr.Logger

	mu       sync.Mutex
	clusters map[multicluster.ClusterName]cluster.Cluster
	indexes  []index
}

// New returns a provider of the clusters named by kubeconfigs (name to file).
func New(kubeconfigs map[string]string) *Provider {
	return &Provider{kubeconfigs: kubeconfigs, log: logr.Discard(), clusters: map[multicluster.ClusterName]cluster.Cluster{}}
}

// SetupWithManager is called with the program's manager, of upstream's type.
func (p *Provider) SetupWithManager(mgr mcmanager.Manager) error {
	p.log = mgr.GetLogger().WithName("fleetprovider")
	return nil
}

// Start builds, starts and engages every cluster, then waits.
func (p *Provider) Start(ctx context.Context, aware multicluster.Aware) error {
	for name, file := range p.kubeconfigs {
		cfg, err := clientcmd.BuildConfigFromFlags("", file)
		if err != nil {
			return fmt.Errorf("cluster %s: %w", name, err)
		}
		cl, err := cluster.New(cfg)
		if err != nil {
			return fmt.Errorf("cluster %s: %w", name, err)
		}
		p.mu.Lock()
		for _, ix := range p.indexes {
			if err := cl.GetFieldIndexer().IndexField(ctx, ix.obj, ix.field, ix.extract); err != nil {
				p.mu.Unlock()
				return fmt.Errorf("cluster %s: %w", name, err)
			}
		}
		p.clusters[multicluster.ClusterName(name)] = cl
		p.mu.Unlock()
		go func() {
			if err := cl.Start(ctx); err != nil {
				p.log.Error(err, "cluster stopped", "cluster", name)
			}
		}()
		if !cl.GetCache().WaitForCacheSync(ctx) {
			return fmt.Errorf("cluster %s: cache did not sync", name)
		}
		if err := aware.Engage(ctx, multicluster.ClusterName(name), cl); err != nil {
			return fmt.Errorf("cluster %s: %w", name, err)
		}
		p.log.Info("engaged", "cluster", name)
	}
	<-ctx.Done()
	return nil
}

// Get returns an engaged cluster.
func (p *Provider) Get(_ context.Context, name multicluster.ClusterName) (cluster.Cluster, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if cl, ok := p.clusters[name]; ok {
		return cl, nil
	}
	return nil, fmt.Errorf("cluster %s: %w", name, multicluster.ErrClusterNotFound)
}

// IndexField indexes every cluster, now and later.
func (p *Provider) IndexField(ctx context.Context, obj client.Object, field string, extract client.IndexerFunc) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.indexes = append(p.indexes, index{obj, field, extract})
	for name, cl := range p.clusters {
		if err := cl.GetFieldIndexer().IndexField(ctx, obj, field, extract); err != nil {
			return fmt.Errorf("cluster %s: %w", name, err)
		}
	}
	return nil
}

// Logged wraps a reconciler of upstream's type, logging each request.
func Logged(log logr.Logger, r mcreconcile.Reconciler) mcreconcile.Reconciler {
	return mcreconcile.Func(func(ctx context.Context, req mcreconcile.Request) (mcreconcile.Result, error) {
		log.V(1).Info("reconciling", "cluster", req.ClusterName, "object", req.NamespacedName)
		return r.Reconcile(ctx, req)
	})
}
