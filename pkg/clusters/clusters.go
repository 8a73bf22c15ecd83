package clusters

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
)

// DefaultCacheSyncTimeout bounds the wait for a new cluster's cache when
// Clusters.CacheSyncTimeout is zero. It applies to Clusters only: members
// published through Members are synced by the fleet engine, within
// fleet.DefaultCacheSyncTimeout (2 minutes; mcmanager.WithClusterStartTimeout).
const DefaultCacheSyncTimeout = 30 * time.Second

// Clusters keeps a provider's clusters and runs their lifecycle. The zero value
// is ready to use; embed it by value. All methods are safe for concurrent use,
// and none holds a lock while waiting on the network, so a provider may add
// many clusters at once.
type Clusters[T cluster.Cluster] struct {
	// CacheSyncTimeout bounds how long Add waits for a cluster's cache to sync
	// before giving up on it. Defaults to DefaultCacheSyncTimeout.
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
	// cluster that stopped running on its own, and is removed), with a
	// message and key-value pairs naming the cluster, as logr's Error takes
	// them. Unset: they are logged at error level.
	ErrorHandler func(err error, msg string, keysAndValues ...any)

	mu       sync.RWMutex
	clusters map[multicluster.ClusterName]*entry[T]   // the current entry of each name
	live     map[multicluster.ClusterName][]*entry[T] // every running entry of each name, oldest first
	seq      uint64
	indexes  []index

	nameLocks map[multicluster.ClusterName]*nameLock
}

type entry[T cluster.Cluster] struct {
	cl     T
	ctx    context.Context
	cancel context.CancelFunc
	seq    uint64 // order of insertion: older entries of a name have lower ones
	// engaged is set once aware accepted the entry; guarded by Clusters.mu.
	engaged bool
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
// ctx bounds the cluster's life: when it ends, the cluster stops and is removed.
func (c *Clusters[T]) Add(ctx context.Context, name multicluster.ClusterName, cl T, aware multicluster.Aware) error {
	c.mu.Lock()
	if _, ok := c.clusters[name]; ok {
		c.mu.Unlock()
		return multicluster.WithCluster(name, ErrClusterExists)
	}
	e, indexes := c.insertLocked(ctx, name, cl)
	c.mu.Unlock()
	return c.run(name, e, indexes, aware)
}

// AddOrReplace is Add, except that a cluster already present under name is
// replaced: the new one is started and engaged first, then the old one (and
// any older replacement still starting) is stopped. If the new one fails, the
// newest older one still running stays, engaged again. When replacements
// overlap, the newest wins. Re-adding the same instance does nothing.
func (c *Clusters[T]) AddOrReplace(ctx context.Context, name multicluster.ClusterName, cl T, aware multicluster.Aware) error {
	c.mu.Lock()
	if old, ok := c.clusters[name]; ok && c.equal(old.cl, cl) && old.ctx.Err() == nil {
		c.mu.Unlock()
		return nil
	}
	e, indexes := c.insertLocked(ctx, name, cl)
	c.mu.Unlock()
	return c.run(name, e, indexes, aware)
}

func (c *Clusters[T]) insertLocked(ctx context.Context, name multicluster.ClusterName, cl T) (*entry[T], []index) {
	if c.clusters == nil {
		c.clusters = map[multicluster.ClusterName]*entry[T]{}
		c.live = map[multicluster.ClusterName][]*entry[T]{}
	}
	cctx, cancel := context.WithCancel(ctx)
	c.seq++
	e := &entry[T]{cl: cl, ctx: cctx, cancel: cancel, seq: c.seq}
	c.clusters[name] = e
	c.live[name] = append(c.live[name], e)
	// Whoever stops the cluster, it leaves the maps, unless replaced meanwhile.
	context.AfterFunc(cctx, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.clusters[name] == e {
			delete(c.clusters, name)
		}
		live := slices.DeleteFunc(c.live[name], func(o *entry[T]) bool { return o == e })
		if len(live) == 0 {
			delete(c.live, name)
		} else {
			c.live[name] = live
		}
	})
	return e, slices.Clone(c.indexes)
}

// run starts the cluster of e, waits for its cache, then engages it, and
// settles what it replaces. Starting runs concurrently for any number of
// clusters; engaging is serialized per name, and only the current entry of a
// name engages, so that what aware saw last for a name is always what Get
// returns.
func (c *Clusters[T]) run(name multicluster.ClusterName, e *entry[T], indexes []index, aware multicluster.Aware) error {
	if err := c.start(name, e, indexes); err != nil {
		c.drop(name, e)
		c.fallBack(name, e, aware)
		return err
	}

	unlock := c.lockName(name)
	defer unlock()
	c.mu.RLock()
	current := c.clusters[name] == e
	c.mu.RUnlock()
	if !current || e.ctx.Err() != nil {
		c.drop(name, e)
		return multicluster.WithCluster(name, errors.New("replaced or removed while starting"))
	}
	if err := aware.Engage(e.ctx, name, e.cl); err != nil {
		c.drop(name, e)
		c.fallBackLocked(name, e, aware)
		// Named once: aware's own naming of it (a controller's or the
		// engine's) is taken off, by type, not by reading the message.
		return multicluster.WithCluster(name, err)
	}
	c.mu.Lock()
	e.engaged = true
	older := c.liveLocked(name, func(o *entry[T]) bool { return o.seq < e.seq })
	c.mu.Unlock()
	for _, o := range older {
		o.cancel()
	}
	return nil
}

// start applies the indexes, starts the cluster and waits for its cache.
func (c *Clusters[T]) start(name multicluster.ClusterName, e *entry[T], indexes []index) error {
	for _, idx := range indexes {
		if err := e.cl.GetFieldIndexer().IndexField(e.ctx, idx.obj, idx.field, idx.extract); err != nil {
			return multicluster.WithCluster(name, fmt.Errorf("indexing %T by %q: %w", idx.obj, idx.field, err))
		}
	}

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
			// any more. Removing it disengages it from the fleet, loudly.
			c.handleError(errOrStopped(err), "Cluster stopped running; removing it", "cluster", name)
			c.drop(name, e)
		}
	}()

	timeout := c.CacheSyncTimeout
	if timeout <= 0 {
		timeout = c.WaitCacheTimeout
	}
	if timeout <= 0 {
		timeout = DefaultCacheSyncTimeout
	}
	syncCtx, cancel := context.WithTimeout(e.ctx, timeout)
	defer cancel()
	if err := waitForCache(syncCtx, e.cl.GetCache(), indexes, startErr); err != nil {
		return multicluster.WithCluster(name, err)
	}
	return nil
}

// drop stops e and forgets it now, not when the cancellation's AfterFunc gets
// to run: a caller must not find a cluster that failed.
func (c *Clusters[T]) drop(name multicluster.ClusterName, e *entry[T]) {
	c.mu.Lock()
	if c.clusters[name] == e {
		delete(c.clusters, name)
	}
	c.mu.Unlock()
	e.cancel()
}

// fallBack is fallBackLocked for a caller that does not hold name's lock.
func (c *Clusters[T]) fallBack(name multicluster.ClusterName, failed *entry[T], aware multicluster.Aware) {
	unlock := c.lockName(name)
	defer unlock()
	c.fallBackLocked(name, failed, aware)
}

// fallBackLocked makes the newest entry older than failed current again, if
// no newer one took the name. An engaged one is engaged again: aware may have
// replaced it with failed already. The caller holds name's lock.
func (c *Clusters[T]) fallBackLocked(name multicluster.ClusterName, failed *entry[T], aware multicluster.Aware) {
	c.mu.Lock()
	if _, taken := c.clusters[name]; taken {
		c.mu.Unlock()
		return
	}
	older := c.liveLocked(name, func(o *entry[T]) bool { return o.seq < failed.seq })
	if len(older) == 0 {
		c.mu.Unlock()
		return
	}
	o := older[len(older)-1]
	c.clusters[name] = o
	engaged := o.engaged
	c.mu.Unlock()
	if engaged {
		if err := aware.Engage(o.ctx, name, o.cl); err != nil {
			c.drop(name, o) // broken as well: nothing to fall back to
		}
	}
}

// liveLocked returns the running entries of name that keep says to, oldest first.
func (c *Clusters[T]) liveLocked(name multicluster.ClusterName, keep func(*entry[T]) bool) []*entry[T] {
	var out []*entry[T]
	for _, o := range c.live[name] {
		if o.ctx.Err() == nil && keep(o) {
			out = append(out, o)
		}
	}
	return out
}

// lockName serializes engagements of one name; unrelated names never wait.
func (c *Clusters[T]) lockName(name multicluster.ClusterName) (unlock func()) {
	c.mu.Lock()
	if c.nameLocks == nil {
		c.nameLocks = map[multicluster.ClusterName]*nameLock{}
	}
	l := c.nameLocks[name]
	if l == nil {
		l = &nameLock{}
		c.nameLocks[name] = l
	}
	l.refs++
	c.mu.Unlock()
	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		c.mu.Lock()
		if l.refs--; l.refs == 0 {
			delete(c.nameLocks, name)
		}
		c.mu.Unlock()
	}
}

type nameLock struct {
	mu   sync.Mutex
	refs int // holders and waiters; guarded by Clusters.mu
}

// waitForCache waits until the cache has started and the informers created for
// indexes have synced. It waits on notifications, not a polling interval.
func waitForCache(ctx context.Context, c cache.Cache, indexes []index, startErr <-chan error) error {
	for _, idx := range indexes {
		informer, err := c.GetInformer(ctx, idx.obj, cache.BlockUntilSynced(false))
		if err != nil {
			return fmt.Errorf("getting informer for %T: %w", idx.obj, err)
		}
		select {
		case <-informer.HasSyncedChecker().Done():
		case err := <-startErr:
			return fmt.Errorf("cluster stopped while its cache was syncing: %w", errOrStopped(err))
		case <-ctx.Done():
			return fmt.Errorf("cache for %T did not sync: %w", idx.obj, ctx.Err())
		}
	}
	// With every informer synced this returns as soon as the cache has started.
	synced := make(chan bool, 1)
	go func() { synced <- c.WaitForCacheSync(ctx) }()
	select {
	case ok := <-synced:
		if !ok {
			return fmt.Errorf("cache did not sync: %w", context.Cause(ctx))
		}
		return nil
	case err := <-startErr:
		return fmt.Errorf("cluster stopped before its cache synced: %w", errOrStopped(err))
	}
}

func errOrStopped(err error) error {
	if err == nil {
		return errors.New("cluster.Start returned")
	}
	return err
}

// Remove stops and forgets the named cluster, which disengages it. Removing an
// unknown name does nothing.
func (c *Clusters[T]) Remove(name multicluster.ClusterName) {
	c.mu.Lock()
	delete(c.clusters, name)
	// Replacements in flight go too, and whatever they would have replaced.
	running := c.liveLocked(name, func(*entry[T]) bool { return true })
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

// Lookup returns the named cluster with its concrete type.
func (c *Clusters[T]) Lookup(name multicluster.ClusterName) (T, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	e, ok := c.clusters[name]
	if !ok {
		var zero T
		return zero, false
	}
	return e.cl, true
}

// ClusterNames returns the names of the clusters present, sorted.
func (c *Clusters[T]) ClusterNames() []multicluster.ClusterName {
	c.mu.RLock()
	names := make([]multicluster.ClusterName, 0, len(c.clusters))
	for name := range c.clusters {
		names = append(names, name)
	}
	c.mu.RUnlock()
	slices.Sort(names)
	return names
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
