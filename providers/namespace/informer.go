package namespace

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
)

// registration is a handler registered on a virtual cluster's view of a
// namespaced type, delivered by the type's dispatcher.
type registration struct {
	d       *dispatcher
	handler toolscache.ResourceEventHandler
	removed atomic.Bool
}

var _ toolscache.ResourceEventHandlerRegistration = &registration{}

// HasSynced reports whether the shared informer has delivered its initial
// list; the namespace's share of it was delivered when r was added.
func (r *registration) HasSynced() bool { return r.d.reg.HasSynced() }

// HasSyncedChecker is the done-checker form of HasSynced.
func (r *registration) HasSyncedChecker() toolscache.DoneChecker { return r.d.reg.HasSyncedChecker() }

// scopedInformer is one virtual cluster's informer for one type. For a
// namespaced type (d is set) it is a view of the shared informer limited to
// the cluster's namespace, whose objects appear in namespace "default". For a
// cluster-scoped type it is the shared informer itself: cluster-scoped
// objects are shared by all virtual clusters. Either way, the handlers
// registered through it are removed when the virtual cluster stops.
type scopedInformer struct {
	cache.Informer // the shared informer
	vc             *virtualCluster
	d              *dispatcher // nil for a cluster-scoped type
}

var _ cache.Informer = &scopedInformer{}

// AddEventHandler registers h.
func (s *scopedInformer) AddEventHandler(h toolscache.ResourceEventHandler) (toolscache.ResourceEventHandlerRegistration, error) {
	return s.AddEventHandlerWithOptions(h, toolscache.HandlerOptions{})
}

// AddEventHandlerWithResyncPeriod registers h. Periodic resync is not
// supported on a namespaced type's view; a non-zero period is an error.
func (s *scopedInformer) AddEventHandlerWithResyncPeriod(h toolscache.ResourceEventHandler, resync time.Duration) (toolscache.ResourceEventHandlerRegistration, error) {
	return s.AddEventHandlerWithOptions(h, toolscache.HandlerOptions{ResyncPeriod: &resync})
}

// AddEventHandlerWithOptions registers h until the virtual cluster stops.
// On a namespaced type's view, the namespace's current objects are delivered
// to it as its initial list before it returns, and periodic resync is not
// supported: a non-zero period is an error.
func (s *scopedInformer) AddEventHandlerWithOptions(h toolscache.ResourceEventHandler, opts toolscache.HandlerOptions) (toolscache.ResourceEventHandlerRegistration, error) {
	if s.vc.stopped() {
		return nil, errStopped
	}
	if s.d == nil {
		reg, err := s.Informer.AddEventHandlerWithOptions(h, opts)
		if err != nil {
			return nil, err
		}
		return s.vc.track(reg, s)
	}
	if opts.ResyncPeriod != nil && *opts.ResyncPeriod != 0 {
		return nil, fmt.Errorf("%s: resync periods are not supported by namespace virtual clusters", s.d.key.gvk)
	}
	if h == nil {
		return nil, fmt.Errorf("%s: nil event handler", s.d.key.gvk)
	}
	r := &registration{d: s.d, handler: h}
	if err := s.d.add(s.vc.namespace, r); err != nil {
		return nil, err
	}
	return s.vc.track(r, s)
}

// RemoveEventHandler unregisters a handler added to this informer.
func (s *scopedInformer) RemoveEventHandler(reg toolscache.ResourceEventHandlerRegistration) error {
	if r, ok := reg.(*registration); s.d != nil && (!ok || r.d != s.d) {
		return fmt.Errorf("%s: registration %T was not made on this informer", s.d.key.gvk, reg)
	}
	s.vc.untrack(reg, s.Informer)
	s.remove(reg) // idempotent: it may have been removed already
	return nil
}

// remove unregisters reg, which was made through s.
func (s *scopedInformer) remove(reg toolscache.ResourceEventHandlerRegistration) {
	if s.d == nil {
		_ = s.Informer.RemoveEventHandler(reg)
	} else {
		s.d.remove(s.vc.namespace, reg.(*registration))
	}
}

// AddIndexers is not supported: indexers of the shared informer would apply
// to every virtual cluster. Use the cluster's GetFieldIndexer instead.
func (s *scopedInformer) AddIndexers(toolscache.Indexers) error {
	return errors.New("AddIndexers is not supported on a namespace virtual cluster's informer; use GetFieldIndexer().IndexField, which indexes the shared cache once for all virtual clusters")
}

// IsStopped reports whether the shared informer or the virtual cluster stopped.
func (s *scopedInformer) IsStopped() bool { return s.vc.stopped() || s.Informer.IsStopped() }

var errStopped = errors.New("the namespace virtual cluster has stopped")
