package handler_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	mchandler "github.com/mcruntime/multicluster-runtime/pkg/handler"
	mcreconcile "github.com/mcruntime/multicluster-runtime/pkg/reconcile"
)

// ForCluster and TypedLift, the upstream design's names, tag the requests of
// a single-cluster handler with the cluster.
func TestForClusterAndTypedLiftTagRequests(t *testing.T) {
	inner := &handler.TypedEnqueueRequestForObject[*corev1.ConfigMap]{}
	for name, h := range map[string]handler.TypedEventHandler[*corev1.ConfigMap, mcreconcile.Request]{
		"ForCluster": mchandler.ForCluster[*corev1.ConfigMap]("eu-1", inner),
		"TypedLift":  mchandler.TypedLift[*corev1.ConfigMap](inner)("eu-1", nil),
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
