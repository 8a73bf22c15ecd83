package handler_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	mchandler "github.com/mcruntime/multicluster-runtime/pkg/handler"
	mcreconcile "github.com/mcruntime/multicluster-runtime/pkg/reconcile"
)

// Events of any cluster become the same hub requests, merged by the queue.
func TestEnqueueHubRequestsFansIn(t *testing.T) {
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[mcreconcile.Request]())
	defer q.ShutDown()
	summary := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "hub", Name: "summary"}}
	factory := mchandler.TypedEnqueueHubRequests[*corev1.ConfigMap](summary)
	ctx := context.Background()
	for _, cluster := range []string{"a", "b", "c"} {
		h := factory(cluster, nil)
		cm := &corev1.ConfigMap{}
		h.Create(ctx, event.TypedCreateEvent[*corev1.ConfigMap]{Object: cm}, q)
		h.Update(ctx, event.TypedUpdateEvent[*corev1.ConfigMap]{ObjectOld: cm, ObjectNew: cm}, q)
		h.Delete(ctx, event.TypedDeleteEvent[*corev1.ConfigMap]{Object: cm}, q)
		h.Generic(ctx, event.TypedGenericEvent[*corev1.ConfigMap]{Object: cm}, q)
	}
	if n := q.Len(); n != 1 {
		t.Fatalf("queue holds %d requests after 12 events in 3 clusters, want 1", n)
	}
	got, _ := q.Get()
	if want := (mcreconcile.Request{Request: summary}); got != want {
		t.Errorf("queued %v, want %v (the hub request)", got, want)
	}
}
