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
// shared cache. It routes every event by the object's namespace, a map
// lookup, to the handlers that virtual cluster registered; no other virtual
// cluster sees the event.
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

// deliver passes an event of namespace ns to the namespace's live handlers.
// The event is made only when there is a handler to take it: virtualizing an
// object copies it.
func (d *dispatcher) deliver(ns string, event func() func(toolscache.ResourceEventHandler)) {
	d.mu.Lock()
	defer d.mu.Unlock()
	handlers := d.byNS[ns]
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
	d.deliver(namespaceOf(obj), func() func(toolscache.ResourceEventHandler) {
		v := virtualize(obj)
		return func(h toolscache.ResourceEventHandler) { h.OnAdd(v, isInInitialList) }
	})
}

// OnUpdate implements toolscache.ResourceEventHandler.
func (d *dispatcher) OnUpdate(oldObj, newObj any) {
	d.deliver(namespaceOf(newObj), func() func(toolscache.ResourceEventHandler) {
		o, n := virtualize(oldObj), virtualize(newObj)
		return func(h toolscache.ResourceEventHandler) { h.OnUpdate(o, n) }
	})
}

// OnDelete implements toolscache.ResourceEventHandler.
func (d *dispatcher) OnDelete(obj any) {
	d.deliver(namespaceOf(obj), func() func(toolscache.ResourceEventHandler) {
		v := virtualize(obj)
		return func(h toolscache.ResourceEventHandler) { h.OnDelete(v) }
	})
}

// add registers r for namespace ns and replays the namespace's current
// objects to it as the initial list, before any later event of the namespace
// reaches it. An object already in the informer's store whose own
// notification is still queued reaches r twice (in the initial list, then as
// that notification), never out of order; controllers, being level-based, do
// not mind.
func (d *dispatcher) add(ns string, r *registration) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	objs, err := d.indexer.ByIndex(toolscache.NamespaceIndex, ns)
	if err != nil {
		return fmt.Errorf("listing %s in namespace %q: %w", d.key.gvk, ns, err)
	}
	for _, obj := range objs {
		r.handler.OnAdd(virtualize(obj), true)
	}
	d.byNS[ns] = append(d.byNS[ns], r)
	return nil
}

// remove unregisters r. Once it returns, r's handler is not called again,
// even if remove is called from within a callback.
func (d *dispatcher) remove(ns string, r *registration) {
	if r.removed.Swap(true) {
		return
	}
	if !d.mu.TryLock() {
		// A delivery is under way, possibly on this very goroutine: it skips
		// r from now on; drop r from the list once it is over.
		go func() {
			d.mu.Lock()
			defer d.mu.Unlock()
			d.removeLocked(ns, r)
		}()
		return
	}
	defer d.mu.Unlock()
	d.removeLocked(ns, r)
}

func (d *dispatcher) removeLocked(ns string, r *registration) {
	handlers := d.byNS[ns]
	switch i := slices.Index(handlers, r); {
	case i < 0:
	case len(handlers) == 1:
		delete(d.byNS, ns)
	default:
		d.byNS[ns] = slices.Delete(handlers, i, i+1)
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
