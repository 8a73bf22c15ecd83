package clusters

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
)

// DefaultCacheSyncTimeout bounds the wait for a new cluster's cache when
// Clusters.CacheSyncTimeout is zero.
const DefaultCacheSyncTimeout = 30 * time.Second

// Clusters keeps a provider's clusters and runs their lifecycle. The zero value
// is ready to use; embed it by value. All methods are safe for concurrent use,
// and none holds a lock while waiting on the network, so a provider may add
// many clusters at once.
type Clusters[T cluster.Cluster] struct {
	// CacheSyncTimeout bounds how long Add waits for a cluster's cache to sync
	// before giving up on it. Defaults to DefaultCacheSyncTimeout.
	CacheSyncTimeout time.Duration

	mu       sync.RWMutex
	clusters map[multicluster.ClusterName]*entry[T]
	indexes  []index
}

type entry[T cluster.Cluster] struct {
	cl     T
	ctx    context.Context
	cancel context.CancelFunc
	// replaces is the entry this one replaces while it starts; cleared once
	// it has engaged or failed.
	replaces *entry[T]
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
		return fmt.Errorf("cluster %q: %w", name, ErrClusterExists)
	}
	e, indexes := c.insertLocked(ctx, name, cl)
	c.mu.Unlock()
	return c.run(name, e, indexes, aware)
}

// AddOrReplace is Add, except that a cluster already present under name is
// replaced: the new one is started and engaged first, then the old one is
// stopped. If the new one fails, the old one stays. Re-adding the same
// instance does nothing.
func (c *Clusters[T]) AddOrReplace(ctx context.Context, name multicluster.ClusterName, cl T, aware multicluster.Aware) error {
	c.mu.Lock()
	old, hadOld := c.clusters[name]
	if hadOld && any(old.cl) == any(cl) && old.ctx.Err() == nil {
		c.mu.Unlock()
		return nil
	}
	e, indexes := c.insertLocked(ctx, name, cl)
	if hadOld {
		e.replaces = old
	}
	c.mu.Unlock()

	if err := c.run(name, e, indexes, aware); err != nil {
		// Fall back to the newest predecessor still running, unless a newer
		// replacement took the name meanwhile.
		c.mu.Lock()
		if _, taken := c.clusters[name]; !taken {
			for p := e.replaces; p != nil; p = p.replaces {
				if p.ctx.Err() == nil {
					c.clusters[name] = p
					break
				}
			}
		}
		e.replaces = nil
		c.mu.Unlock()
		return err
	}
	// Stop everything this one replaces, including predecessors whose own
	// replacement is still in flight or failed.
	c.mu.Lock()
	var replaced []*entry[T]
	for p := e.replaces; p != nil; p = p.replaces {
		replaced = append(replaced, p)
	}
	e.replaces = nil
	c.mu.Unlock()
	for _, p := range replaced {
		p.cancel()
	}
	return nil
}

// insertLocked stores a new entry for cl and returns it with the indexes to
// apply to it. Indexes registered afterwards reach it through IndexField.
func (c *Clusters[T]) insertLocked(ctx context.Context, name multicluster.ClusterName, cl T) (*entry[T], []index) {
	if c.clusters == nil {
		c.clusters = map[multicluster.ClusterName]*entry[T]{}
	}
	cctx, cancel := context.WithCancel(ctx)
	e := &entry[T]{cl: cl, ctx: cctx, cancel: cancel}
	c.clusters[name] = e
	// Whoever stops the cluster, it leaves the map, unless replaced meanwhile.
	context.AfterFunc(cctx, func() {
		c.mu.Lock()
		if c.clusters[name] == e {
			delete(c.clusters, name)
		}
		c.mu.Unlock()
	})
	return e, slices.Clone(c.indexes)
}

// run applies indexes, starts the cluster, waits for its cache and engages it.
// On failure it stops the cluster (which removes its entry).
func (c *Clusters[T]) run(name multicluster.ClusterName, e *entry[T], indexes []index, aware multicluster.Aware) (err error) {
	defer func() {
		if err != nil {
			// Forget the entry now, not when the cancellation's AfterFunc gets
			// to run: the caller must not find a cluster that failed.
			c.mu.Lock()
			if c.clusters[name] == e {
				delete(c.clusters, name)
			}
			c.mu.Unlock()
			e.cancel()
		}
	}()
	for _, idx := range indexes {
		if err := e.cl.GetFieldIndexer().IndexField(e.ctx, idx.obj, idx.field, idx.extract); err != nil {
			return fmt.Errorf("cluster %q: indexing %T by %q: %w", name, idx.obj, idx.field, err)
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
	}()

	timeout := c.CacheSyncTimeout
	if timeout <= 0 {
		timeout = DefaultCacheSyncTimeout
	}
	syncCtx, cancel := context.WithTimeout(e.ctx, timeout)
	defer cancel()
	if err := waitForCache(syncCtx, e.cl.GetCache(), indexes, startErr); err != nil {
		return fmt.Errorf("cluster %q: %w", name, err)
	}
	if err := aware.Engage(e.ctx, name, e.cl); err != nil {
		if !strings.Contains(err.Error(), strconv.Quote(name)) {
			err = fmt.Errorf("cluster %q: %w", name, err)
		}
		return err
	}
	return nil
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
	e, ok := c.clusters[name]
	delete(c.clusters, name)
	c.mu.Unlock()
	if ok {
		e.cancel()
	}
}

// Get returns the named cluster, or an error wrapping
// multicluster.ErrClusterNotFound.
func (c *Clusters[T]) Get(_ context.Context, name multicluster.ClusterName) (cluster.Cluster, error) {
	cl, ok := c.Lookup(name)
	if !ok {
		return nil, fmt.Errorf("cluster %q: %w", name, multicluster.ErrClusterNotFound)
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
			errs = append(errs, fmt.Errorf("cluster %q: indexing %T by %q: %w", name, obj, field, err))
		}
	}
	return errors.Join(errs...)
}
