package clusters

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/mcruntime/multicluster-runtime/pkg/fleet"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
)

// Clusters keeps a provider's clusters. The zero value is ready to use; embed
// it by value. All methods are safe for concurrent use, and none holds a lock
// while waiting on the network, so a provider may add many clusters at once.
//
// Clusters has no lifecycle of its own: each cluster is published to a fleet
// engine as a pre-built member, which the engine starts, syncs, engages,
// probes, replaces and tears down as it does every member; Get answers what
// the engine has engaged. Clusters binds the Aware of its first Add or
// AddOrReplace: the Multi-Cluster Manager's engine, or, for any other
// multicluster.Aware (a test's tracker), an engine of its own for it
// (fleet.DoorFor). A later call with another Aware is an error.
//
// A cluster handed to Clusters is lent to the engine, which never stops it
// while it is wanted: under sharding it is disengaged when it leaves this
// replica and engaged again when it comes back, and its cache keeps running
// meanwhile.
type Clusters[T cluster.Cluster] struct {
	// CacheSyncTimeout bounds how long the start of a cluster waits for its
	// cache to sync, for an Aware that is not the manager (the manager's
	// engine has its own, mcmanager's). Defaults to
	// fleet.DefaultCacheSyncTimeout, the manager's.
	CacheSyncTimeout time.Duration

	// WaitCacheTimeout is the upstream design's name for CacheSyncTimeout,
	// used when CacheSyncTimeout is zero.
	WaitCacheTimeout time.Duration

	// EqualClusters, if set, tells AddOrReplace that a cluster equals the one
	// present under its name, which then stays as it is (the function
	// EqualClusters compares their connection). Unset: only the same
	// instance is equal.
	EqualClusters func(a, b T) bool

	// ErrorHandler, if set, is given the errors nobody else can be given (a
	// failed attempt of the fleet engine after Add returned, which the engine
	// logs), with a message and key-value pairs naming the cluster, as
	// logr's Error takes them.
	ErrorHandler func(err error, msg string, keysAndValues ...any)

	mu       sync.Mutex
	aware    multicluster.Aware // bound by the first Add or AddOrReplace
	door     fleet.Door
	clusters map[multicluster.ClusterName]*entry[T] // the newest entry of each name
	indexes  fleet.Indexes
}

type entry[T cluster.Cluster] struct {
	cl     T
	ctx    context.Context
	cancel context.CancelFunc
}

// New returns an empty Clusters.
func New[T cluster.Cluster]() Clusters[T] {
	return Clusters[T]{}
}

// ErrClusterExists is returned, wrapped, by Add for a name already present.
var ErrClusterExists = errors.New("cluster already exists")

// ErrOtherAware is returned, wrapped, by Add and AddOrReplace given an Aware
// other than the one Clusters is bound to (its first call's).
var ErrOtherAware = errors.New("clusters are bound to another Aware")

// Add hands cl to the fleet engine under name (see Clusters) and reports the
// outcome of that publication (fleet.Member.Outcome): nil once it is
// engaged, or the error of its first failed attempt (a cache that did not
// sync, an Aware that refused it), naming the cluster; the cluster is then
// forgotten. It returns at once while this replica does not run the
// cluster (the manager has not started, or sharding assigns it elsewhere):
// the engine engages it when it may. ctx bounds the cluster's life: when it
// ends, the cluster is removed.
func (c *Clusters[T]) Add(ctx context.Context, name multicluster.ClusterName, cl T, aware multicluster.Aware) error {
	c.mu.Lock()
	if err := c.bindLocked(aware); err != nil {
		c.mu.Unlock()
		return multicluster.WithCluster(name, err)
	}
	if _, ok := c.clusters[name]; ok {
		c.mu.Unlock()
		return multicluster.WithCluster(name, ErrClusterExists)
	}
	return c.insertAndPublish(ctx, name, cl)
}

// AddOrReplace is Add, except that a cluster already present under name is
// replaced: the engine engages the new one first, then stops the old one if
// it started it. If the new one fails, the one engaged before stays engaged
// and the engine keeps trying the new one, as it does for any member it
// could not start. When replacements overlap, the newest wins. Re-adding
// the same instance (or an equal one, see EqualClusters) does nothing.
func (c *Clusters[T]) AddOrReplace(ctx context.Context, name multicluster.ClusterName, cl T, aware multicluster.Aware) error {
	c.mu.Lock()
	if err := c.bindLocked(aware); err != nil {
		c.mu.Unlock()
		return multicluster.WithCluster(name, err)
	}
	if old, ok := c.clusters[name]; ok && sameCluster(c.EqualClusters, old.cl, cl) && old.ctx.Err() == nil {
		c.mu.Unlock()
		return nil
	}
	return c.insertAndPublish(ctx, name, cl)
}

// bindLocked binds c to aware on its first call; later calls must pass the
// same Aware. The caller holds c.mu.
func (c *Clusters[T]) bindLocked(aware multicluster.Aware) error {
	if c.door == nil {
		timeout := c.CacheSyncTimeout
		if timeout <= 0 {
			timeout = c.WaitCacheTimeout
		}
		c.aware = aware
		c.door = fleet.DoorFor(aware, fleet.Options{Logger: logf.Log.WithName("clusters"), CacheSyncTimeout: timeout})
		return nil
	}
	if !sameAware(c.aware, aware) {
		return fmt.Errorf("%w (%T): a Clusters publishes to the Aware of its first call", ErrOtherAware, aware)
	}
	return nil
}

// sameAware reports whether a and b are the same Aware: equal values of a
// comparable type, or the same value behind a pointer-like one.
func sameAware(a, b multicluster.Aware) bool {
	ta, tb := reflect.TypeOf(a), reflect.TypeOf(b)
	if ta != tb {
		return false
	}
	if ta != nil && ta.Comparable() {
		return a == b
	}
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	switch va.Kind() {
	case reflect.Func, reflect.Map, reflect.Slice, reflect.Pointer, reflect.Chan:
		return va.Pointer() == vb.Pointer()
	}
	return false
}

// insertAndPublish makes cl the newest entry of name and publishes it. The
// caller holds c.mu, which it releases.
func (c *Clusters[T]) insertAndPublish(ctx context.Context, name multicluster.ClusterName, cl T) error {
	if c.clusters == nil {
		c.clusters = map[multicluster.ClusterName]*entry[T]{}
	}
	cctx, cancel := context.WithCancel(ctx)
	e := &entry[T]{cl: cl, ctx: cctx, cancel: cancel}
	c.clusters[name] = e
	c.mu.Unlock()
	// Whoever ends the entry, it is forgotten.
	context.AfterFunc(cctx, func() { c.forget(name, e) })
	return c.publish(name, e)
}

// forget ends e and takes it out of the map now, not when the
// cancellation's AfterFunc gets to run: a caller must not find a cluster that
// failed. Unless replaced meanwhile, it leaves the fleet engine too (under
// the lock, so after any newer decision for the name).
func (c *Clusters[T]) forget(name multicluster.ClusterName, e *entry[T]) {
	e.cancel()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.clusters[name] == e {
		delete(c.clusters, name)
		c.door.RemoveMember(name)
	}
}

// publish hands e's cluster to the fleet engine as a pre-built member and
// waits for the outcome of that publication (fleet.Member.Outcome).
func (c *Clusters[T]) publish(name multicluster.ClusterName, e *entry[T]) error {
	outcome := make(chan error, 1)
	var returned atomic.Bool
	member := fleet.Member{Name: name, Hash: fmt.Sprintf("%p", any(e.cl)), Cluster: e.cl, Outcome: outcome, Indexes: &c.indexes, Report: func(err error) {
		// The engine logged it; after Add returned, ErrorHandler, if set,
		// hears of it too.
		if err != nil && returned.Load() && e.ctx.Err() == nil && c.ErrorHandler != nil {
			msg := "The fleet engine failed to start or engage the cluster; it retries"
			if silent := (*fleet.WatchSilentError)(nil); errors.As(err, &silent) {
				msg = "Every watch of the cluster is silent while its API server answers"
			}
			c.ErrorHandler(err, msg, "cluster", name)
		}
	}}
	defer returned.Store(true)
	// Under the lock: what the engine holds for a name is what was decided
	// last for it, whatever the order in which concurrent calls got here.
	c.mu.Lock()
	if c.clusters[name] != e || e.ctx.Err() != nil {
		c.mu.Unlock()
		c.forget(name, e)
		return multicluster.WithCluster(name, errors.New("replaced or removed while starting"))
	}
	door := c.door
	door.SetMember(member)
	c.mu.Unlock()

	// The engine bounds each attempt (its CacheSyncTimeout): its outcome
	// comes, or the entry ends.
	var err error
	select {
	case err = <-outcome:
	case <-e.ctx.Done():
		err = fmt.Errorf("removed while starting: %w", context.Cause(e.ctx))
	}
	if err != nil {
		if _, engaged := door.Lookup(name); !engaged || e.ctx.Err() != nil {
			c.forget(name, e) // nothing engaged under name: all or nothing
		}
		return multicluster.WithCluster(name, err)
	}
	return nil
}

// Remove forgets the named cluster, which disengages it and removes it from
// the fleet engine (which stops it if it started it). Removing an unknown
// name does nothing.
func (c *Clusters[T]) Remove(name multicluster.ClusterName) {
	c.mu.Lock()
	e := c.clusters[name]
	c.mu.Unlock()
	if e != nil {
		c.forget(name, e)
	}
}

// Get returns the named cluster, or an error wrapping
// multicluster.ErrClusterNotFound.
func (c *Clusters[T]) Get(_ context.Context, name multicluster.ClusterName) (cluster.Cluster, error) {
	cl, ok := c.Lookup(name)
	if !ok {
		return nil, multicluster.WithCluster(name, multicluster.ErrClusterNotFound)
	}
	return cl, nil
}

// Lookup returns the named cluster with its concrete type: the one the
// fleet engine has engaged.
func (c *Clusters[T]) Lookup(name multicluster.ClusterName) (T, bool) {
	c.mu.Lock()
	_, ok := c.clusters[name]
	door := c.door
	c.mu.Unlock()
	var zero T
	if !ok {
		return zero, false
	}
	cl, ok := door.Lookup(name)
	if !ok {
		return zero, false
	}
	typed, ok := cl.(T)
	return typed, ok
}

// ClusterNames returns the names of the clusters present, sorted.
func (c *Clusters[T]) ClusterNames() []multicluster.ClusterName {
	c.mu.Lock()
	names := slices.Sorted(maps.Keys(c.clusters))
	c.mu.Unlock()
	return slices.DeleteFunc(names, func(name multicluster.ClusterName) bool {
		_, ok := c.Lookup(name)
		return !ok
	})
}

// IndexField registers an index on every cluster present and every cluster
// added later; each cluster gets each index exactly once, before its cache
// starts if it starts after the index (see fleet.Indexes). It returns the
// errors of the engaged clusters that could not take it.
func (c *Clusters[T]) IndexField(ctx context.Context, obj client.Object, field string, extract client.IndexerFunc) error {
	return c.indexes.Add(ctx, logf.Log.WithName("clusters"), obj, field, extract)
}
