package namespace

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// objectForm tells apart the informers controller-runtime keeps for one
// GroupVersionKind: typed objects, unstructured objects and metadata only.
type objectForm int

const (
	formTyped objectForm = iota
	formUnstructured
	formMetadata
)

// informerKey identifies one informer of the shared cache.
type informerKey struct {
	gvk  schema.GroupVersionKind
	form objectForm
}

func formOf(obj client.Object) objectForm {
	switch obj.(type) {
	case *metav1.PartialObjectMetadata:
		return formMetadata
	case interface{ UnstructuredContent() map[string]any }:
		return formUnstructured
	}
	return formTyped
}

// dispatcher is the single event handler registered on one informer of the
// shared cache. It routes every event by the object's namespace, a map
// lookup, to the handlers that virtual cluster registered; no other virtual
// cluster sees the event.
type dispatcher struct {
	key      informerKey
	informer cache.Informer
	list     func(namespace string) ([]any, error) // the informer's objects in a namespace
	reg      toolscache.ResourceEventHandlerRegistration

	mu   sync.RWMutex
	byNS map[string]*nsHandlers
}

// nsHandlers are the handlers of one namespace's virtual cluster. mu
// serialises their calls, as client-go does for one registration. A handler
// may remove registrations from within a callback; it must not add one for
// the same namespace from within a callback.
type nsHandlers struct {
	mu       sync.Mutex
	handlers []*registration
	dropped  bool // removed from the dispatcher's map; a new one takes over
}

// newDispatcher registers a dispatcher on informer.
func newDispatcher(key informerKey, informer cache.Informer) (*dispatcher, error) {
	d := &dispatcher{key: key, informer: informer, byNS: map[string]*nsHandlers{}}
	switch i := informer.(type) {
	case interface{ GetIndexer() toolscache.Indexer }:
		indexer := i.GetIndexer()
		d.list = func(ns string) ([]any, error) { return indexer.ByIndex(toolscache.NamespaceIndex, ns) }
	default:
		return nil, fmt.Errorf("informer for %s is a %T, which does not expose its indexer", key.gvk, informer)
	}
	reg, err := informer.AddEventHandlerWithOptions(d, toolscache.HandlerOptions{})
	if err != nil {
		return nil, fmt.Errorf("registering the namespace dispatcher for %s: %w", key.gvk, err)
	}
	d.reg = reg
	return d, nil
}

func (d *dispatcher) handlersFor(ns string) *nsHandlers {
	d.mu.RLock()
	h := d.byNS[ns]
	d.mu.RUnlock()
	return h
}

// OnAdd implements toolscache.ResourceEventHandler.
func (d *dispatcher) OnAdd(obj any, isInInitialList bool) {
	h := d.handlersFor(namespaceOf(obj))
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.handlers) == 0 {
		return
	}
	v := virtualize(obj)
	for _, r := range h.handlers {
		if !r.removed.Load() {
			r.handler.OnAdd(v, isInInitialList)
		}
	}
}

// OnUpdate implements toolscache.ResourceEventHandler.
func (d *dispatcher) OnUpdate(oldObj, newObj any) {
	h := d.handlersFor(namespaceOf(newObj))
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.handlers) == 0 {
		return
	}
	o, n := virtualize(oldObj), virtualize(newObj)
	for _, r := range h.handlers {
		if !r.removed.Load() {
			r.handler.OnUpdate(o, n)
		}
	}
}

// OnDelete implements toolscache.ResourceEventHandler.
func (d *dispatcher) OnDelete(obj any) {
	h := d.handlersFor(namespaceOf(obj))
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.handlers) == 0 {
		return
	}
	v := virtualize(obj)
	for _, r := range h.handlers {
		if !r.removed.Load() {
			r.handler.OnDelete(v)
		}
	}
}

// add registers r for namespace ns and replays the namespace's current
// objects to it as the initial list, before any later event of the namespace
// reaches it.
func (d *dispatcher) add(ns string, r *registration) error {
	// Lock order: d.mu is never held while waiting for h.mu.
	var h *nsHandlers
	for {
		d.mu.Lock()
		h = d.byNS[ns]
		if h == nil {
			h = &nsHandlers{}
			d.byNS[ns] = h
		}
		d.mu.Unlock()
		h.mu.Lock()
		if !h.dropped {
			break
		}
		h.mu.Unlock() // its last handler left meanwhile: take the next one
	}
	defer h.mu.Unlock()

	objs, err := d.list(ns)
	if err != nil {
		d.dropIfEmptyLocked(ns, h)
		return fmt.Errorf("listing %s in namespace %q: %w", d.key.gvk, ns, err)
	}
	for _, obj := range objs {
		r.handler.OnAdd(virtualize(obj), true)
	}
	h.handlers = append(slices.Clip(h.handlers), r)
	return nil
}

// remove unregisters r. Once it returns, r's handler is not called again,
// even if remove is called from within one of the namespace's callbacks.
func (d *dispatcher) remove(ns string, r *registration) {
	if r.removed.Swap(true) {
		return
	}
	h := d.handlersFor(ns)
	if h == nil {
		return
	}
	if !h.mu.TryLock() {
		// A delivery is under way, possibly on this very goroutine: it skips
		// r from now on; drop r from the list once it is over.
		go d.removeLocked(ns, h, r, true)
		return
	}
	d.removeLocked(ns, h, r, false)
}

func (d *dispatcher) removeLocked(ns string, h *nsHandlers, r *registration, lock bool) {
	if lock {
		h.mu.Lock()
	}
	defer h.mu.Unlock()
	if i := slices.Index(h.handlers, r); i >= 0 {
		h.handlers = slices.Delete(slices.Clone(h.handlers), i, i+1)
		d.dropIfEmptyLocked(ns, h)
	}
}

// dropIfEmptyLocked forgets h once it has no handlers; h.mu is held.
func (d *dispatcher) dropIfEmptyLocked(ns string, h *nsHandlers) {
	if len(h.handlers) > 0 {
		return
	}
	h.dropped = true
	d.mu.Lock()
	if d.byNS[ns] == h {
		delete(d.byNS, ns)
	}
	d.mu.Unlock()
}

// namespaces returns how many namespaces have handlers; for tests.
func (d *dispatcher) namespaces() int {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return len(d.byNS)
}

func namespaceOf(obj any) string {
	switch o := obj.(type) {
	case metav1.Object:
		return o.GetNamespace()
	case toolscache.DeletedFinalStateUnknown:
		if m, ok := o.Obj.(metav1.Object); ok {
			return m.GetNamespace()
		}
		ns, _, _ := toolscache.SplitMetaNamespaceKey(o.Key)
		return ns
	}
	return ""
}

// virtualize returns a copy of an informer object as the virtual cluster sees
// it: in namespace "default". The shared informer's object is never modified.
func virtualize(obj any) any {
	switch o := obj.(type) {
	case client.Object:
		c := o.DeepCopyObject().(client.Object)
		c.SetNamespace(VirtualNamespace)
		return c
	case toolscache.DeletedFinalStateUnknown:
		_, name, _ := toolscache.SplitMetaNamespaceKey(o.Key)
		return toolscache.DeletedFinalStateUnknown{Key: VirtualNamespace + "/" + name, Obj: virtualize(o.Obj)}
	}
	return obj
}

// registration is a handler registered on a virtual cluster's informer.
type registration struct {
	view    *viewInformer
	handler toolscache.ResourceEventHandler
	removed atomic.Bool
}

var _ toolscache.ResourceEventHandlerRegistration = &registration{}

// HasSynced reports whether the shared informer has delivered its initial
// list; the namespace's share of it was delivered when r was added.
func (r *registration) HasSynced() bool { return r.view.d.reg.HasSynced() }

// HasSyncedChecker is the done-checker form of HasSynced.
func (r *registration) HasSyncedChecker() toolscache.DoneChecker {
	return r.view.d.reg.HasSyncedChecker()
}

// viewInformer is one virtual cluster's informer for one type: a view of the
// shared informer limited to the cluster's namespace, whose objects appear in
// namespace "default".
type viewInformer struct {
	vc *virtualCluster
	d  *dispatcher

	mu   sync.Mutex
	regs map[*registration]struct{}
}

var (
	_ cache.Informer = &viewInformer{}
	_ cache.Informer = &clusterScopedInformer{}
)

// AddEventHandler registers h for the namespace's objects.
func (v *viewInformer) AddEventHandler(h toolscache.ResourceEventHandler) (toolscache.ResourceEventHandlerRegistration, error) {
	return v.AddEventHandlerWithOptions(h, toolscache.HandlerOptions{})
}

// AddEventHandlerWithResyncPeriod registers h. Periodic resync is not
// supported on a virtual cluster; a non-zero period is an error.
func (v *viewInformer) AddEventHandlerWithResyncPeriod(h toolscache.ResourceEventHandler, resync time.Duration) (toolscache.ResourceEventHandlerRegistration, error) {
	return v.AddEventHandlerWithOptions(h, toolscache.HandlerOptions{ResyncPeriod: &resync})
}

// AddEventHandlerWithOptions registers h. The namespace's current objects
// are delivered to it as its initial list before it returns. Periodic resync
// is not supported on a virtual cluster; a non-zero period is an error.
func (v *viewInformer) AddEventHandlerWithOptions(h toolscache.ResourceEventHandler, opts toolscache.HandlerOptions) (toolscache.ResourceEventHandlerRegistration, error) {
	if opts.ResyncPeriod != nil && *opts.ResyncPeriod != 0 {
		return nil, fmt.Errorf("cluster %q: %s: resync periods are not supported by namespace virtual clusters", v.vc.name, v.d.key.gvk)
	}
	if h == nil {
		return nil, fmt.Errorf("cluster %q: %s: nil event handler", v.vc.name, v.d.key.gvk)
	}
	if v.vc.ctx.Err() != nil {
		return nil, fmt.Errorf("cluster %q: %w", v.vc.name, errStopped)
	}
	r := &registration{view: v, handler: h}
	v.mu.Lock()
	v.regs[r] = struct{}{}
	v.mu.Unlock()
	if err := v.d.add(v.vc.namespace, r); err != nil {
		v.mu.Lock()
		delete(v.regs, r)
		v.mu.Unlock()
		return nil, fmt.Errorf("cluster %q: %w", v.vc.name, err)
	}
	// The cluster may have stopped meanwhile; its cleanup may have missed r.
	if v.vc.ctx.Err() != nil {
		v.removeAll()
		return nil, fmt.Errorf("cluster %q: %w", v.vc.name, errStopped)
	}
	return r, nil
}

// RemoveEventHandler unregisters a handler added to this informer.
func (v *viewInformer) RemoveEventHandler(handle toolscache.ResourceEventHandlerRegistration) error {
	r, ok := handle.(*registration)
	if !ok || r.view != v {
		return fmt.Errorf("cluster %q: %s: registration %T was not made on this informer", v.vc.name, v.d.key.gvk, handle)
	}
	v.mu.Lock()
	delete(v.regs, r)
	v.mu.Unlock()
	v.d.remove(v.vc.namespace, r)
	return nil
}

// removeAll unregisters every handler of this view.
func (v *viewInformer) removeAll() {
	v.mu.Lock()
	regs := v.regs
	v.regs = map[*registration]struct{}{}
	v.mu.Unlock()
	for r := range regs {
		v.d.remove(v.vc.namespace, r)
	}
}

// AddIndexers is not supported: indexers of the shared informer would apply
// to every virtual cluster. Use the cluster's GetFieldIndexer instead.
func (v *viewInformer) AddIndexers(toolscache.Indexers) error {
	return fmt.Errorf("cluster %q: %s: AddIndexers is not supported on a namespace virtual cluster's informer; use GetFieldIndexer().IndexField, which indexes the shared cache once for all virtual clusters", v.vc.name, v.d.key.gvk)
}

// HasSynced reports whether the shared informer has synced.
func (v *viewInformer) HasSynced() bool { return v.d.informer.HasSynced() }

// HasSyncedChecker is the done-checker form of HasSynced.
func (v *viewInformer) HasSyncedChecker() toolscache.DoneChecker {
	return v.d.informer.HasSyncedChecker()
}

// IsStopped reports whether the shared informer or the virtual cluster stopped.
func (v *viewInformer) IsStopped() bool { return v.vc.ctx.Err() != nil || v.d.informer.IsStopped() }

var errStopped = errors.New("the namespace virtual cluster has stopped")

// dispatchers are the provider's dispatchers, one per informer of the shared
// cache, created when a virtual cluster first asks for an informer.
type dispatchers struct {
	cache cache.Cache

	mu sync.Mutex
	m  map[informerKey]*dispatcher
}

// get returns the dispatcher for obj's informer, creating the informer and
// the dispatcher on first use.
func (ds *dispatchers) get(ctx context.Context, key informerKey, obj client.Object) (*dispatcher, error) {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	if d, ok := ds.m[key]; ok {
		return d, nil
	}
	informer, err := ds.cache.GetInformer(ctx, obj, cache.BlockUntilSynced(false))
	if err != nil {
		return nil, err
	}
	d, err := newDispatcher(key, informer)
	if err != nil {
		return nil, err
	}
	if ds.m == nil {
		ds.m = map[informerKey]*dispatcher{}
	}
	ds.m[key] = d
	return d, nil
}

// stop unregisters every dispatcher from the shared cache.
func (ds *dispatchers) stop() {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	for k, d := range ds.m {
		_ = d.informer.RemoveEventHandler(d.reg)
		delete(ds.m, k)
	}
}

// clusterScopedInformer is a virtual cluster's handle on the shared informer
// of a cluster-scoped type: events are delivered unchanged, and the
// handlers registered through it are removed when the virtual cluster stops.
type clusterScopedInformer struct {
	cache.Informer
	vc *virtualCluster

	mu   sync.Mutex
	regs map[toolscache.ResourceEventHandlerRegistration]struct{}
}

// AddEventHandler registers h on the shared informer until the virtual
// cluster stops.
func (s *clusterScopedInformer) AddEventHandler(h toolscache.ResourceEventHandler) (toolscache.ResourceEventHandlerRegistration, error) {
	return s.track(s.Informer.AddEventHandler(h))
}

// AddEventHandlerWithResyncPeriod registers h on the shared informer until
// the virtual cluster stops.
func (s *clusterScopedInformer) AddEventHandlerWithResyncPeriod(h toolscache.ResourceEventHandler, resync time.Duration) (toolscache.ResourceEventHandlerRegistration, error) {
	return s.track(s.Informer.AddEventHandlerWithResyncPeriod(h, resync))
}

// AddEventHandlerWithOptions registers h on the shared informer until the
// virtual cluster stops.
func (s *clusterScopedInformer) AddEventHandlerWithOptions(h toolscache.ResourceEventHandler, opts toolscache.HandlerOptions) (toolscache.ResourceEventHandlerRegistration, error) {
	return s.track(s.Informer.AddEventHandlerWithOptions(h, opts))
}

func (s *clusterScopedInformer) track(reg toolscache.ResourceEventHandlerRegistration, err error) (toolscache.ResourceEventHandlerRegistration, error) {
	if err != nil {
		return nil, fmt.Errorf("cluster %q: %w", s.vc.name, err)
	}
	s.mu.Lock()
	s.regs[reg] = struct{}{}
	s.mu.Unlock()
	if s.vc.ctx.Err() != nil {
		s.removeAll()
		return nil, fmt.Errorf("cluster %q: %w", s.vc.name, errStopped)
	}
	return reg, nil
}

// RemoveEventHandler unregisters a handler from the shared informer.
func (s *clusterScopedInformer) RemoveEventHandler(reg toolscache.ResourceEventHandlerRegistration) error {
	s.mu.Lock()
	delete(s.regs, reg)
	s.mu.Unlock()
	return s.Informer.RemoveEventHandler(reg)
}

func (s *clusterScopedInformer) removeAll() {
	s.mu.Lock()
	regs := s.regs
	s.regs = map[toolscache.ResourceEventHandlerRegistration]struct{}{}
	s.mu.Unlock()
	for reg := range regs {
		_ = s.Informer.RemoveEventHandler(reg)
	}
}

// AddIndexers is not supported: the shared informer serves every virtual
// cluster. Use the cluster's GetFieldIndexer instead.
func (s *clusterScopedInformer) AddIndexers(toolscache.Indexers) error {
	return fmt.Errorf("cluster %q: AddIndexers is not supported on a shared cluster-scoped informer of a namespace virtual cluster; use GetFieldIndexer().IndexField", s.vc.name)
}

// IsStopped reports whether the shared informer or the virtual cluster stopped.
func (s *clusterScopedInformer) IsStopped() bool { return s.vc.ctx.Err() != nil || s.Informer.IsStopped() }
