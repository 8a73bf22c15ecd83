package namespace

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	pkgclusters "github.com/mcruntime/multicluster-runtime/pkg/clusters"
	mcfleet "github.com/mcruntime/multicluster-runtime/pkg/fleet"
	mcmanager "github.com/mcruntime/multicluster-runtime/pkg/manager"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
)

var (
	_ multicluster.Provider           = &Provider{}
	_ multicluster.ProviderRunnable   = &Provider{}
	_ client.FieldIndexer             = &Provider{}
	_ mcmanager.SharedClusterProvider = &Provider{}
)

// workers is the number of namespaces engaged or disengaged concurrently.
const workers = 4

// Provider engages one virtual cluster per Namespace of the API server
// behind a cluster.Cluster. See the package documentation.
type Provider struct {
	cl  cluster.Cluster
	log logr.Logger

	// vcs runs the virtual clusters' lifecycle. Its IndexField is not used:
	// indexes go to the shared cache once (see IndexField), never per
	// virtual cluster.
	vcs         pkgclusters.Clusters[*virtualCluster]
	dispatchers dispatchers

	idxMu   sync.Mutex
	indexed map[indexKey]struct{}

	mu      sync.Mutex
	started bool
}

type indexKey struct {
	informerKey
	field string
}

// New returns a provider of the namespaces of cl's API server. The provider
// runs cl: it starts it when the provider starts and stops it when the
// provider stops, unless cl is a manager.Manager, which runs itself. cl's
// cache is shared by all virtual clusters.
func New(cl cluster.Cluster) *Provider {
	return &Provider{
		cl:          cl,
		log:         logf.Log.WithName("namespace-provider"),
		vcs:         pkgclusters.New[*virtualCluster](),
		dispatchers: dispatchers{cache: cl.GetCache()},
		indexed:     map[indexKey]struct{}{},
	}
}

// Start runs the shared cluster, engages a virtual cluster for every
// Namespace that exists and is not terminating, and disengages it when its
// Namespace is deleted or starts terminating. It blocks until ctx is done.
func (p *Provider) Start(ctx context.Context, aware multicluster.Aware) error {
	p.mu.Lock()
	if p.started {
		p.mu.Unlock()
		return fmt.Errorf("namespace provider: %w", multicluster.ErrAlreadyStarted)
	}
	p.started = true
	p.mu.Unlock()

	var wg sync.WaitGroup
	defer wg.Wait() // runs last: everything below was cancelled or shut down
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	clusterErr := make(chan error, 1)
	if _, isManager := p.cl.(manager.Manager); !isManager {
		wg.Go(func() {
			err := p.cl.Start(ctx)
			if mcfleet.AlreadyStarted(err) {
				// The application runs the shared cluster itself: use it as it is.
				p.log.Info("The shared cluster runs already; using it as it is")
				return
			}
			clusterErr <- err
			cancel()
		})
	}
	if !p.cl.GetCache().WaitForCacheSync(ctx) {
		select {
		case err := <-clusterErr:
			return fmt.Errorf("namespace provider: shared cluster stopped: %w", errOrStopped(err))
		default:
			return fmt.Errorf("namespace provider: shared cache did not sync: %w", context.Cause(ctx))
		}
	}

	queue := workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{})
	defer queue.ShutDown()
	informer, err := p.cl.GetCache().GetInformer(ctx, &corev1.Namespace{})
	if err != nil {
		return fmt.Errorf("namespace provider: getting the Namespace informer: %w", err)
	}
	reg, err := informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { enqueue(queue, obj) },
		UpdateFunc: func(_, obj any) { enqueue(queue, obj) },
		DeleteFunc: func(obj any) { enqueue(queue, obj) },
	})
	if err != nil {
		return fmt.Errorf("namespace provider: watching Namespaces: %w", err)
	}
	defer func() { _ = informer.RemoveEventHandler(reg) }()
	defer p.dispatchers.stop()

	for range workers {
		wg.Go(func() {
			for p.processNext(ctx, queue, aware) {
			}
		})
	}
	<-ctx.Done()
	select {
	case err := <-clusterErr:
		if err != nil {
			return fmt.Errorf("namespace provider: shared cluster: %w", err)
		}
	default:
	}
	return nil
}

func errOrStopped(err error) error {
	if err == nil {
		return errors.New("cluster.Start returned")
	}
	return err
}

func enqueue(q workqueue.TypedInterface[string], obj any) {
	if tombstone, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		q.Add(tombstone.Key)
		return
	}
	if ns, ok := obj.(client.Object); ok {
		q.Add(ns.GetName())
	}
}

func (p *Provider) processNext(ctx context.Context, q workqueue.TypedRateLimitingInterface[string], aware multicluster.Aware) bool {
	name, shutdown := q.Get()
	if shutdown {
		return false
	}
	defer q.Done(name)
	if err := p.reconcile(ctx, name, aware); err != nil {
		if ctx.Err() == nil {
			p.log.Error(err, "Failed to engage namespace virtual cluster, will retry", "cluster", name)
			q.AddRateLimited(name)
		}
		return true
	}
	q.Forget(name)
	return true
}

// reconcile engages or disengages the namespace's virtual cluster.
func (p *Provider) reconcile(ctx context.Context, name string, aware multicluster.Aware) error {
	ns := &corev1.Namespace{}
	err := p.cl.GetCache().Get(ctx, client.ObjectKey{Name: name}, ns)
	switch {
	case apierrors.IsNotFound(err), err == nil && (ns.DeletionTimestamp != nil || ns.Status.Phase == corev1.NamespaceTerminating):
		if _, ok := p.vcs.Lookup(name); ok {
			p.vcs.Remove(name)
			p.log.V(1).Info("Disengaged namespace virtual cluster", "cluster", name)
		}
		return nil
	case err != nil:
		return fmt.Errorf("cluster %q: reading its Namespace: %w", name, err)
	}
	if _, ok := p.vcs.Lookup(name); ok {
		return nil
	}
	if err := p.vcs.Add(ctx, name, newVirtualCluster(ctx, p, name), aware); err != nil {
		return err
	}
	p.log.V(1).Info("Engaged namespace virtual cluster", "cluster", name)
	return nil
}

// Get returns the virtual cluster of an engaged namespace, or an error
// wrapping multicluster.ErrClusterNotFound.
func (p *Provider) Get(ctx context.Context, name multicluster.ClusterName) (cluster.Cluster, error) {
	return p.vcs.Get(ctx, name)
}

// ClusterNames returns the names of the engaged virtual clusters, sorted.
func (p *Provider) ClusterNames() []multicluster.ClusterName { return p.vcs.ClusterNames() }

// IndexField registers a field index on the shared cache, once: a
// namespace-scoped lookup of the shared index answers MatchingFields in every
// virtual cluster, engaged now or later. Registering the same type and field
// again (e.g. through several virtual clusters) does nothing more: the first
// extractor registered for a field serves all virtual clusters. Extractors
// see objects in their backing namespace.
func (p *Provider) IndexField(ctx context.Context, obj client.Object, field string, extract client.IndexerFunc) error {
	gvk, err := apiutil.GVKForObject(obj, p.cl.GetScheme())
	if err != nil {
		return fmt.Errorf("namespace provider: indexing %T by %q: %w", obj, field, err)
	}
	key := indexKey{informerKey: informerKey{gvk: gvk, form: formOf(obj)}, field: field}
	p.idxMu.Lock()
	defer p.idxMu.Unlock()
	if _, ok := p.indexed[key]; ok {
		return nil
	}
	if err := p.cl.GetFieldIndexer().IndexField(ctx, obj, field, extract); err != nil {
		return fmt.Errorf("namespace provider: indexing %s by %q on the shared cache: %w", gvk, field, err)
	}
	p.indexed[key] = struct{}{}
	return nil
}

// SharedCluster returns the cluster whose cache backs every virtual cluster.
func (p *Provider) SharedCluster() cluster.Cluster { return p.cl }

// informers returns the number of shared informers with a namespace
// dispatcher, and the namespaces they dispatch to; for tests.
func (p *Provider) informers() map[schema.GroupVersionKind]int {
	p.dispatchers.mu.Lock()
	defer p.dispatchers.mu.Unlock()
	out := map[schema.GroupVersionKind]int{}
	for k, d := range p.dispatchers.m {
		out[k.gvk] = d.namespaces()
	}
	return out
}

// dispatcherSnapshot returns the current dispatchers; for tests.
func (p *Provider) dispatcherSnapshot() map[informerKey]*dispatcher {
	p.dispatchers.mu.Lock()
	defer p.dispatchers.mu.Unlock()
	return maps.Clone(p.dispatchers.m)
}
