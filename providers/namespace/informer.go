package namespace

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
)

// registration is a handler registered on a virtual cluster's informer,
// delivered by the type's dispatcher.
type registration struct {
	d       *dispatcher
	ns      string // the namespace d files it under: "" for a cluster-scoped type
	handler toolscache.ResourceEventHandler
	removed atomic.Bool
}

var _ toolscache.ResourceEventHandlerRegistration = &registration{}

// HasSynced reports whether the shared informer has delivered its initial
// list; the namespace's share of it was delivered when r was added.
func (r *registration) HasSynced() bool { return r.d.reg.HasSynced() }

// HasSyncedChecker is the done-checker form of HasSynced.
func (r *registration) HasSyncedChecker() toolscache.DoneChecker { return r.d.reg.HasSyncedChecker() }

// scopedInformer is one virtual cluster's informer for one type, a view of
// the shared informer through its dispatcher. For a namespaced type it
// delivers only the cluster's namespace's objects, in namespace "default".
// For a cluster-scoped type it delivers every object unchanged: cluster-scoped
// objects are shared by all virtual clusters. Either way, the handlers
// registered through it are removed when the virtual cluster stops.
type scopedInformer struct {
	cache.Informer // the shared informer
	vc             *virtualCluster
	d              *dispatcher
	ns             string // what its registrations are filed under
}

var _ cache.Informer = &scopedInformer{}

// AddEventHandler registers h.
func (s *scopedInformer) AddEventHandler(h toolscache.ResourceEventHandler) (toolscache.ResourceEventHandlerRegistration, error) {
	return s.AddEventHandlerWithOptions(h, toolscache.HandlerOptions{})
}

// AddEventHandlerWithResyncPeriod registers h. Periodic resync is not
// supported on a virtual cluster; a non-zero period is an error.
func (s *scopedInformer) AddEventHandlerWithResyncPeriod(h toolscache.ResourceEventHandler, resync time.Duration) (toolscache.ResourceEventHandlerRegistration, error) {
	return s.AddEventHandlerWithOptions(h, toolscache.HandlerOptions{ResyncPeriod: &resync})
}

// AddEventHandlerWithOptions registers h until the virtual cluster stops. The
// current objects it is for are delivered to it as its initial list before it
// returns. Periodic resync is not supported on a virtual cluster; a non-zero
// period is an error.
func (s *scopedInformer) AddEventHandlerWithOptions(h toolscache.ResourceEventHandler, opts toolscache.HandlerOptions) (toolscache.ResourceEventHandlerRegistration, error) {
	if opts.ResyncPeriod != nil && *opts.ResyncPeriod != 0 {
		return nil, fmt.Errorf("%s: resync periods are not supported by namespace virtual clusters", s.d.key.gvk)
	}
	if h == nil {
		return nil, fmt.Errorf("%s: nil event handler", s.d.key.gvk)
	}
	if s.vc.stopped() {
		return nil, errStopped
	}
	r := &registration{d: s.d, ns: s.ns, handler: h}
	if err := s.d.add(r); err != nil {
		return nil, err
	}
	if err := s.vc.track(r); err != nil {
		return nil, err
	}
	return r, nil
}

// RemoveEventHandler unregisters a handler added to this informer.
func (s *scopedInformer) RemoveEventHandler(reg toolscache.ResourceEventHandlerRegistration) error {
	r, ok := reg.(*registration)
	if !ok || r.d != s.d {
		return fmt.Errorf("%s: registration %T was not made on this informer", s.d.key.gvk, reg)
	}
	s.vc.untrack(r)
	s.d.remove(r) // idempotent: it may have been removed already
	return nil
}

// AddIndexers is not supported: indexers of the shared informer would apply
// to every virtual cluster. Use the cluster's GetFieldIndexer instead.
func (s *scopedInformer) AddIndexers(toolscache.Indexers) error {
	return errors.New("AddIndexers is not supported on a namespace virtual cluster's informer; use GetFieldIndexer().IndexField, which indexes the shared cache once for all virtual clusters")
}

// IsStopped reports whether the shared informer or the virtual cluster stopped.
func (s *scopedInformer) IsStopped() bool { return s.vc.stopped() || s.Informer.IsStopped() }

var errStopped = errors.New("the namespace virtual cluster has stopped")
