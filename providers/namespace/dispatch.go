package namespace

import (
	"fmt"
	"reflect"
	"slices"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// informerKey identifies one informer of the shared cache: controller-runtime
// keeps one per GroupVersionKind and form (typed objects, unstructured objects,
// metadata only), which the object's Go type tells apart.
type informerKey struct {
	gvk schema.GroupVersionKind
	typ reflect.Type
}

// dispatcher is the single event handler registered on one informer of the
// shared cache, for every virtual cluster. It routes every event by the
// object's namespace, a map lookup: for a namespaced type, to the handlers
// that namespace's virtual cluster registered, the object copied into
// namespace "default"; no other virtual cluster sees the event. Objects of a
// cluster-scoped type have no namespace, and every virtual cluster's handlers
// of such a type are filed under "": they all take every event, the shared
// objects unchanged.
//
// mu is held while handlers are called, by the informer's one delivery
// goroutine and by add's replay of a namespace's objects: handlers are called
// one event at a time, as client-go calls one registration, and a replay is
// never overtaken by a live event. A handler may remove registrations from
// within a callback; it must not add one to the same type.
type dispatcher struct {
	key      informerKey
	informer cache.Informer
	indexer  toolscache.Indexer // the informer's store
	reg      toolscache.ResourceEventHandlerRegistration

	mu   sync.Mutex
	byNS map[string][]*registration
}

// newDispatcher registers a dispatcher on informer.
func newDispatcher(key informerKey, informer cache.Informer) (*dispatcher, error) {
	i, ok := informer.(interface{ GetIndexer() toolscache.Indexer })
	if !ok {
		return nil, fmt.Errorf("informer for %s is a %T, which does not expose its indexer", key.gvk, informer)
	}
	d := &dispatcher{key: key, informer: informer, indexer: i.GetIndexer(), byNS: map[string][]*registration{}}
	reg, err := informer.AddEventHandlerWithOptions(d, toolscache.HandlerOptions{})
	if err != nil {
		return nil, fmt.Errorf("registering the namespace dispatcher for %s: %w", key.gvk, err)
	}
	d.reg = reg
	return d, nil
}

// deliver passes an event about obj to the live handlers of its namespace.
// The event is made only when there is a handler to take it: virtualizing an
// object copies it.
func (d *dispatcher) deliver(obj any, event func() func(toolscache.ResourceEventHandler)) {
	d.mu.Lock()
	defer d.mu.Unlock()
	handlers := d.byNS[namespaceOf(obj)]
	if len(handlers) == 0 {
		return
	}
	send := event()
	for _, r := range handlers {
		if !r.removed.Load() {
			send(r.handler)
		}
	}
}

// OnAdd implements toolscache.ResourceEventHandler.
func (d *dispatcher) OnAdd(obj any, isInInitialList bool) {
	d.deliver(obj, func() func(toolscache.ResourceEventHandler) {
		v := virtualize(obj)
		return func(h toolscache.ResourceEventHandler) { h.OnAdd(v, isInInitialList) }
	})
}

// OnUpdate implements toolscache.ResourceEventHandler.
func (d *dispatcher) OnUpdate(oldObj, newObj any) {
	d.deliver(newObj, func() func(toolscache.ResourceEventHandler) {
		o, n := virtualize(oldObj), virtualize(newObj)
		return func(h toolscache.ResourceEventHandler) { h.OnUpdate(o, n) }
	})
}

// OnDelete implements toolscache.ResourceEventHandler.
func (d *dispatcher) OnDelete(obj any) {
	d.deliver(obj, func() func(toolscache.ResourceEventHandler) {
		v := virtualize(obj)
		return func(h toolscache.ResourceEventHandler) { h.OnDelete(v) }
	})
}

// add registers r and replays the current objects of its namespace (all
// objects of a cluster-scoped type) to it as the initial list, before any
// later event reaches it. An object already in the informer's
// store whose own notification is still queued reaches r twice (in the
// initial list, then as that notification), never out of order; controllers,
// being level-based, do not mind.
func (d *dispatcher) add(r *registration) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	objs, err := d.indexer.ByIndex(toolscache.NamespaceIndex, r.ns)
	if err != nil {
		return fmt.Errorf("listing %s in namespace %q: %w", d.key.gvk, r.ns, err)
	}
	for _, obj := range objs {
		r.handler.OnAdd(virtualize(obj), true)
	}
	d.byNS[r.ns] = append(d.byNS[r.ns], r)
	return nil
}

// remove unregisters r. Once it returns, r's handler is not called again,
// even if remove is called from within a callback.
func (d *dispatcher) remove(r *registration) {
	if r.removed.Swap(true) {
		return
	}
	if !d.mu.TryLock() {
		// A delivery is under way, possibly on this very goroutine: it skips
		// r from now on; drop r from the list once it is over.
		go func() {
			d.mu.Lock()
			defer d.mu.Unlock()
			d.removeLocked(r)
		}()
		return
	}
	defer d.mu.Unlock()
	d.removeLocked(r)
}

func (d *dispatcher) removeLocked(r *registration) {
	handlers := d.byNS[r.ns]
	switch i := slices.Index(handlers, r); {
	case i < 0:
	case len(handlers) == 1:
		delete(d.byNS, r.ns)
	default:
		d.byNS[r.ns] = slices.Delete(handlers, i, i+1)
	}
}

// namespaceOf returns the namespace of an informer's object or tombstone
// (whose key names it even when its last state is unknown).
func namespaceOf(obj any) string {
	switch o := obj.(type) {
	case metav1.Object:
		return o.GetNamespace()
	case toolscache.DeletedFinalStateUnknown:
		ns, _, _ := toolscache.SplitMetaNamespaceKey(o.Key)
		return ns
	}
	return ""
}

// virtualize returns a copy of an informer object as the virtual cluster sees
// it: in namespace "default". The shared informer's object is never modified.
// A cluster-scoped object, shared by every virtual cluster, is returned as it
// is.
func virtualize(obj any) any {
	switch o := obj.(type) {
	case client.Object:
		if o.GetNamespace() == "" {
			return obj
		}
		c := o.DeepCopyObject().(client.Object)
		c.SetNamespace(VirtualNamespace)
		return c
	case toolscache.DeletedFinalStateUnknown:
		ns, name, _ := toolscache.SplitMetaNamespaceKey(o.Key)
		if ns == "" {
			return obj
		}
		return toolscache.DeletedFinalStateUnknown{Key: VirtualNamespace + "/" + name, Obj: virtualize(o.Obj)}
	}
	return obj
}

// dispatchers are the provider's dispatchers, one per informer of the shared
// cache, created when a virtual cluster first asks for an informer.
type dispatchers struct {
	mu sync.Mutex
	m  map[informerKey]*dispatcher
}

// get returns the dispatcher of the shared informer of key, registering one
// on first use.
func (ds *dispatchers) get(key informerKey, informer cache.Informer) (*dispatcher, error) {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	if d, ok := ds.m[key]; ok {
		return d, nil
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
