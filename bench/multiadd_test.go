package bench

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	mcbuilder "github.com/mcruntime/multicluster-runtime/pkg/builder"
	pkgclusters "github.com/mcruntime/multicluster-runtime/pkg/clusters"
	mcreconcile "github.com/mcruntime/multicluster-runtime/pkg/reconcile"
	"github.com/mcruntime/multicluster-runtime/providers/multi"
	"github.com/mcruntime/multicluster-runtime/providers/namespace"
)

// BenchmarkMultiAddProvider measures what a test of a running manager
// waits for after multi.AddProvider: the time until mgr.GetCluster returns
// the first cluster of the provider added, here a namespace provider whose
// namespace exists, with and without a controller watching ConfigMaps in
// the fleet. Each round adds a new provider (a shared cluster of its own)
// under a new prefix to the one running manager; the figure is the median of
// the rounds, in milliseconds (ms-to-GetCluster).
func BenchmarkMultiAddProvider(b *testing.B) {
	for _, withController := range []bool{false, true} {
		name := "no-controller"
		if withController {
			name = "controller"
		}
		b.Run(name, func(b *testing.B) {
			ns := seed(b, 1)
			m := multi.New(multi.Options{})
			mgr := newManagerOn(b, config(), m)
			if withController {
				err := mcbuilder.ControllerManagedBy(mgr).Named("multiadd-" + ns).For(&corev1.ConfigMap{}).
					Complete(mcreconcile.Func(func(context.Context, mcreconcile.Request) (reconcile.Result, error) {
						return reconcile.Result{}, nil
					}))
				if err != nil {
					b.Fatal(err)
				}
			}
			defer run(b, mgr)()
			waitFor(b, "the manager to run", func() bool { return mgr.GetLocalManager().GetCache().WaitForCacheSync(context.Background()) })
			var took []time.Duration
			b.ResetTimer()
			for i := range b.N {
				b.StopTimer()
				shared, err := pkgclusters.NewCluster(config())
				if err != nil {
					b.Fatal(err)
				}
				prefix := fmt.Sprintf("round%d", i)
				want := prefix + "#" + ns
				b.StartTimer()
				start := time.Now()
				if err := m.AddProvider(prefix, namespace.New(shared)); err != nil {
					b.Fatal(err)
				}
				waitFor(b, want, func() bool {
					_, err := mgr.GetCluster(context.Background(), want)
					return err == nil
				})
				took = append(took, time.Since(start))
				b.StopTimer()
				m.RemoveProvider(prefix)
			}
			slices.Sort(took)
			b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "ms-to-GetCluster")
		})
	}
}
