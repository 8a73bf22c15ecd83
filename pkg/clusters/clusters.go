package clusters

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/mcruntime/multicluster-runtime/pkg/fleet"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
)

// Clusters keeps a provider's clusters. The zero value is ready to use; embed
// it by value. All methods are safe for concurrent use, and none holds a lock
// while waiting on the network, so a provider may add many clusters at once.
//
// Handed the Multi-Cluster Manager (a fleet.Publisher), Clusters has no
// lifecycle of its own: each cluster is published to the fleet engine as a
// pre-built member, which the engine starts, syncs, engages, probes, replaces
// and tears down as it does every member; Get answers what the engine has
// engaged. Handed any other multicluster.Aware (a test's tracker), Clusters
// starts each cluster itself, waits for its cache and engages it, one
// engagement of a name at a time.
type Clusters[T cluster.Cluster] struct {
	// CacheSyncTimeout bounds how long Add waits for a cluster's cache to sync
	// (and, with the manager, to be engaged) before giving up on it. Defaults
	// to fleet.DefaultCacheSyncTimeout, the manager's: one default for every
	// start of a cluster.
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
	// cluster that stopped running on its own, and is removed; with the
	// manager, a failed attempt of the fleet engine after Add returned, which
	// the engine logs), with a message and key-value pairs naming the
	// cluster, as logr's Error takes them. Unset: they are logged at error
	// level.
	ErrorHandler func(err error, msg string, keysAndValues ...any)

	mu       sync.Mutex
	clusters map[multicluster.ClusterName]*entry[T]   // the newest entry of each name
	engaged  map[multicluster.ClusterName]*entry[T]   // the entry aware holds (own engagements only)
	live     map[multicluster.ClusterName][]*entry[T] // every running entry of each name, oldest first
	indexes  []index
	locks    map[multicluster.ClusterName]*nameLock
}

type entry[T cluster.Cluster] struct {
	cl     T
	ctx    context.Context
	cancel context.CancelFunc
	pub    fleet.Publisher // set when the fleet engine runs the cluster
}

type index struct {
	obj     client.Object
	field   string
	extract client.IndexerFunc
}

// New returns an empty Clusters.
func New[T cluster.Cluster]() Clusters[T] {
	return Clusters[T]{}
}

// ErrClusterExists is returned, wrapped, by Add for a name already present.
var ErrClusterExists = errors.New("cluster already exists")

// Add starts cl under name and engages it with aware. It returns once the
// cluster is engaged, or with an error naming the cluster if its cache did not
// sync in time or aware refused it; the cluster is then stopped and forgotten.
// With the manager, it reports the outcome of its own publication (see
// fleet.Member.Outcome), whatever the engine still does for the name (a
// removal being torn down, a fence being acquired), and returns at once only
// while this replica does not run the cluster (the manager has not started,
// or sharding assigns it elsewhere): the engine engages it when it may. ctx
// bounds the cluster's life: when it ends, the cluster stops and is removed.
func (c *Clusters[T]) Add(ctx context.Context, name multicluster.ClusterName, cl T, aware multicluster.Aware) error {
	c.mu.Lock()
	if _, ok := c.clusters[name]; ok {
		c.mu.Unlock()
		return multicluster.WithCluster(name, ErrClusterExists)
	}
	return c.insertAndRun(ctx, name, cl, aware)
}

// AddOrReplace is Add, except that a cluster already present under name is
// replaced: the new one is started and engaged first, then the old one (and
// any older replacement still starting) is stopped. If the new one fails, the
// one engaged before stays engaged (with the manager, the engine keeps trying
// the new one, as it does for any member it could not start). When
// replacements overlap, the newest wins. Re-adding the same instance (or an
// equal one, see EqualClusters) does nothing.
func (c *Clusters[T]) AddOrReplace(ctx context.Context, name multicluster.ClusterName, cl T, aware multicluster.Aware) error {
	c.mu.Lock()
	if old, ok := c.clusters[name]; ok && sameCluster(c.EqualClusters, old.cl, cl) && old.ctx.Err() == nil {
		c.mu.Unlock()
		return nil
	}
	return c.insertAndRun(ctx, name, cl, aware)
}

// insertAndRun makes cl the newest entry of name and runs it. The caller
// holds c.mu, which it releases.
func (c *Clusters[T]) insertAndRun(ctx context.Context, name multicluster.ClusterName, cl T, aware multicluster.Aware) error {
	if c.clusters == nil {
		c.clusters = map[multicluster.ClusterName]*entry[T]{}
		c.engaged = map[multicluster.ClusterName]*entry[T]{}
		c.live = map[multicluster.ClusterName][]*entry[T]{}
	}
	cctx, cancel := context.WithCancel(ctx)
	e := &entry[T]{cl: cl, ctx: cctx, cancel: cancel}
	e.pub, _ = aware.(fleet.Publisher)
	c.clusters[name] = e
	c.live[name] = append(c.live[name], e)
	indexes := slices.Clone(c.indexes)
	c.mu.Unlock()
	// Whoever stops the cluster, it is forgotten.
	context.AfterFunc(cctx, func() { c.forget(name, e) })

	// Each index is applied once, before the cluster's cache starts.
	for _, idx := range indexes {
		if err := cl.GetFieldIndexer().IndexField(cctx, idx.obj, idx.field, idx.extract); err != nil {
			c.forget(name, e)
			return multicluster.WithCluster(name, fmt.Errorf("indexing %T by %q: %w", idx.obj, idx.field, err))
		}
	}
	if e.pub != nil {
		return c.publish(name, e)
	}
	return c.engage(name, e, aware)
}

// forget stops e and takes it out of the maps now, not when the
// cancellation's AfterFunc gets to run: a caller must not find a cluster that
// failed. Unless replaced meanwhile, a published cluster leaves the fleet
// engine too (under the lock, so after any newer decision for the name).
func (c *Clusters[T]) forget(name multicluster.ClusterName, e *entry[T]) {
	e.cancel()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.clusters[name] == e {
		delete(c.clusters, name)
		if e.pub != nil {
			e.pub.RemoveMember(name)
		}
	}
	if c.engaged[name] == e {
		delete(c.engaged, name)
	}
	if c.live[name] = slices.DeleteFunc(c.live[name], func(o *entry[T]) bool { return o == e }); len(c.live[name]) == 0 {
		delete(c.live, name)
	}
}

// syncTimeout is CacheSyncTimeout with its default.
func (c *Clusters[T]) syncTimeout() time.Duration {
	switch {
	case c.CacheSyncTimeout > 0:
		return c.CacheSyncTimeout
	case c.WaitCacheTimeout > 0:
		return c.WaitCacheTimeout
	}
	return fleet.DefaultCacheSyncTimeout
}

// publish hands e's cluster to the fleet engine as a pre-built member and
// waits for the outcome of that publication (fleet.Member.Outcome).
func (c *Clusters[T]) publish(name multicluster.ClusterName, e *entry[T]) error {
	outcome := make(chan error, 1)
	var returned atomic.Bool
	member := fleet.Member{Name: name, Hash: fmt.Sprintf("%p", any(e.cl)), Cluster: e.cl, Outcome: outcome, Report: func(err error) {
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
	e.pub.SetMember(member)
	c.mu.Unlock()

	timer := time.NewTimer(c.syncTimeout())
	defer timer.Stop()
	var err error
	select {
	case err = <-outcome:
	case <-e.ctx.Done():
		err = fmt.Errorf("removed while starting: %w", context.Cause(e.ctx))
	case <-timer.C:
		err = fmt.Errorf("not engaged within %s", c.syncTimeout())
	}
	if err != nil {
		if _, engaged := e.pub.Lookup(name); !engaged || e.ctx.Err() != nil {
			c.forget(name, e) // nothing engaged under name: all or nothing
		}
		return multicluster.WithCluster(name, err)
	}
	c.stopOlder(name, e)
	return nil
}

// stopOlder stops the entries of name added before e, now replaced by it.
func (c *Clusters[T]) stopOlder(name multicluster.ClusterName, e *entry[T]) {
	c.mu.Lock()
	live := slices.Clone(c.live[name])
	c.mu.Unlock()
	for _, o := range live {
		if o == e {
			return
		}
		o.cancel()
	}
}

// engage starts e's cluster, waits for its cache and engages it with aware,
// for an aware that is not the manager. Starting runs concurrently for any
// number of clusters; engaging is serialized per name, and only the newest
// entry of a name engages, so that what aware saw last for a name is what
// Get returns.
func (c *Clusters[T]) engage(name multicluster.ClusterName, e *entry[T], aware multicluster.Aware) error {
	if err := c.start(name, e); err != nil {
		defer c.lockName(name)()
		c.fallBack(name, e, nil)
		return err
	}
	defer c.lockName(name)()
	c.mu.Lock()
	current := c.clusters[name] == e
	c.mu.Unlock()
	if !current || e.ctx.Err() != nil {
		c.forget(name, e)
		return multicluster.WithCluster(name, errors.New("replaced or removed while starting"))
	}
	if err := aware.Engage(e.ctx, name, e.cl); err != nil {
		c.fallBack(name, e, aware)
		// Named once: aware's own naming of it is taken off, by type.
		return multicluster.WithCluster(name, err)
	}
	c.mu.Lock()
	c.engaged[name] = e
	c.mu.Unlock()
	c.stopOlder(name, e)
	return nil
}

// fallBack stops failed and, if no newer entry took its name, makes the
// entry engaged before it current again; aware, if set, may have replaced
// that one with failed already, and engages it again. The caller holds
// name's lock.
func (c *Clusters[T]) fallBack(name multicluster.ClusterName, failed *entry[T], aware multicluster.Aware) {
	c.mu.Lock()
	prev := c.engaged[name]
	if c.clusters[name] != failed || prev == nil || prev.ctx.Err() != nil {
		c.mu.Unlock()
		c.forget(name, failed)
		return
	}
	c.clusters[name] = prev
	c.mu.Unlock()
	c.forget(name, failed)
	if aware != nil {
		if err := aware.Engage(prev.ctx, name, prev.cl); err != nil {
			c.forget(name, prev) // broken as well: nothing to fall back to
		}
	}
}

// start starts e's cluster and waits, bounded, for its cache.
func (c *Clusters[T]) start(name multicluster.ClusterName, e *entry[T]) error {
	startErr := make(chan error, 1)
	go func() {
		// The one goroutine per cluster: cluster.Start blocks while it runs.
		err := e.cl.Start(e.ctx)
		// Its informers have stopped: let go of the idle connections they used,
		// so that a removed cluster leaves no connection goroutines behind.
		if hc := e.cl.GetHTTPClient(); hc != nil {
			hc.CloseIdleConnections()
		}
		startErr <- err
		if e.ctx.Err() == nil {
			// The cluster died while it should run: its cache serves nothing
			// any more. Removing it disengages it, loudly.
			c.handleError(errOrStopped(err), "Cluster stopped running; removing it", "cluster", name)
			c.forget(name, e)
		}
	}()
	ctx, cancel := context.WithTimeout(e.ctx, c.syncTimeout())
	defer cancel()
	synced := make(chan bool, 1)
	go func() { synced <- e.cl.GetCache().WaitForCacheSync(ctx) }()
	select {
	case ok := <-synced:
		if !ok {
			return multicluster.WithCluster(name, fmt.Errorf("cache did not sync: %w", context.Cause(ctx)))
		}
		return nil
	case err := <-startErr:
		cancel()
		<-synced
		return multicluster.WithCluster(name, fmt.Errorf("cluster stopped before its cache synced: %w", errOrStopped(err)))
	}
}

func errOrStopped(err error) error {
	if err == nil {
		return errors.New("cluster.Start returned")
	}
	return err
}

// lockName serializes engagements of one name; unrelated names never wait.
func (c *Clusters[T]) lockName(name multicluster.ClusterName) (unlock func()) {
	c.mu.Lock()
	if c.locks == nil {
		c.locks = map[multicluster.ClusterName]*nameLock{}
	}
	l := c.locks[name]
	if l == nil {
		l = &nameLock{}
		c.locks[name] = l
	}
	l.refs++
	c.mu.Unlock()
	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		c.mu.Lock()
		if l.refs--; l.refs == 0 {
			delete(c.locks, name)
		}
		c.mu.Unlock()
	}
}

type nameLock struct {
	mu   sync.Mutex
	refs int // holders and waiters; guarded by Clusters.mu
}

// Remove stops and forgets the named cluster, which disengages it (and
// removes it from the fleet engine). Removing an unknown name does nothing.
func (c *Clusters[T]) Remove(name multicluster.ClusterName) {
	c.mu.Lock()
	if e := c.clusters[name]; e != nil && e.pub != nil {
		e.pub.RemoveMember(name)
	}
	delete(c.clusters, name)
	// Replacements in flight go too, and whatever they would have replaced.
	running := slices.Clone(c.live[name])
	c.mu.Unlock()
	for _, e := range running {
		e.cancel()
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

// Lookup returns the named cluster with its concrete type: with the manager,
// the one the fleet engine has engaged.
func (c *Clusters[T]) Lookup(name multicluster.ClusterName) (T, bool) {
	c.mu.Lock()
	e, ok := c.clusters[name]
	c.mu.Unlock()
	var zero T
	switch {
	case !ok:
		return zero, false
	case e.pub == nil:
		return e.cl, true
	}
	cl, ok := e.pub.Lookup(name)
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
// added later; each cluster gets each index exactly once.
func (c *Clusters[T]) IndexField(ctx context.Context, obj client.Object, field string, extract client.IndexerFunc) error {
	c.mu.Lock()
	c.indexes = append(c.indexes, index{obj: obj, field: field, extract: extract})
	present := make(map[multicluster.ClusterName]T, len(c.clusters))
	for name, e := range c.clusters {
		present[name] = e.cl
	}
	c.mu.Unlock()

	var errs []error
	for name, cl := range present {
		if err := cl.GetFieldIndexer().IndexField(ctx, obj, field, extract); err != nil {
			errs = append(errs, multicluster.WithCluster(name, fmt.Errorf("indexing %T by %q: %w", obj, field, err)))
		}
	}
	return errors.Join(errs...)
}
