package namespace

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
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

// Provider engages one virtual cluster per Namespace of the API server
// behind a cluster.Cluster. See the package documentation.
type Provider struct {
	// View answers Get and ClusterNames: the engaged virtual clusters. Its
	// IndexField is not used: indexes go to the shared cache once (see
	// IndexField), never per virtual cluster.
	pkgclusters.View
	cl  cluster.Cluster
	log logr.Logger

	// members publishes the virtual clusters to the fleet engine, which
	// starts, engages, probes and tears them down.
	members     pkgclusters.Members
	dispatchers dispatchers

	idxMu   sync.Mutex
	indexed map[indexKey]struct{}

	started atomic.Bool
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
	p := &Provider{
		cl:      cl,
		log:     logf.Log.WithName("namespace-provider"),
		indexed: map[indexKey]struct{}{},
	}
	p.View = p.members.View()
	return p
}

// Start runs the shared cluster, publishes a virtual cluster for every
// Namespace that exists and is not terminating, and withdraws it when its
// Namespace is deleted or starts terminating. It blocks until ctx is done.
func (p *Provider) Start(ctx context.Context, aware multicluster.Aware) error {
	if !p.started.CompareAndSwap(false, true) {
		return fmt.Errorf("namespace provider: %w", multicluster.ErrAlreadyStarted)
	}
	var wg sync.WaitGroup
	defer wg.Wait() // runs last: everything below was cancelled or shut down
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)

	if _, isManager := p.cl.(manager.Manager); !isManager {
		wg.Go(func() {
			err := p.cl.Start(ctx)
			if mcfleet.AlreadyStarted(err) {
				// The application runs the shared cluster itself: use it as it is.
				p.log.Info("The shared cluster runs already; using it as it is")
				return
			}
			if err == nil {
				err = errors.New("cluster.Start returned") // no-op once ctx is done
			}
			cancel(fmt.Errorf("%w: %w", errSharedStopped, err))
		})
	}
	// The Namespace informer is watched at once, not after it synced: its
	// initial list arrives as Add events, each namespace's cluster published
	// as it comes, with no wait of controller-runtime's 100 ms polling.
	informer, err := p.cl.GetCache().GetInformer(ctx, &corev1.Namespace{}, cache.BlockUntilSynced(false))
	if err != nil {
		return fmt.Errorf("namespace provider: getting the Namespace informer: %w", err)
	}
	defer p.members.Wait() // after cancel: the engine of our own, if any
	defer cancel(nil)
	p.members.Start(ctx, aware, p.log)
	// The informer calls the handler for one event at a time, and Members
	// hands each decision to the engine at once: no queue of our own.
	reg, err := informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { p.namespaceChanged(obj, false) },
		UpdateFunc: func(_, obj any) { p.namespaceChanged(obj, false) },
		DeleteFunc: func(obj any) { p.namespaceChanged(obj, true) },
	})
	if err != nil {
		return fmt.Errorf("namespace provider: watching Namespaces: %w", err)
	}
	defer func() { _ = informer.RemoveEventHandler(reg) }()
	defer p.dispatchers.stop()

	<-ctx.Done()
	if err := context.Cause(ctx); errors.Is(err, errSharedStopped) {
		return fmt.Errorf("namespace provider: %w", err)
	}
	return nil
}

var errSharedStopped = errors.New("shared cluster stopped")

// namespaceChanged publishes the namespace's virtual cluster, or withdraws it
// when the namespace is deleted or terminating.
func (p *Provider) namespaceChanged(obj any, deleted bool) {
	if tombstone, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj, deleted = tombstone.Obj, true
	}
	ns, ok := obj.(*corev1.Namespace)
	if !ok {
		return
	}
	name := ns.Name
	if deleted || ns.DeletionTimestamp != nil || ns.Status.Phase == corev1.NamespaceTerminating {
		if p.members.Remove(name) {
			p.log.V(1).Info("Withdrew namespace virtual cluster", "cluster", name)
		}
		return
	}
	if _, known := p.members.Hash(name); known {
		return // the namespace's cluster is published once
	}
	// A Build, not a cluster: a view of the shared cluster is cheap to
	// make, so the engine makes a new one for every start, as it builds
	// every member (after an outage, a hand-off to another replica and back).
	p.members.SetMember(mcfleet.Member{Name: name, Hash: "namespace", Build: func(context.Context) (cluster.Cluster, error) {
		return newVirtualCluster(p, name), nil
	}})
	p.log.V(1).Info("Published namespace virtual cluster", "cluster", name)
}

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
	key := indexKey{informerKey: informerKey{gvk: gvk, typ: reflect.TypeOf(obj)}, field: field}
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
