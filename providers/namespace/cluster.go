package namespace

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
)

// VirtualNamespace is the namespace in which a virtual cluster's namespaced
// objects appear.
const VirtualNamespace = metav1.NamespaceDefault

// virtualCluster is the cluster.Cluster of one namespace.
type virtualCluster struct {
	p         *Provider
	namespace string // the backing namespace, which names the cluster
	scope     *scope

	client    *nsClient
	apiReader *nsReader
	cache     *virtualCache
	started   atomic.Bool

	mu   sync.Mutex
	regs map[*registration]struct{} // nil once the cluster stopped
}

var _ cluster.Cluster = &virtualCluster{}

func newVirtualCluster(p *Provider, ns string) *virtualCluster {
	s := &scope{namespace: ns, typeInfo: p.cl.GetClient()}
	vc := &virtualCluster{p: p, namespace: ns, scope: s, regs: map[*registration]struct{}{}}
	vc.client = &nsClient{nsReader: nsReader{scope: s, r: p.cl.GetClient()}, c: p.cl.GetClient()}
	vc.apiReader = &nsReader{scope: s, r: p.cl.GetAPIReader()}
	vc.cache = &virtualCache{nsReader: nsReader{scope: s, r: p.cl.GetCache()}, vc: vc}
	return vc
}

// Start runs the virtual cluster until ctx ends: the engine ends it when the
// namespace goes, the cluster leaves this replica or is disconnected, or the
// provider stops (each start is of a new view). The shared cache is run by the
// provider; a virtual cluster only holds handler registrations, which Start
// removes when it returns. It may be called once.
func (vc *virtualCluster) Start(ctx context.Context) error {
	if !vc.started.CompareAndSwap(false, true) {
		return fmt.Errorf("cluster %q: %w", vc.namespace, multicluster.ErrAlreadyStarted)
	}
	<-ctx.Done()
	vc.removeHandlers(nil)
	return nil
}

// removeHandlers removes the handlers registered through the cluster's
// informers that match; a nil match removes all of them and stops the
// cluster: no handler can be registered after.
func (vc *virtualCluster) removeHandlers(match func(*registration) bool) {
	var removed []*registration
	vc.mu.Lock()
	for r := range vc.regs {
		if match == nil || match(r) {
			delete(vc.regs, r)
			removed = append(removed, r)
		}
	}
	if match == nil {
		vc.regs = nil
	}
	vc.mu.Unlock()
	for _, r := range removed {
		r.d.remove(r)
	}
}

// stopped reports whether the cluster has stopped.
func (vc *virtualCluster) stopped() bool {
	vc.mu.Lock()
	defer vc.mu.Unlock()
	return vc.regs == nil
}

// track records r until the cluster stops. A cluster that stopped meanwhile
// removes it at once.
func (vc *virtualCluster) track(r *registration) error {
	vc.mu.Lock()
	if vc.regs != nil {
		vc.regs[r] = struct{}{}
		vc.mu.Unlock()
		return nil
	}
	vc.mu.Unlock()
	r.d.remove(r)
	return errStopped
}

// untrack forgets r.
func (vc *virtualCluster) untrack(r *registration) {
	vc.mu.Lock()
	defer vc.mu.Unlock()
	delete(vc.regs, r)
}

// GetHTTPClient returns the shared API server's HTTP client. Requests made
// with it are not mapped into the namespace.
func (vc *virtualCluster) GetHTTPClient() *http.Client { return vc.p.cl.GetHTTPClient() }

// GetConfig returns the shared API server's config. Clients built from it
// are not mapped into the namespace; use GetClient for that.
func (vc *virtualCluster) GetConfig() *rest.Config { return vc.p.cl.GetConfig() }

// GetCache returns the cluster's view of the shared cache.
func (vc *virtualCluster) GetCache() cache.Cache { return vc.cache }

// GetScheme returns the shared cluster's scheme.
func (vc *virtualCluster) GetScheme() *runtime.Scheme { return vc.p.cl.GetScheme() }

// GetClient returns a client mapped into the namespace.
func (vc *virtualCluster) GetClient() client.Client { return vc.client }

// GetFieldIndexer returns the provider's indexer: an index is registered
// once on the shared cache and serves every virtual cluster.
func (vc *virtualCluster) GetFieldIndexer() client.FieldIndexer { return vc.p }

// GetRESTMapper returns the shared cluster's REST mapper.
func (vc *virtualCluster) GetRESTMapper() meta.RESTMapper { return vc.p.cl.GetRESTMapper() }

// GetAPIReader returns an uncached reader mapped into the namespace.
func (vc *virtualCluster) GetAPIReader() client.Reader { return vc.apiReader }

// GetEventRecorderFor returns a recorder (core/v1 Events) whose events land
// in the backing namespace.
func (vc *virtualCluster) GetEventRecorderFor(name string) record.EventRecorder {
	//lint:ignore SA1019 cluster.Cluster still requires the old events API; we map it, not use it.
	return &legacyRecorder{vc: vc, r: vc.p.cl.GetEventRecorderFor(name)}
}

// GetEventRecorder returns a recorder (events.k8s.io/v1) whose events land in
// the backing namespace.
func (vc *virtualCluster) GetEventRecorder(name string) recorder.EventRecorder {
	return &eventsRecorder{vc: vc, r: vc.p.cl.GetEventRecorder(name)}
}

// errOutsideNamespace is why a recorder drops an event.
var errOutsideNamespace = errors.New("the object is outside the virtual cluster's namespace")

// toBacking returns obj as the shared API server knows it, for recorders: a
// copy in the backing namespace if it is in the virtual one. An object of
// another namespace, or a cluster-scoped one, is refused: its Event would land
// in a namespace that belongs to another virtual cluster (Events about
// cluster-scoped objects go to the server's "default" namespace).
func (vc *virtualCluster) toBacking(obj runtime.Object) (runtime.Object, error) {
	switch o := obj.(type) {
	case nil:
		return nil, nil
	case *corev1.ObjectReference:
		switch o.Namespace {
		case vc.namespace:
			return o, nil
		case VirtualNamespace:
			c := *o
			c.Namespace = vc.namespace
			return &c, nil
		}
		return nil, fmt.Errorf("%w: %s %q in namespace %q", errOutsideNamespace, o.Kind, o.Name, o.Namespace)
	case client.Object:
		namespaced, err := vc.scope.namespaced(o)
		if err != nil {
			return nil, fmt.Errorf("event about %T %q: %w", o, o.GetName(), err)
		}
		switch {
		case !namespaced:
			return nil, fmt.Errorf("%w: cluster-scoped %T %q", errOutsideNamespace, o, o.GetName())
		case o.GetNamespace() == vc.namespace:
			return o, nil
		case o.GetNamespace() == VirtualNamespace || o.GetNamespace() == "":
			c := o.DeepCopyObject().(client.Object)
			c.SetNamespace(vc.namespace)
			return c, nil
		}
		return nil, fmt.Errorf("%w: %T %q in namespace %q", errOutsideNamespace, o, o.GetName(), o.GetNamespace())
	}
	return nil, fmt.Errorf("%w: %T is not a Kubernetes object", errOutsideNamespace, obj)
}

// mapEvent maps an event's objects into the backing namespace, or logs and
// counts why the event is dropped.
func (vc *virtualCluster) mapEvent(reason string, objs ...runtime.Object) ([]runtime.Object, bool) {
	out := make([]runtime.Object, len(objs))
	for i, obj := range objs {
		mapped, err := vc.toBacking(obj)
		if err != nil {
			droppedEvents.Inc()
			vc.p.log.Error(err, "Dropped an event recorded through a virtual cluster's recorder", "cluster", vc.namespace, "reason", reason)
			return nil, false
		}
		out[i] = mapped
	}
	return out, true
}

// droppedEvents counts the events virtual clusters' recorders refuse.
var droppedEvents = prometheus.NewCounter(prometheus.CounterOpts{
	Name: "multicluster_namespace_dropped_events_total",
	Help: "Events recorded through a namespace virtual cluster's recorder about an object outside its namespace, dropped.",
})

func init() { metrics.Registry.MustRegister(droppedEvents) }

// legacyRecorder records core/v1 Events in the backing namespace.
type legacyRecorder struct {
	vc *virtualCluster
	r  record.EventRecorder
}

var _ record.EventRecorder = &legacyRecorder{}

// Event records an event about object.
func (l *legacyRecorder) Event(object runtime.Object, eventtype, reason, message string) {
	if objs, ok := l.vc.mapEvent(reason, object); ok {
		l.r.Event(objs[0], eventtype, reason, message)
	}
}

// Eventf records a formatted event about object.
func (l *legacyRecorder) Eventf(object runtime.Object, eventtype, reason, messageFmt string, args ...any) {
	if objs, ok := l.vc.mapEvent(reason, object); ok {
		l.r.Eventf(objs[0], eventtype, reason, messageFmt, args...)
	}
}

// AnnotatedEventf records a formatted, annotated event about object.
func (l *legacyRecorder) AnnotatedEventf(object runtime.Object, annotations map[string]string, eventtype, reason, messageFmt string, args ...any) {
	if objs, ok := l.vc.mapEvent(reason, object); ok {
		l.r.AnnotatedEventf(objs[0], annotations, eventtype, reason, messageFmt, args...)
	}
}

// eventsRecorder records events.k8s.io/v1 Events in the backing namespace.
type eventsRecorder struct {
	vc *virtualCluster
	r  recorder.EventRecorder
}

var _ recorder.EventRecorder = &eventsRecorder{}

// Eventf records an event about regarding.
func (e *eventsRecorder) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	if objs, ok := e.vc.mapEvent(reason, regarding, related); ok {
		e.r.Eventf(objs[0], objs[1], eventtype, reason, action, note, args...)
	}
}

// AnnotatedEventf records an annotated event about regarding.
func (e *eventsRecorder) AnnotatedEventf(regarding, related runtime.Object, annotations map[string]string, eventtype, reason, action, note string, args ...any) {
	if objs, ok := e.vc.mapEvent(reason, regarding, related); ok {
		e.r.AnnotatedEventf(objs[0], objs[1], annotations, eventtype, reason, action, note, args...)
	}
}

// virtualCache is a virtual cluster's view of the shared cache: reads are
// mapped into the namespace, informers are per-namespace views.
type virtualCache struct {
	nsReader
	vc *virtualCluster
}

var _ cache.Cache = &virtualCache{}

// GetInformer returns the cluster's informer for obj's type, a view of the
// shared informer. For a namespaced type it delivers only the namespace's
// objects, in namespace "default". For a cluster-scoped type it delivers every
// object unchanged: cluster-scoped objects are shared by all virtual clusters.
// Either way, handlers registered through it are removed when the virtual
// cluster stops.
func (c *virtualCache) GetInformer(ctx context.Context, obj client.Object, opts ...cache.InformerGetOption) (cache.Informer, error) {
	namespaced, err := c.namespaced(obj)
	if err != nil {
		return nil, err
	}
	key, err := c.informerKey(obj)
	if err != nil {
		return nil, err
	}
	inf, err := c.r.(cache.Cache).GetInformer(ctx, obj, opts...)
	if err != nil {
		return nil, err
	}
	d, err := c.vc.p.dispatchers.get(key, inf)
	if err != nil {
		return nil, err
	}
	s := &scopedInformer{Informer: inf, vc: c.vc, d: d}
	if namespaced {
		s.ns = c.vc.namespace
	}
	return s, nil
}

func (c *virtualCache) informerKey(obj client.Object) (informerKey, error) {
	gvk, err := apiutil.GVKForObject(obj, c.vc.GetScheme())
	return informerKey{gvk: gvk, typ: reflect.TypeOf(obj)}, err
}

// GetInformerForKind is GetInformer for a GroupVersionKind; kinds the scheme
// does not know are watched as unstructured objects.
func (c *virtualCache) GetInformerForKind(ctx context.Context, gvk schema.GroupVersionKind, opts ...cache.InformerGetOption) (cache.Informer, error) {
	obj, err := c.vc.GetScheme().New(gvk)
	if err != nil {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(gvk)
		obj = u
	}
	o, ok := obj.(client.Object)
	if !ok {
		return nil, fmt.Errorf("%s is not a client.Object", gvk)
	}
	return c.GetInformer(ctx, o, opts...)
}

// RemoveInformer removes the handlers the cluster registered for obj's type.
// The shared informer serves every virtual cluster and stays.
func (c *virtualCache) RemoveInformer(_ context.Context, obj client.Object) error {
	key, err := c.informerKey(obj)
	if err != nil {
		return err
	}
	c.vc.removeHandlers(func(r *registration) bool { return r.d.key == key })
	return nil
}

// Start is an error: the shared cache is started by the provider, never
// through a virtual cluster.
func (c *virtualCache) Start(context.Context) error {
	return fmt.Errorf("cluster %q: %w", c.namespace, errCacheStart)
}

var errCacheStart = errors.New("the cache of a namespace virtual cluster is the provider's shared cache, which the provider starts; it cannot be started through a virtual cluster")

// WaitForCacheSync waits until every informer the cluster registered on has
// delivered its initial list, on their completion signals: not for the whole
// shared cache, whose other informers serve other clusters, and without
// controller-runtime's 100 ms polling. It returns false if ctx ends first.
func (c *virtualCache) WaitForCacheSync(ctx context.Context) bool {
	c.vc.mu.Lock()
	regs := make([]*registration, 0, len(c.vc.regs))
	for r := range c.vc.regs {
		regs = append(regs, r)
	}
	c.vc.mu.Unlock()
	for _, r := range regs {
		select {
		case <-r.HasSyncedChecker().Done():
		case <-ctx.Done():
			return false
		}
	}
	return ctx.Err() == nil
}

// IndexField registers an index once on the shared cache, for every virtual
// cluster (see Provider.IndexField).
func (c *virtualCache) IndexField(ctx context.Context, obj client.Object, field string, extract client.IndexerFunc) error {
	return c.vc.p.IndexField(ctx, obj, field, extract)
}
