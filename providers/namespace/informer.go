package namespace

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
)

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
		return nil, fmt.Errorf("%s: resync periods are not supported by namespace virtual clusters", v.d.key.gvk)
	}
	if h == nil {
		return nil, fmt.Errorf("%s: nil event handler", v.d.key.gvk)
	}
	if v.vc.ctx.Err() != nil {
		return nil, errStopped
	}
	r := &registration{view: v, handler: h}
	v.mu.Lock()
	v.regs[r] = struct{}{}
	v.mu.Unlock()
	if err := v.d.add(v.vc.namespace, r); err != nil {
		v.mu.Lock()
		delete(v.regs, r)
		v.mu.Unlock()
		return nil, err
	}
	// The cluster may have stopped meanwhile; its cleanup may have missed r.
	if v.vc.ctx.Err() != nil {
		v.removeAll()
		return nil, errStopped
	}
	return r, nil
}

// RemoveEventHandler unregisters a handler added to this informer.
func (v *viewInformer) RemoveEventHandler(handle toolscache.ResourceEventHandlerRegistration) error {
	r, ok := handle.(*registration)
	if !ok || r.view != v {
		return fmt.Errorf("%s: registration %T was not made on this informer", v.d.key.gvk, handle)
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
	return fmt.Errorf("%s: AddIndexers is not supported on a namespace virtual cluster's informer; use GetFieldIndexer().IndexField, which indexes the shared cache once for all virtual clusters", v.d.key.gvk)
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
		return nil, err
	}
	s.mu.Lock()
	s.regs[reg] = struct{}{}
	s.mu.Unlock()
	if s.vc.ctx.Err() != nil {
		s.removeAll()
		return nil, errStopped
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
	return errors.New("AddIndexers is not supported on a shared cluster-scoped informer of a namespace virtual cluster; use GetFieldIndexer().IndexField")
}

// IsStopped reports whether the shared informer or the virtual cluster stopped.
func (s *clusterScopedInformer) IsStopped() bool {
	return s.vc.ctx.Err() != nil || s.Informer.IsStopped()
}
