package bench

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

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
// its priority queue, in the same process. Objects are initial-list adds of
// 10,000 distinct ConfigMaps, so the handlers use priorities as on start-up;
// each run delivers 500,000 events (the later ones are duplicates of queued
// requests, as in a busy cluster).
//
// The main figure is the process's CPU time per event (getrusage, which
// counts the queues' own goroutines too), beside wall time and allocations
// per event; each is the median of 5 runs, the kinds taking turns. The fair
// line carries cpu-ratio, its CPU per event over controller-runtime's.
func BenchmarkEventPath(b *testing.B) {
	const events, rounds = 500000, 5
	objs := make([]*corev1.ConfigMap, 10000)
	for i := range objs {
		objs[i] = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("cm-%d", i)}}
	}
	type result struct{ cpu, wall, allocs []float64 }
	measure := func(r *result, h toolscache.ResourceEventHandler, shutDown func()) {
		defer shutDown()
		runtime.GC()
		var ms0, ms1 runtime.MemStats
		runtime.ReadMemStats(&ms0)
		begin, cpu0 := time.Now(), processCPU()
		for i := range events {
			h.OnAdd(objs[i%len(objs)], true)
		}
		wall, cpu := time.Since(begin), processCPU()-cpu0
		runtime.ReadMemStats(&ms1)
		r.cpu = append(r.cpu, float64(cpu.Nanoseconds())/events)
		r.wall = append(r.wall, float64(wall.Nanoseconds())/events)
		r.allocs = append(r.allocs, float64(ms1.Mallocs-ms0.Mallocs)/events)
	}
	var fair, cr result
	kinds := []func(){
		func() {
			q := newFairQueue()
			h := mchandler.TypedEnqueueRequestForObject[client.Object]()("member", nil)
			measure(&fair, mcsource.NewEventHandler[client.Object, mcreconcile.Request](context.Background(), q, h, nil), q.ShutDown)
		},
		func() {
			q := priorityqueue.New[reconcile.Request]("")
			measure(&cr, mcsource.NewEventHandler[client.Object, reconcile.Request](context.Background(), q, &handler.EnqueueRequestForObject{}, []predicate.TypedPredicate[client.Object]{}), q.ShutDown)
		},
	}
	b.ResetTimer()
	for r := range rounds {
		for k := range kinds {
			kinds[(k+r)%len(kinds)]()
		}
	}
	b.StopTimer()
	figures := func(r result) []figure {
		return []figure{{median(r.cpu), "ns-cpu/event"}, {median(r.wall), "ns/event"}, {median(r.allocs), "allocs/event"}}
	}
	report(b, "fair", append(figures(fair), figure{median(fair.cpu) / median(cr.cpu), "cpu-ratio"})...)
	report(b, "controller-runtime", figures(cr)...)
}
