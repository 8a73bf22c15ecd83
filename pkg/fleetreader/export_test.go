package fleetreader

import (
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
)

// IndexEntries counts the entries of a cluster in a fleet index, including
// those of engagements that ended but were not yet removed.
func IndexEntries(r *Reader, obj client.Object, field string, cluster multicluster.ClusterName) int {
	k, err := r.keyOf(obj)
	if err != nil {
		return -1
	}
	r.mu.Lock()
	idx := r.indexes[indexKey{t: k, field: field}]
	r.mu.Unlock()
	if idx == nil {
		return -1
	}
	idx.mu.RLock()
	defer idx.mu.RUnlock()
	n := 0
	for _, set := range idx.byValue {
		for ref := range set {
			if ref.m.name == cluster {
				n++
			}
		}
	}
	return n
}
