package clusters

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"

	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
)

// Every index registered with Members.IndexField reaches every cluster of
// the members, whenever it was registered: before its cache starts for a
// cluster built or handed over after the index, and through the informer's
// AddIndexers for one that runs already. Engaged or not is not what decides:
// a cluster published before the index and engaged after it (built, synced,
// its subscribers engaging) would otherwise be in neither set, and engage
// without the index. So Members tracks every cluster it handed the engine
// from the moment it exists (indexed) until the engine lets go of it, and
// each tracked cluster gets the registered indexes in order, each once.

// indexed is a cluster the members apply their indexes to.
type indexed struct {
	name multicluster.ClusterName
	cl   cluster.Cluster
	mu   sync.Mutex // held while indexes are applied: in order, each once
	// applied: the members' indexes[:applied] were applied (or failed,
	// in failed by position).
	applied int
	failed  map[int]error
}

// track makes cl a cluster the members apply their indexes to, and
// returns it with the number of indexes registered so far. The caller
// holds m.mu.
func (m *Members) trackLocked(name multicluster.ClusterName, cl cluster.Cluster) (*indexed, int) {
	x := &indexed{name: name, cl: cl}
	if m.indexed == nil {
		m.indexed = map[*indexed]struct{}{}
	}
	m.indexed[x] = struct{}{}
	return x, len(m.indexes)
}

// untrack forgets x: the engine let go of it.
func (m *Members) untrack(x *indexed) {
	if x == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.indexed, x)
}

// tracked returns the clusters the members apply their indexes to.
func (m *Members) trackedLocked() []*indexed { return slices.Collect(maps.Keys(m.indexed)) }

// catchUp applies to x the registered indexes up to upto that it does not
// have yet, and returns the error of the index at position at, if any (-1:
// the first error of any index below upto).
func (m *Members) catchUp(ctx context.Context, x *indexed, upto, at int) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	for ; x.applied < upto; x.applied++ {
		m.mu.Lock()
		idx := m.indexes[x.applied]
		m.mu.Unlock()
		if err := x.cl.GetFieldIndexer().IndexField(ctx, idx.obj, idx.field, idx.extract); err != nil {
			if x.failed == nil {
				x.failed = map[int]error{}
			}
			x.failed[x.applied] = fmt.Errorf("indexing %T by %q: %w", idx.obj, idx.field, err)
		}
	}
	if at >= 0 {
		return x.failed[at]
	}
	for i := range upto {
		if err := x.failed[i]; err != nil {
			return err
		}
	}
	return nil
}
