package source

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Informer callbacks become typed events: tombstones are unwrapped and marked,
// predicates filter, objects of the wrong type are dropped.
func TestEventHandlerTranslatesInformerCallbacks(t *testing.T) {
	var got []string
	h := handler.TypedFuncs[*corev1.ConfigMap, reconcile.Request]{
		CreateFunc: func(_ context.Context, e event.TypedCreateEvent[*corev1.ConfigMap], _ workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			got = append(got, "create:"+e.Object.Name+boolMark(e.IsInInitialList))
		},
		UpdateFunc: func(_ context.Context, e event.TypedUpdateEvent[*corev1.ConfigMap], _ workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			got = append(got, "update:"+e.ObjectOld.Name+">"+e.ObjectNew.Name)
		},
		DeleteFunc: func(_ context.Context, e event.TypedDeleteEvent[*corev1.ConfigMap], _ workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			got = append(got, "delete:"+e.Object.Name+boolMark(e.DeleteStateUnknown))
		},
	}
	notSkipped := predicate.NewTypedPredicateFuncs(func(o *corev1.ConfigMap) bool { return o.Name != "skip" })
	eh := NewEventHandler[*corev1.ConfigMap, reconcile.Request](context.Background(), nil, h, []predicate.TypedPredicate[*corev1.ConfigMap]{notSkipped})

	cm := func(name string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}
	}
	eh.OnAdd(cm("a"), true)
	eh.OnAdd(cm("skip"), false)
	eh.OnAdd(&corev1.Secret{}, false) // wrong type: dropped
	eh.OnUpdate(cm("a"), cm("b"))
	eh.OnDelete(cm("c"))
	eh.OnDelete(toolscache.DeletedFinalStateUnknown{Key: "ns/d", Obj: cm("d")})
	eh.OnDelete(toolscache.DeletedFinalStateUnknown{Key: "ns/e", Obj: &corev1.Secret{}})

	want := []string{"create:a!", "update:a>b", "delete:c", "delete:d!"}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
}

func boolMark(b bool) string {
	if b {
		return "!"
	}
	return ""
}
