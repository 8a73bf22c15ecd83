package bench

import (
	"context"
	"fmt"
	"runtime"
	"sort"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	mcbuilder "github.com/mcruntime/multicluster-runtime/pkg/builder"
	pkgclusters "github.com/mcruntime/multicluster-runtime/pkg/clusters"
	"github.com/mcruntime/multicluster-runtime/pkg/fleetreader"
	mcmanager "github.com/mcruntime/multicluster-runtime/pkg/manager"
	mcreconcile "github.com/mcruntime/multicluster-runtime/pkg/reconcile"
	clustersprovider "github.com/mcruntime/multicluster-runtime/providers/clusters"
)

// readReps is how many times each read is timed; the figures are medians.
const readReps = 31

// ownerField is the field the fleet-read benchmarks index by.
const ownerField = "data.owner"

func ownerOf(obj client.Object) []string {
	if o := obj.(*corev1.ConfigMap).Data["owner"]; o != "" {
		return []string{o}
	}
	return nil
}

// BenchmarkFleetRead engages N clusters on one API server, each caching the
// same 20 ConfigMaps (cluster 0 also caches a 21st, the needle: the only
// object whose owner is "needle"), with a ConfigMap controller, and compares
// in the same run the fleet reader with the hand-written loop over
// GetCluster and each cache:
//   - List of every ConfigMap of the fleet: p50 of both, their ratio, and
//     allocations per item of both;
//   - lookup of the needle by an indexed field: p50 through the fleet index
//     and through the loop over every cluster's own index;
//   - heap per cluster of a Reader that reads no type (the feature present
//     but unused; without a Reader nothing is added at all), and heap per
//     indexed object of the fleet index.
func BenchmarkFleetRead(b *testing.B) {
	for _, n := range []int{10, 100, 1000} {
		b.Run(fmt.Sprintf("clusters=%d", n), func(b *testing.B) {
			ns := seed(b, objectsPerCluster)
			c, err := client.New(config(), client.Options{})
			if err != nil {
				b.Fatal(err)
			}
			if err := c.Create(context.Background(), &corev1.ConfigMap{}); err == nil {
				b.Fatal("created a nameless ConfigMap")
			}
			needle := &corev1.ConfigMap{}
			needle.Namespace, needle.Name, needle.Labels, needle.Data = ns, "needle", map[string]string{"role": "needle"}, map[string]string{"owner": "needle"}
			if err := c.Create(context.Background(), needle); err != nil {
				b.Fatal(err)
			}
			for i := 0; i < b.N; i++ {
				fleetReadOnce(b, n, ns)
			}
		})
	}
}

func fleetReadOnce(b *testing.B, n int, ns string) {
	ctx := context.Background()
	p := clustersprovider.New()
	mgr := newManager(b, p)
	if err := mgr.GetFieldIndexer().IndexField(ctx, &corev1.ConfigMap{}, ownerField, ownerOf); err != nil {
		b.Fatal(err)
	}
	var reconciles atomic.Int64
	if err := mcbuilder.ControllerManagedBy(mgr).Named(fmt.Sprintf("fleetread-%s-%d", ns, nsCounter.Add(1))).For(&corev1.ConfigMap{}).
		Complete(mcreconcile.Func(func(context.Context, mcreconcile.Request) (reconcile.Result, error) {
			reconciles.Add(1)
			return reconcile.Result{}, nil
		})); err != nil {
		b.Fatal(err)
	}
	stop := run(b, mgr)
	defer stop()
	names := engageFleet(b, p, mgr, n, ns)
	want := int64(n*objectsPerCluster + 1)
	waitFor(b, "every reconcile", func() bool { return reconciles.Load() >= want })

	// A Reader that reads nothing yet: its cost per engaged cluster.
	heap0, _ := heapAndGoroutines()
	r, err := fleetreader.New(mgr)
	if err != nil {
		b.Fatal(err)
	}
	waitFor(b, "the reader to engage every cluster", func() bool { return len(r.Clusters()) == n })
	heap1, _ := heapAndGoroutines()
	if err := r.Informer(ctx, &corev1.ConfigMap{}); err != nil {
		b.Fatal(err)
	}
	waitFor(b, "the fleet list", func() bool {
		e, err := fleetreader.List[*corev1.ConfigMap](ctx, r)
		return err == nil && int64(len(e)) == want
	})
	heap2, _ := heapAndGoroutines()
	if err := r.IndexField(ctx, &corev1.ConfigMap{}, ownerField, ownerOf); err != nil {
		b.Fatal(err)
	}
	byOwner := func(o string) client.ListOption { return client.MatchingFields{ownerField: o} }
	waitFor(b, "the fleet index", func() bool {
		e, err := fleetreader.List[*corev1.ConfigMap](ctx, r, byOwner("needle"))
		return err == nil && len(e) == 1
	})
	heap3, _ := heapAndGoroutines()

	type entry struct {
		cluster string
		obj     *corev1.ConfigMap
	}
	// The hand-written loop a reconciler writes today.
	loop := func(opts ...client.ListOption) []entry {
		var out []entry
		for _, name := range names {
			cl, err := mgr.GetCluster(ctx, name)
			if err != nil {
				b.Fatal(err)
			}
			var list corev1.ConfigMapList
			if err := cl.GetCache().List(ctx, &list, opts...); err != nil {
				b.Fatal(err)
			}
			for i := range list.Items {
				out = append(out, entry{cluster: name, obj: &list.Items[i]})
			}
		}
		return out
	}
	fleet := func(opts ...client.ListOption) int {
		e, err := fleetreader.List[*corev1.ConfigMap](ctx, r, opts...)
		if err != nil {
			b.Fatal(err)
		}
		return len(e)
	}

	b.ResetTimer()
	var fleetList, loopList, fleetIdx, loopIdx []time.Duration
	var fleetAllocs, loopAllocs uint64
	for range readReps {
		// Alternate, so that both see the same machine.
		d, a := measure(func() {
			if got := fleet(); int64(got) != want {
				b.Fatalf("fleet List: %d objects, want %d", got, want)
			}
		})
		fleetList, fleetAllocs = append(fleetList, d), fleetAllocs+a
		d, a = measure(func() {
			if got := len(loop()); int64(got) != want {
				b.Fatalf("loop List: %d objects, want %d", got, want)
			}
		})
		loopList, loopAllocs = append(loopList, d), loopAllocs+a
	}
	// Lookups are timed in batches, apart from the lists, whose garbage
	// would otherwise be what a microsecond lookup measures.
	const batch = 100
	for range readReps {
		d, _ := measure(func() {
			for range batch {
				if got := fleet(byOwner("needle")); got != 1 {
					b.Fatalf("fleet lookup: %d objects, want 1", got)
				}
			}
		})
		fleetIdx = append(fleetIdx, d/batch)
		d, _ = measure(func() {
			for range batch / 10 {
				if got := len(loop(byOwner("needle"))); got != 1 {
					b.Fatalf("loop lookup: %d objects, want 1", got)
				}
			}
		})
		loopIdx = append(loopIdx, d/(batch/10))
	}
	b.StopTimer()

	items := float64(want * readReps)
	b.ReportMetric(ms(percentile(fleetList, 0.5)), "ms-p50/fleet-list")
	b.ReportMetric(ms(percentile(loopList, 0.5)), "ms-p50/loop-list")
	b.ReportMetric(float64(percentile(fleetList, 0.5))/float64(percentile(loopList, 0.5)), "ratio/fleet-vs-loop-list")
	b.ReportMetric(float64(fleetAllocs)/items, "allocs/item-fleet-list")
	b.ReportMetric(float64(loopAllocs)/items, "allocs/item-loop-list")
	b.ReportMetric(us(percentile(fleetIdx, 0.5)), "µs-p50/fleet-index-lookup")
	b.ReportMetric(us(percentile(loopIdx, 0.5)), "µs-p50/loop-index-lookup")
	b.ReportMetric(float64(percentile(loopIdx, 0.5))/float64(percentile(fleetIdx, 0.5)), "ratio/loop-vs-fleet-lookup")
	b.ReportMetric(float64(int64(heap1)-int64(heap0))/float64(n), "B-heap/cluster-reader-unused")
	b.ReportMetric(float64(int64(heap2)-int64(heap1))/float64(n), "B-heap/cluster-type-declared")
	b.ReportMetric(float64(int64(heap3)-int64(heap2))/float64(want), "B-heap/indexed-object")

	for _, name := range names {
		p.Remove(name)
	}
	waitFor(b, "every cluster to leave the reader", func() bool { return len(r.Clusters()) == 0 })
}

// engageFleet adds n clusters on the benchmark server to p, each caching the
// ConfigMaps of ns; cluster 0 also the needle, the others all but it.
func engageFleet(b *testing.B, p *clustersprovider.Provider, mgr mcmanager.Manager, n int, ns string) []string {
	ctx := context.Background()
	noNeedle := func(o *cluster.Options) {
		sel, err := labels.Parse("role!=needle")
		if err != nil {
			b.Fatal(err)
		}
		o.Cache.DefaultLabelSelector = sel
	}
	// Wait for the provider to run, so that Add engages at once.
	waitFor(b, "the provider to start", func() bool {
		probe, err := pkgclusters.NewCluster(config(), inNamespace(ns))
		if err != nil {
			b.Fatal(err)
		}
		if err := p.Add(ctx, "probe", probe); err != nil {
			return false
		}
		p.Remove("probe")
		return true
	})
	waitFor(b, "the probe to leave", func() bool { _, err := mgr.GetCluster(ctx, "probe"); return err != nil })
	names := make([]string, n)
	errs := make(chan error, n)
	for i := range n {
		names[i] = fmt.Sprintf("c%04d", i)
		go func() {
			opts := []cluster.Option{inNamespace(ns)}
			if i > 0 {
				opts = append(opts, noNeedle)
			}
			cl, err := pkgclusters.NewCluster(config(), opts...)
			if err == nil {
				err = p.Add(ctx, names[i], cl)
			}
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			b.Fatal(err)
		}
	}
	sort.Strings(names)
	return names
}

// measure returns how long f took and how many allocations it made.
func measure(f func()) (time.Duration, uint64) {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	start := time.Now()
	f()
	d := time.Since(start)
	runtime.ReadMemStats(&after)
	return d, after.Mallocs - before.Mallocs
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
