package source

import (
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
	mcreconcile "github.com/mcruntime/multicluster-runtime/pkg/reconcile"
)

// SyncingSource is a TypedSyncingSource of mcreconcile.Request, the upstream
// design's name for what Kind returns.
type SyncingSource[object client.Object] = TypedSyncingSource[object, mcreconcile.Request]

// TypedSyncingSource is a multi-cluster source whose per-cluster sources can
// be waited for: SyncingForCluster returns one cluster's source as a
// controller-runtime syncing source (Start, then WaitForSync). The sources
// made by Kind and TypedKind are TypedSyncingSources.
type TypedSyncingSource[object client.Object, request comparable] interface {
	TypedSource[object, request]
	// SyncingForCluster is ForCluster for a caller that waits for the
	// cluster's source to sync. It returns nil, false, nil for a cluster the
	// source does not watch (its cluster filter refused it).
	SyncingForCluster(name multicluster.ClusterName, cl cluster.Cluster) (source.TypedSyncingSource[request], bool, error)
	// WithProjection makes the source watch, in each cluster, the object that
	// project returns for it instead of the object it was made with: a
	// cluster whose API serves the type under another version, or an
	// unstructured object given its cluster's GVK. The source is changed and
	// returned.
	WithProjection(project func(cluster.Cluster, object) (object, error)) TypedSyncingSource[object, request]
}

var _ SyncingSource[client.Object] = &KindSource[client.Object]{}

// SyncingForCluster returns the cluster's watch as a syncing source and
// true, or nil, false, nil if the source's cluster filter refuses the
// cluster.
func (k *TypedKindSource[object, request]) SyncingForCluster(name multicluster.ClusterName, cl cluster.Cluster) (source.TypedSyncingSource[request], bool, error) {
	src, err := k.forCluster(name, cl)
	if err != nil || src == nil {
		return nil, false, err
	}
	return src, true, nil
}

// WithProjection sets the projection of the watched object per cluster (see
// TypedSyncingSource) and returns the source. A nil project watches the
// object the source was made with.
func (k *TypedKindSource[object, request]) WithProjection(project func(cluster.Cluster, object) (object, error)) TypedSyncingSource[object, request] {
	if k == nil {
		return &TypedKindSource[object, request]{project: project}
	}
	k.project = project
	return k
}

// objectFor returns the object to watch in cl: the projection of the
// source's object, or the object itself.
func (k *TypedKindSource[object, request]) objectFor(name multicluster.ClusterName, cl cluster.Cluster) (object, error) {
	if k.project == nil {
		return k.obj, nil
	}
	obj, err := k.project(cl, k.obj)
	if err != nil {
		var zero object
		return zero, fmt.Errorf("cluster %q: projecting %T: %w", name, k.obj, err)
	}
	return obj, nil
}
