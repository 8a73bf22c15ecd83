package clusters

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"

	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
)

// Registry records clusters by name. Added to a manager (mgr.Add(registry))
// it is an Aware runnable: the manager engages it with every cluster of the
// fleet, as it engages controllers, and each cluster stays recorded while its
// engagement lasts. It starts nothing: the clusters it records are run by
// whoever engaged them. Code that is not a controller (an aggregator, an
// HTTP handler) reads the fleet from it with Get, ClusterNames, ForEach and
// Range.
// Clusters may also be recorded from code with Add and AddOrReplace.
//
// All methods are safe for concurrent use.
type Registry[T cluster.Cluster] struct {
	// EqualClusters, if set, tells AddOrReplace, Engage and RemoveIfEqual
	// that two clusters are the same one (see the function EqualClusters).
	// Unset: only the same instance is.
	EqualClusters func(a, b T) bool

	mu       sync.RWMutex
	clusters map[multicluster.ClusterName]*registered[T]
}

// registered is one recording of a cluster: a new one per Engage or Add, so
// that the end of an older engagement never removes a newer one.
type registered[T cluster.Cluster] struct{ cl T }

// NewRegistry returns an empty Registry.
func NewRegistry[T cluster.Cluster]() *Registry[T] {
	return &Registry[T]{}
}

var (
	_ multicluster.Aware             = &Registry[cluster.Cluster]{}
	_ manager.Runnable               = &Registry[cluster.Cluster]{}
	_ manager.LeaderElectionRunnable = &Registry[cluster.Cluster]{}
	_ interface {
		ClusterNames() []multicluster.ClusterName
	} = &Registry[cluster.Cluster]{}
)

// Engage records cl under name until ctx ends. A cluster that is not a T is
// refused with an error naming it. Engaging a name again replaces its
// cluster unless the two are equal (EqualClusters).
func (r *Registry[T]) Engage(ctx context.Context, name multicluster.ClusterName, cl cluster.Cluster) error {
	typed, ok := cl.(T)
	if !ok {
		var want T
		return multicluster.WithCluster(name, fmt.Errorf("registry of %T: cluster is a %T", want, cl))
	}
	if err := ctx.Err(); err != nil {
		return multicluster.WithCluster(name, fmt.Errorf("registry: engagement already ended: %w", err))
	}
	rec := r.put(name, typed)
	context.AfterFunc(ctx, func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.clusters[name] == rec { // not replaced since
			delete(r.clusters, name)
		}
	})
	return nil
}

// Start runs until ctx ends, and then forgets every cluster: the manager runs
// the registry so that it is engaged with the fleet.
func (r *Registry[T]) Start(ctx context.Context) error {
	<-ctx.Done()
	r.mu.Lock()
	r.clusters = nil
	r.mu.Unlock()
	return nil
}

// NeedLeaderElection is false: every replica records the clusters it runs.
func (r *Registry[T]) NeedLeaderElection() bool { return false }

// Add records cl under name, or returns an error wrapping ErrClusterExists if
// the name is recorded already (upstream's shape). ctx is not kept: a record
// made with Add lasts until Remove, RemoveIfEqual or the registry's end; an
// ended ctx refuses the cluster.
func (r *Registry[T]) Add(ctx context.Context, name multicluster.ClusterName, cl T) error {
	if err := ctx.Err(); err != nil {
		return multicluster.WithCluster(name, fmt.Errorf("registry: %w", err))
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.clusters[name]; ok {
		return multicluster.WithCluster(name, ErrClusterExists)
	}
	if r.clusters == nil {
		r.clusters = map[multicluster.ClusterName]*registered[T]{}
	}
	r.clusters[name] = &registered[T]{cl: cl}
	return nil
}

// AddOrReplace records cl under name, replacing the cluster recorded under it
// unless the two are equal (EqualClusters). Its only error is an ended ctx,
// which records nothing; ctx is not kept (see Add).
func (r *Registry[T]) AddOrReplace(ctx context.Context, name multicluster.ClusterName, cl T) error {
	if err := ctx.Err(); err != nil {
		return multicluster.WithCluster(name, fmt.Errorf("registry: %w", err))
	}
	r.put(name, cl)
	return nil
}

// put records cl under name and returns its record: the present one if it is
// equal.
func (r *Registry[T]) put(name multicluster.ClusterName, cl T) *registered[T] {
	r.mu.Lock()
	defer r.mu.Unlock()
	if old, ok := r.clusters[name]; ok && sameCluster(r.EqualClusters, old.cl, cl) {
		return old
	}
	if r.clusters == nil {
		r.clusters = map[multicluster.ClusterName]*registered[T]{}
	}
	rec := &registered[T]{cl: cl}
	r.clusters[name] = rec
	return rec
}

// Remove forgets the cluster recorded under name, if any.
func (r *Registry[T]) Remove(name multicluster.ClusterName) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.clusters, name)
}

// RemoveIfEqual forgets the cluster recorded under name only if it equals cl
// (EqualClusters): a caller that lost a cluster does not remove the one that
// replaced it. CompareAndRemove does the same and reports whether it removed.
func (r *Registry[T]) RemoveIfEqual(name multicluster.ClusterName, cl T) {
	r.CompareAndRemove(name, cl)
}

// CompareAndRemove is RemoveIfEqual reporting whether it removed the cluster.
func (r *Registry[T]) CompareAndRemove(name multicluster.ClusterName, cl T) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if old, ok := r.clusters[name]; ok && sameCluster(r.EqualClusters, old.cl, cl) {
		delete(r.clusters, name)
		return true
	}
	return false
}

// Get returns the cluster recorded under name, or an error wrapping
// multicluster.ErrClusterNotFound.
func (r *Registry[T]) Get(ctx context.Context, name multicluster.ClusterName) (cluster.Cluster, error) {
	cl, err := r.GetTyped(ctx, name)
	if err != nil {
		return nil, err
	}
	return cl, nil
}

// GetTyped is Get with the cluster's concrete type.
func (r *Registry[T]) GetTyped(_ context.Context, name multicluster.ClusterName) (T, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	rec, ok := r.clusters[name]
	if !ok {
		var zero T
		return zero, multicluster.WithCluster(name, multicluster.ErrClusterNotFound)
	}
	return rec.cl, nil
}

// ClusterNames returns the names recorded, sorted.
func (r *Registry[T]) ClusterNames() []multicluster.ClusterName {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return slices.Sorted(maps.Keys(r.clusters))
}

// ForEach calls fn for each cluster recorded, in the order of their names,
// until fn returns an error, which ForEach returns (upstream's shape). fn runs
// without the registry's lock: it may call the registry, and sees the
// clusters recorded when ForEach was called.
func (r *Registry[T]) ForEach(fn func(name multicluster.ClusterName, cl T) error) error {
	var err error
	r.Range(func(name multicluster.ClusterName, cl T) bool {
		err = fn(name, cl)
		return err == nil
	})
	return err
}

// Range calls fn for each cluster recorded, in the order of their names,
// until fn returns false; as ForEach, without the registry's lock.
func (r *Registry[T]) Range(fn func(name multicluster.ClusterName, cl T) bool) {
	r.mu.RLock()
	snapshot := make(map[multicluster.ClusterName]T, len(r.clusters))
	for name, rec := range r.clusters {
		snapshot[name] = rec.cl
	}
	r.mu.RUnlock()
	for _, name := range slices.Sorted(maps.Keys(snapshot)) {
		if !fn(name, snapshot[name]) {
			return
		}
	}
}
