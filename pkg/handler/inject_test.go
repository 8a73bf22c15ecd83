package handler_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	mchandler "github.com/mcruntime/multicluster-runtime/pkg/handler"
	mcreconcile "github.com/mcruntime/multicluster-runtime/pkg/reconcile"
)

func req(cluster, name string) mcreconcile.Request {
	return mcreconcile.Request{ClusterName: cluster, Request: reconcile.Request{NamespacedName: types.NamespacedName{Name: name}}}
}

// The injecting handlers set (or keep) the cluster of what they add, through
// every way of adding, and keep the priorities the handler chose.
func TestInjectAndPreserveCluster(t *testing.T) {
	low := handler.LowPriority
	// The handler adds one request without a cluster and one for "central",
	// with a priority.
	inner := handler.TypedFuncs[client.Object, mcreconcile.Request]{
		CreateFunc: func(_ context.Context, _ event.TypedCreateEvent[client.Object], q workqueue.TypedRateLimitingInterface[mcreconcile.Request]) {
			q.(priorityqueue.PriorityQueue[mcreconcile.Request]).AddWithOpts(priorityqueue.AddOpts{Priority: &low}, req("", "here"), req("central", "there"))
		},
	}
	for _, tc := range []struct {
		name string
		h    mchandler.EventHandlerFunc
		want map[mcreconcile.Request]int
	}{
		{"inject", mchandler.TypedInjectCluster[client.Object, mcreconcile.Request](inner), map[mcreconcile.Request]int{req("east", "here"): low, req("east", "there"): low}},
		{"preserve", mchandler.TypedPreserveCluster[client.Object, mcreconcile.Request](inner), map[mcreconcile.Request]int{req("east", "here"): low, req("central", "there"): low}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := priorityqueue.New[mcreconcile.Request]("test")
			defer q.ShutDown()
			evt := event.TypedCreateEvent[client.Object]{Object: &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm"}}}
			tc.h("east", nil).Create(context.Background(), evt, q)
			got := map[mcreconcile.Request]int{}
			for range tc.want {
				item, prio, _ := q.GetWithPriority()
				got[item] = prio
				q.Done(item)
			}
			for item, prio := range tc.want {
				if p, ok := got[item]; !ok || p != prio {
					t.Errorf("queue got %v, want %v", got, tc.want)
					break
				}
			}
		})
	}
}
