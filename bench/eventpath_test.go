package bench

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	mchandler "github.com/mcruntime/multicluster-runtime/pkg/handler"
	mcreconcile "github.com/mcruntime/multicluster-runtime/pkg/reconcile"
	mcsource "github.com/mcruntime/multicluster-runtime/pkg/source"
)

// BenchmarkEventPath measures what one informer event costs until its
// request is in the queue: the per-cluster handler (tagging the request with
// its cluster) into the fair queue, beside controller-runtime's handler into
// its priority queue. Objects are initial-list adds of 10,000 distinct
// ConfigMaps, so the handlers use priorities as on start-up.
func BenchmarkEventPath(b *testing.B) {
	objs := make([]*corev1.ConfigMap, 10000)
	for i := range objs {
		objs[i] = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("cm-%d", i)}}
	}
	run := func(b *testing.B, h toolscache.ResourceEventHandler, shutDown func()) {
		defer shutDown()
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			h.OnAdd(objs[i%len(objs)], true)
		}
	}
	b.Run("multicluster-fair", func(b *testing.B) {
		q := newFairQueue()
		h := mchandler.TypedEnqueueRequestForObject[client.Object]()("member", nil)
		run(b, mcsource.NewEventHandler[client.Object, mcreconcile.Request](context.Background(), q, h, nil), q.ShutDown)
	})
	b.Run("controller-runtime", func(b *testing.B) {
		q := priorityqueue.New[reconcile.Request]("")
		run(b, mcsource.NewEventHandler[client.Object, reconcile.Request](context.Background(), q, &handler.EnqueueRequestForObject{}, []predicate.TypedPredicate[client.Object]{}), q.ShutDown)
	})
}
