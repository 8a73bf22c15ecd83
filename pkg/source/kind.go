package source

import (
	"context"
	"errors"
	"fmt"

	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/mcruntime/multicluster-runtime/internal/queue"
	mchandler "github.com/mcruntime/multicluster-runtime/pkg/handler"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
	mcreconcile "github.com/mcruntime/multicluster-runtime/pkg/reconcile"
)

// Kind watches objects of obj's type in every cluster it is offered, through
// that cluster's shared informer. h is called once per cluster to build its
// handler; predicates filter events before the handler sees them.
//
// A controller offers its sources every engaged cluster and the host (under
// the name ""). Wrap the source with WithEngageOptions to choose; mcbuilder
// does so for every watch it builds, with defaults that depend on whether the
// manager has a provider.
func Kind[object client.Object](obj object, h mchandler.TypedEventHandlerFunc[object, mcreconcile.Request], predicates ...predicate.TypedPredicate[object]) *KindSource[object] {
	return TypedKind(obj, h, predicates...)
}

// TypedKind is Kind for any request type.
func TypedKind[object client.Object, request comparable](obj object, h mchandler.TypedEventHandlerFunc[object, request], predicates ...predicate.TypedPredicate[object]) *TypedKindSource[object, request] {
	return &TypedKindSource[object, request]{obj: obj, handler: h, predicates: predicates}
}

// KindSource is the Source returned by Kind.
type KindSource[object client.Object] = TypedKindSource[object, mcreconcile.Request]

// TypedKindSource is the Source returned by TypedKind.
type TypedKindSource[object client.Object, request comparable] struct {
	obj        object
	handler    mchandler.TypedEventHandlerFunc[object, request]
	predicates []predicate.TypedPredicate[object]
	filter     ClusterFilter
	project    func(cluster.Cluster, object) (object, error) // WithProjection
}

var _ TypedSource[client.Object, mcreconcile.Request] = &KindSource[client.Object]{}

// WithClusterFilter makes the source watch only the clusters filter accepts
// (the host is offered under the name "") and returns it. It is the
// per-source counterpart of WithEngageOptions' Filter, with the upstream
// design's semantics: it sets the filter on the source, so both
// mcsource.Kind(obj, h).WithClusterFilter(f) and src.WithClusterFilter(f)
// called for its effect filter src. A nil filter accepts every cluster. On
// a nil source it returns an empty source, whose ForCluster fails.
func (k *TypedKindSource[object, request]) WithClusterFilter(filter ClusterFilterFunc) *TypedKindSource[object, request] {
	if k == nil {
		return &TypedKindSource[object, request]{filter: filter}
	}
	k.filter = filter
	return k
}

// ForCluster returns the cluster's watch on the object type.
func (k *TypedKindSource[object, request]) ForCluster(name multicluster.ClusterName, cl cluster.Cluster) (source.TypedSource[request], bool, error) {
	src, err := k.forCluster(name, cl)
	if src == nil || err != nil {
		return nil, false, err
	}
	return src, true, nil
}

// forCluster returns the cluster's watch, or nil, nil if the filter refuses
// the cluster.
func (k *TypedKindSource[object, request]) forCluster(name multicluster.ClusterName, cl cluster.Cluster) (*clusterKind[object, request], error) {
	if k == nil || k.handler == nil {
		return nil, errors.New("mcsource.Kind: no handler (a source not made by Kind or TypedKind)")
	}
	if k.filter != nil && !k.filter(name, cl) {
		return nil, nil
	}
	obj, err := k.objectFor(name, cl)
	if err != nil {
		return nil, err
	}
	return &clusterKind[object, request]{
		obj:        obj,
		cache:      cl.GetCache(),
		handler:    k.handler(name, cl),
		predicates: k.predicates,
		cluster:    name,
		probe:      &listProbe{reader: cl.GetAPIReader, scheme: cl.GetScheme(), obj: obj},
	}, nil
}

// String describes the source, for logs.
func (k *TypedKindSource[object, request]) String() string {
	return fmt.Sprintf("kind source: %T", k.obj)
}

// clusterKind is one cluster's watch: an event handler registered on the
// cluster's informer for the object's type, removed when ctx ends.
type clusterKind[object client.Object, request comparable] struct {
	obj        object
	cache      cache.Cache
	handler    handler.TypedEventHandler[object, request]
	predicates []predicate.TypedPredicate[object]
	cluster    multicluster.ClusterName
	probe      *listProbe // nil in tests of the source alone

	registration toolscache.ResourceEventHandlerRegistration
}

var _ source.TypedSyncingSource[mcreconcile.Request] = &clusterKind[client.Object, mcreconcile.Request]{}

// Start registers the handler. It returns once the informer exists, without
// waiting for it to sync; what the handler enqueues reaches the queue once the
// initial list is complete (see queue.Cluster).
func (k *clusterKind[object, request]) Start(ctx context.Context, q workqueue.TypedRateLimitingInterface[request]) error {
	if k.registration != nil {
		return fmt.Errorf("%s was started twice", k)
	}
	informer, err := k.cache.GetInformer(ctx, k.obj, cache.BlockUntilSynced(false))
	if err != nil {
		return fmt.Errorf("getting informer for %T: %w", k.obj, err)
	}
	h, gate := k.eventHandler(ctx, q)
	reg, err := informer.AddEventHandlerWithOptions(h, toolscache.HandlerOptions{})
	if err != nil {
		return fmt.Errorf("adding event handler for %T: %w", k.obj, err)
	}
	k.registration = reg
	context.AfterFunc(ctx, func() { _ = informer.RemoveEventHandler(reg) })
	// Release the initial list once it is complete (a short-lived goroutine:
	// it returns at sync or disengagement).
	go func() {
		select {
		case <-reg.HasSyncedChecker().Done():
			gate.Release()
		case <-ctx.Done():
			gate.Discard()
		}
	}()
	return nil
}

// gate is a queue.Cluster, whatever its request types.
type gate interface {
	Release()
	Discard()
}

// eventHandler returns the informer's handler of the cluster's events and the
// one queue wrapper between it and q, which holds the adds until released.
// A lifted controller-runtime handler (mchandler.Lift and the handlers built
// on it) is given that wrapper directly, with the tagging: an event goes
// through one wrapper and no call of the lifted handler. A lifted handler
// wrapped again (mchandler.WithLowPriorityWhenUnchanged) is not seen as one:
// it tags through a view of its own, in front of the held wrapper.
func (k *clusterKind[object, request]) eventHandler(ctx context.Context, q workqueue.TypedRateLimitingInterface[request]) (toolscache.ResourceEventHandler, gate) {
	if l, ok := k.handler.(queue.Lifted[object]); ok {
		if mq, ok := any(q).(workqueue.TypedRateLimitingInterface[mcreconcile.Request]); ok {
			name, inner := l.Unlift()
			c := queue.ForCluster(name, mq, true)
			return NewEventHandler[object, reconcile.Request](ctx, c, inner, k.predicates), c
		}
	}
	c := queue.Held(q)
	return NewEventHandler[object, request](ctx, c, k.handler, k.predicates), c
}

// WaitForSync waits until the handler has seen the informer's initial list.
// A list that keeps failing fails the wait within seconds, with a *SyncError
// carrying the API server's answer (see waitForSync).
func (k *clusterKind[object, request]) WaitForSync(ctx context.Context) error {
	if k.registration == nil {
		return fmt.Errorf("the watch of %T was not started", k.obj)
	}
	return waitForSync(ctx, k.cluster, fmt.Sprintf("%T", k.obj), k.registration.HasSyncedChecker().Done(), k.probe)
}

func (k *clusterKind[object, request]) String() string {
	return fmt.Sprintf("kind source: %T in cluster %q", k.obj, k.cluster)
}
