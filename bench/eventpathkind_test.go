package bench

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apiruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache/informertest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllertest"
	"sigs.k8s.io/controller-runtime/pkg/source"

	mchandler "github.com/mcruntime/multicluster-runtime/pkg/handler"
	mcreconcile "github.com/mcruntime/multicluster-runtime/pkg/reconcile"
	mcsource "github.com/mcruntime/multicluster-runtime/pkg/source"
)

// capturingInformer is a fake informer that keeps the handler a source
// registers, so that the benchmark can deliver events to it as the shared
// informer does.
type capturingInformer struct {
	*controllertest.FakeInformer
	handler toolscache.ResourceEventHandler
}

func (c *capturingInformer) AddEventHandlerWithOptions(h toolscache.ResourceEventHandler, o toolscache.HandlerOptions) (toolscache.ResourceEventHandlerRegistration, error) {
	c.handler = h
	return c.FakeInformer.AddEventHandlerWithOptions(h, o)
}

// fakeCluster is a cluster whose cache holds one informer, for ConfigMaps.
type fakeCluster struct {
	cluster.Cluster // nil: only the methods below are called
	cache           cache.Cache
}

func (c *fakeCluster) GetCache() cache.Cache         { return c.cache }
func (c *fakeCluster) GetAPIReader() client.Reader   { return nil }
func (c *fakeCluster) GetScheme() *apiruntime.Scheme { return scheme.Scheme }

// BenchmarkEventPathKind measures one informer event through what a
// controller's watch of a member really runs: mcsource.Kind with
// EnqueueRequestForObject, started on a cluster (so with the wrapper that
// tags each request with its cluster and holds the adds until the initial
// list is in), into the fair queue. The informer is a fake that hands the
// events over in this goroutine.
//
// open: 500,000 initial-list adds of 10,000 ConfigMaps after the cluster
// synced (the later ones duplicates of queued requests). held: 10,000
// initial-list adds delivered before the sync, then the sync; per event,
// until the last of them is in the queue (holding plus replay). Figures are
// medians of 5 runs: process CPU time, wall time and allocations per event.
func BenchmarkEventPathKind(b *testing.B) {
	const events, rounds = 500000, 5
	objs := make([]*corev1.ConfigMap, 10000)
	for i := range objs {
		objs[i] = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("cm-%d", i)}}
	}
	type result struct{ cpu, wall, allocs []float64 }
	start := func(synced bool) (*capturingInformer, func() int, func()) {
		var opts []controllertest.InformerOption
		if synced {
			opts = append(opts, controllertest.Synced)
		}
		inf := &capturingInformer{FakeInformer: controllertest.NewFakeInformer(opts...)}
		gvk := schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
		cl := &fakeCluster{cache: &informertest.FakeInformers{Scheme: scheme.Scheme, InformersByGVK: map[schema.GroupVersionKind]toolscache.SharedIndexInformer{gvk: inf}}}
		src, _, err := mcsource.Kind(&corev1.ConfigMap{}, mchandler.TypedEnqueueRequestForObject[*corev1.ConfigMap]()).ForCluster("member", cl)
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		q := newFairQueue()
		if err := src.Start(ctx, q); err != nil {
			b.Fatal(err)
		}
		if synced {
			if err := src.(source.TypedSyncingSource[mcreconcile.Request]).WaitForSync(ctx); err != nil {
				b.Fatal(err)
			}
		}
		return inf, q.Len, func() { cancel(); q.ShutDown() }
	}
	measure := func(r *result, run func() int) {
		runtime.GC()
		var ms0, ms1 runtime.MemStats
		runtime.ReadMemStats(&ms0)
		begin, cpu0 := time.Now(), processCPU()
		n := run()
		wall, cpu := time.Since(begin), processCPU()-cpu0
		runtime.ReadMemStats(&ms1)
		r.cpu = append(r.cpu, float64(cpu.Nanoseconds())/float64(n))
		r.wall = append(r.wall, float64(wall.Nanoseconds())/float64(n))
		r.allocs = append(r.allocs, float64(ms1.Mallocs-ms0.Mallocs)/float64(n))
	}
	var open, held result
	b.ResetTimer()
	for range rounds {
		inf, _, stop := start(true)
		measure(&open, func() int {
			for i := range events {
				inf.handler.OnAdd(objs[i%len(objs)], true)
			}
			return events
		})
		stop()

		inf, queued, stop := start(false)
		measure(&held, func() int {
			for _, o := range objs {
				inf.handler.OnAdd(o, true)
			}
			if n := queued(); n != 0 {
				b.Fatalf("%d requests queued before the sync, want 0", n)
			}
			inf.Synced()
			deadline := time.Now().Add(time.Minute)
			for queued() < len(objs) {
				if time.Now().After(deadline) {
					b.Fatalf("%d of %d held requests queued a minute after the sync", queued(), len(objs))
				}
				runtime.Gosched()
			}
			return len(objs)
		})
		stop()
	}
	b.StopTimer()
	figures := func(r result) []figure {
		return []figure{{median(r.cpu), "ns-cpu/event"}, {median(r.wall), "ns/event"}, {median(r.allocs), "allocs/event"}}
	}
	report(b, "open", figures(open)...)
	report(b, "held", figures(held)...)
}
