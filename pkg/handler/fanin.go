package handler

import (
	"context"

	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
	mcreconcile "github.com/mcruntime/multicluster-runtime/pkg/reconcile"
)

// EnqueueHubRequests is the fan-in handler: every event of any cluster
// enqueues the same requests, for the host cluster (ClusterName ""). The
// queue merges identical requests, so an aggregating reconciler that keeps a
// hub object current runs once per burst of changes anywhere in the fleet,
// not once per change. See mcsource.FanIn, which also reacts to clusters
// leaving.
func EnqueueHubRequests(reqs ...reconcile.Request) EventHandlerFunc {
	return TypedEnqueueHubRequests[client.Object](reqs...)
}

// TypedEnqueueHubRequests is EnqueueHubRequests for a typed object.
func TypedEnqueueHubRequests[object client.Object](reqs ...reconcile.Request) TypedEventHandlerFunc[object, mcreconcile.Request] {
	hub := HubRequests(reqs...)
	return func(multicluster.ClusterName, cluster.Cluster) handler.TypedEventHandler[object, mcreconcile.Request] {
		return fanIn[object](hub)
	}
}

// HubRequests returns the requests for the host cluster with these keys.
func HubRequests(reqs ...reconcile.Request) []mcreconcile.Request {
	hub := make([]mcreconcile.Request, len(reqs))
	for i, r := range reqs {
		hub[i] = mcreconcile.Request{Request: r}
	}
	return hub
}

// fanIn enqueues fixed requests for every event.
type fanIn[object client.Object] []mcreconcile.Request

func (f fanIn[object]) add(q workqueue.TypedRateLimitingInterface[mcreconcile.Request]) {
	for _, r := range f {
		q.Add(r)
	}
}

func (f fanIn[object]) Create(_ context.Context, _ event.TypedCreateEvent[object], q workqueue.TypedRateLimitingInterface[mcreconcile.Request]) {
	f.add(q)
}

func (f fanIn[object]) Update(_ context.Context, _ event.TypedUpdateEvent[object], q workqueue.TypedRateLimitingInterface[mcreconcile.Request]) {
	f.add(q)
}

func (f fanIn[object]) Delete(_ context.Context, _ event.TypedDeleteEvent[object], q workqueue.TypedRateLimitingInterface[mcreconcile.Request]) {
	f.add(q)
}

func (f fanIn[object]) Generic(_ context.Context, _ event.TypedGenericEvent[object], q workqueue.TypedRateLimitingInterface[mcreconcile.Request]) {
	f.add(q)
}

var _ handler.TypedEventHandler[client.Object, mcreconcile.Request] = fanIn[client.Object](nil)
