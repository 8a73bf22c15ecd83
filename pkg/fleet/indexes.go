package fleet

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
)

// Indexes are the field indexes one provider registers for the clusters of
// its members (Member.Indexes). Every index reaches every cluster of those
// members, whenever it was registered: before its cache starts for a
// cluster that starts after the index (the engine applies them as it starts
// a cluster, built or lent), and through the informer's AddIndexers for one
// that starts or runs already. Engaged or not is not what decides: a cluster
// published before the index and engaged after it would otherwise get it
// from neither. So the engine has every cluster of such a member tracked
// here from the moment it has it until its run ends (a lent cluster's, until
// its member's life ends: it runs on between runs here), and each tracked
// cluster gets the registered indexes in order, each once. The zero value is
// ready to use; an Indexes is not copied once used.
type Indexes struct {
	mu       sync.Mutex
	list     []index
	clusters map[cluster.Cluster]*indexed
}

// index is one registered field index.
type index struct {
	obj     client.Object
	field   string
	extract client.IndexerFunc
}

// indexed is a cluster the indexes are applied to.
type indexed struct {
	name multicluster.ClusterName
	cl   cluster.Cluster
	// engaged reports whether the engine hands cl out for name.
	engaged func() bool
	mu      sync.Mutex // held while indexes are applied: in order, each once
	// applied: list[:applied] were applied (or failed, in failed by
	// position).
	applied int
	failed  map[int]error
}

// Add registers an index on every cluster of the members: one that starts
// later before its cache starts, one running or starting now (engaged or
// not yet) through its informer's AddIndexers. It returns the errors of the
// engaged clusters that could not take it, each naming its cluster; that of
// a cluster not engaged (starting, or stopped and waiting for its next
// attempt, which gets every index) is logged.
func (x *Indexes) Add(ctx context.Context, log logr.Logger, obj client.Object, field string, extract client.IndexerFunc) error {
	x.mu.Lock()
	x.list = append(x.list, index{obj: obj, field: field, extract: extract})
	at := len(x.list) - 1
	targets := slices.Collect(maps.Values(x.clusters))
	x.mu.Unlock()
	var errs []error
	for _, c := range targets {
		err := x.catchUp(ctx, c, at+1, at)
		if err == nil {
			continue
		}
		err = multicluster.WithCluster(c.name, err)
		if c.engaged() {
			errs = append(errs, err)
			continue
		}
		log.Info("A cluster that is not engaged could not take an index: if it is engaged, its lists by this field fail", "cluster", c.name, "error", err.Error())
	}
	return errors.Join(errs...)
}

// Range calls f with every index registered, in order.
func (x *Indexes) Range(f func(obj client.Object, field string, extract client.IndexerFunc)) {
	x.mu.Lock()
	list := x.list[:len(x.list):len(x.list)]
	x.mu.Unlock()
	for _, idx := range list {
		f(idx.obj, idx.field, idx.extract)
	}
}

// apply tracks cl, a cluster of the member name about to start or started
// again, and applies every index registered so far that it does not have.
// It returns the first error of an index cl could not take, and the
// untracking of cl if it was not tracked yet (else nil).
func (x *Indexes) apply(ctx context.Context, name multicluster.ClusterName, cl cluster.Cluster, engaged func() bool) (untrack func(), err error) {
	x.mu.Lock()
	c, ok := x.clusters[cl]
	if !ok {
		c = &indexed{name: name, cl: cl, engaged: engaged}
		if x.clusters == nil {
			x.clusters = map[cluster.Cluster]*indexed{}
		}
		x.clusters[cl] = c
		untrack = func() {
			x.mu.Lock()
			defer x.mu.Unlock()
			if x.clusters[cl] == c {
				delete(x.clusters, cl)
			}
		}
	}
	n := len(x.list)
	x.mu.Unlock()
	return untrack, x.catchUp(ctx, c, n, -1)
}

// catchUp applies to c the registered indexes up to upto that it does not
// have yet, and returns the error of the index at position at, if any (-1:
// the first error of any index below upto).
func (x *Indexes) catchUp(ctx context.Context, c *indexed, upto, at int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for ; c.applied < upto; c.applied++ {
		x.mu.Lock()
		idx := x.list[c.applied]
		x.mu.Unlock()
		if err := c.cl.GetFieldIndexer().IndexField(ctx, idx.obj, idx.field, idx.extract); err != nil {
			if c.failed == nil {
				c.failed = map[int]error{}
			}
			c.failed[c.applied] = fmt.Errorf("indexing %T by %q: %w", idx.obj, idx.field, err)
		}
	}
	if at >= 0 {
		return c.failed[at]
	}
	for i := range upto {
		if err := c.failed[i]; err != nil {
			return err
		}
	}
	return nil
}
