package source

import (
	"context"
	"fmt"

	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	mchandler "github.com/mcruntime/multicluster-runtime/pkg/handler"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
	mcreconcile "github.com/mcruntime/multicluster-runtime/pkg/reconcile"
)

// FanIn is the source of an aggregating controller: it watches obj's type in
// every cluster and maps every change there, and every cluster's arrival and
// departure, to the same requests for the host cluster (ClusterName ""). The
// queue merges identical requests, so the aggregating reconciler runs once
// per burst of changes anywhere in the fleet, and once more when a cluster
// leaves (its objects are gone from fleet reads without any event). Read the
// fleet in the reconciler with a fleetreader.Reader.
//
//	mcbuilder.ControllerManagedBy(mgr).Named("summary").
//		WatchesRawSource(mcsource.FanIn(&appsv1.Deployment{}, summaryKey)).
//		Complete(r)
func FanIn[object client.Object](obj object, reqs ...reconcile.Request) *FanInSource[object] {
	return &FanInSource[object]{obj: obj, reqs: reqs, hub: mchandler.HubRequests(reqs...)}
}

// FanInSource is the Source returned by FanIn.
type FanInSource[object client.Object] struct {
	obj        object
	reqs       []reconcile.Request
	hub        []mcreconcile.Request
	predicates []predicate.TypedPredicate[object]
	filter     ClusterFilter
}

var _ Source = &FanInSource[client.Object]{}

// WithPredicates returns a copy of the source whose watch events pass
// predicates first. Arrivals and departures of clusters always enqueue.
func (f *FanInSource[object]) WithPredicates(predicates ...predicate.TypedPredicate[object]) *FanInSource[object] {
	c := *f
	c.predicates = append(append([]predicate.TypedPredicate[object]{}, f.predicates...), predicates...)
	return &c
}

// WithClusterFilter returns a copy of the source that watches only the
// clusters filter accepts. The host is never watched: it is the hub.
func (f *FanInSource[object]) WithClusterFilter(filter ClusterFilter) *FanInSource[object] {
	c := *f
	c.filter = filter
	return &c
}

// ForCluster returns the cluster's watch; nil for the host cluster.
func (f *FanInSource[object]) ForCluster(name multicluster.ClusterName, cl cluster.Cluster) (source.TypedSource[mcreconcile.Request], bool, error) {
	if name == "" || f.filter != nil && !f.filter(name, cl) {
		return nil, false, nil
	}
	syncing, ok, err := Kind(f.obj, mchandler.TypedEnqueueHubRequests[object](f.reqs...), f.predicates...).SyncingForCluster(name, cl)
	if err != nil || !ok {
		return nil, false, err
	}
	return &fanInCluster[object]{TypedSyncingSource: syncing, hub: f.hub, name: name}, true, nil
}

// String describes the source, for logs.
func (f *FanInSource[object]) String() string {
	return fmt.Sprintf("fan-in source: %T to %v", f.obj, f.hub)
}

// fanInCluster is one cluster's watch; it enqueues the hub requests when the
// cluster arrives and when it leaves.
type fanInCluster[object client.Object] struct {
	source.TypedSyncingSource[mcreconcile.Request]
	hub  []mcreconcile.Request
	name multicluster.ClusterName
}

func (c *fanInCluster[object]) Start(ctx context.Context, q workqueue.TypedRateLimitingInterface[mcreconcile.Request]) error {
	if err := c.TypedSyncingSource.Start(ctx, q); err != nil {
		return err
	}
	add := func() {
		for _, r := range c.hub {
			q.Add(r)
		}
	}
	// Arrival: once the cluster's watch has its initial list (so that every
	// reader of the cluster's cache, engaged with it in the same engagement,
	// sees it too), even when the list is empty and brings no event. The
	// goroutine ends at sync or disengagement.
	go func() {
		if c.WaitForSync(ctx) == nil {
			add()
		}
	}()
	context.AfterFunc(ctx, add)
	return nil
}

func (c *fanInCluster[object]) String() string {
	return fmt.Sprintf("fan-in source in cluster %q", c.name)
}
