package bench

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"

	mcbuilder "github.com/mcruntime/multicluster-runtime/pkg/builder"
	pkgclusters "github.com/mcruntime/multicluster-runtime/pkg/clusters"
	mcreconcile "github.com/mcruntime/multicluster-runtime/pkg/reconcile"
	clustersprovider "github.com/mcruntime/multicluster-runtime/providers/clusters"
)

// BenchmarkEngageDisengageCycles engages and disengages a cluster 1,000 times
// (each time until its ConfigMaps are reconciled) and reports the growth of
// heap and goroutines over the cycles.
func BenchmarkEngageDisengageCycles(b *testing.B) {
	const cycles = 1000
	ns := seed(b, objectsPerCluster)
	p := clustersprovider.New()
	mgr := newManager(b, p)
	counter := &fleetCounter{} // totals only
	if err := mcbuilder.ControllerManagedBy(mgr).Named("cycles").For(&corev1.ConfigMap{}).
		Complete(cachedGetReconciler(mgr, func(req mcreconcile.Request) { counter.record(req.ClusterName) })); err != nil {
		b.Fatal(err)
	}
	stop := run(b, mgr)
	defer stop()
	ctx := context.Background()

	cycle := func(i int) {
		name := fmt.Sprintf("cycle-%d", i)
		before := counter.total.Load()
		cl, err := pkgclusters.NewCluster(config(), inNamespace(ns))
		if err != nil {
			b.Fatal(err)
		}
		if err := p.Add(ctx, name, cl); err != nil {
			b.Fatal(err)
		}
		waitFor(b, name+"'s reconciles", func() bool { return counter.total.Load() == before+objectsPerCluster })
		p.Remove(name)
		waitFor(b, name+" to leave", func() bool { _, err := mgr.GetCluster(ctx, name); return err != nil })
	}
	// Warm up: the first cycles fill process-wide caches (discovery, codecs).
	for i := range 20 {
		cycle(-1 - i)
	}
	heap0, g0 := settle(0)
	b.ResetTimer()
	for i := range cycles {
		cycle(i)
	}
	b.StopTimer()
	heap1, g1 := settle(g0)
	b.ReportMetric(float64(g1-g0), "goroutines-growth")
	b.ReportMetric(float64(int64(heap1)-int64(heap0))/1024, "KB-heap-growth")
	b.ReportMetric(float64(int64(heap1)-int64(heap0))/cycles, "B-heap-growth/cycle")
	b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/cycles, "ms/cycle")
}
