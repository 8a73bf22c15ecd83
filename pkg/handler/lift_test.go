package handler_test

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	mchandler "github.com/mcruntime/multicluster-runtime/pkg/handler"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
	mcreconcile "github.com/mcruntime/multicluster-runtime/pkg/reconcile"
)

// ForCluster and TypedLift, the upstream design's names, tag the requests of
// a single-cluster handler with the cluster.
func TestForClusterAndTypedLiftTagRequests(t *testing.T) {
	inner := &handler.TypedEnqueueRequestForObject[*corev1.ConfigMap]{}
	for name, h := range map[string]handler.TypedEventHandler[*corev1.ConfigMap, mcreconcile.Request]{
		"TypedForCluster": mchandler.TypedForCluster[*corev1.ConfigMap](inner, "eu-1"),
		"TypedLift":       mchandler.TypedLift[*corev1.ConfigMap](inner)("eu-1", nil),
		"ForCluster":      lowered{mchandler.ForCluster(&handler.EnqueueRequestForObject{}, "eu-1")},
	} {
		q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[mcreconcile.Request]())
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a"}}
		h.Create(context.Background(), event.TypedCreateEvent[*corev1.ConfigMap]{Object: cm}, q)
		want := mcreconcile.Request{ClusterName: "eu-1", Request: reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "a"}}}
		if q.Len() != 1 {
			t.Fatalf("%s: %d requests, want 1", name, q.Len())
		}
		if got, _ := q.Get(); got != want {
			t.Errorf("%s: request %+v, want %+v", name, got, want)
		}
		q.ShutDown()
	}
}

// lowered runs a handler of client.Object for ConfigMaps.
type lowered struct{ h mchandler.EventHandler }

func (l lowered) Create(ctx context.Context, e event.TypedCreateEvent[*corev1.ConfigMap], q workqueue.TypedRateLimitingInterface[mcreconcile.Request]) {
	l.h.Create(ctx, event.CreateEvent{Object: e.Object}, q)
}

func (l lowered) Update(ctx context.Context, e event.TypedUpdateEvent[*corev1.ConfigMap], q workqueue.TypedRateLimitingInterface[mcreconcile.Request]) {
	l.h.Update(ctx, event.UpdateEvent{ObjectOld: e.ObjectOld, ObjectNew: e.ObjectNew}, q)
}

func (l lowered) Delete(ctx context.Context, e event.TypedDeleteEvent[*corev1.ConfigMap], q workqueue.TypedRateLimitingInterface[mcreconcile.Request]) {
	l.h.Delete(ctx, event.DeleteEvent{Object: e.Object}, q)
}

func (l lowered) Generic(ctx context.Context, e event.TypedGenericEvent[*corev1.ConfigMap], q workqueue.TypedRateLimitingInterface[mcreconcile.Request]) {
	l.h.Generic(ctx, event.GenericEvent{Object: e.Object}, q)
}

// TypedEnqueueRequestsFromMapFunc takes upstream's map function of
// mcreconcile.Requests: a request that names no cluster goes to the event's,
// one that names a cluster goes there. TypedEnqueueReconcileRequestsFromMapFunc
// keeps the reconcile.Request shape, tagged with the event's cluster.
func TestTypedEnqueueRequestsFromMapFuncKeepsTheEventsCluster(t *testing.T) {
	key := types.NamespacedName{Namespace: "ns", Name: "a"}
	upstream := mchandler.TypedEnqueueRequestsFromMapFunc(func(_ context.Context, cm *corev1.ConfigMap) []mcreconcile.Request {
		return []mcreconcile.Request{
			{Request: reconcile.Request{NamespacedName: key}},
			{ClusterName: "us-1", Request: reconcile.Request{NamespacedName: key}},
		}
	})
	ours := mchandler.TypedEnqueueReconcileRequestsFromMapFunc(func(_ context.Context, cm *corev1.ConfigMap) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: key}}
	})
	for name, tc := range map[string]struct {
		h    mchandler.TypedEventHandlerFunc[*corev1.ConfigMap, mcreconcile.Request]
		want []multicluster.ClusterName
	}{
		"TypedEnqueueRequestsFromMapFunc":          {upstream, []multicluster.ClusterName{"eu-1", "us-1"}},
		"TypedEnqueueReconcileRequestsFromMapFunc": {ours, []multicluster.ClusterName{"eu-1"}},
	} {
		q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[mcreconcile.Request]())
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a"}}
		tc.h("eu-1", nil).Create(context.Background(), event.TypedCreateEvent[*corev1.ConfigMap]{Object: cm}, q)
		var got []multicluster.ClusterName
		for q.Len() > 0 {
			req, _ := q.Get()
			if req.NamespacedName != key {
				t.Errorf("%s: request %+v, want the key %v", name, req, key)
			}
			got = append(got, req.ClusterName)
			q.Done(req)
		}
		slices.Sort(got)
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: requests for clusters %v, want %v", name, got, tc.want)
		}
		q.ShutDown()
	}
}
