package bench

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	mcbuilder "github.com/mcruntime/multicluster-runtime/pkg/builder"
	pkgclusters "github.com/mcruntime/multicluster-runtime/pkg/clusters"
	"github.com/mcruntime/multicluster-runtime/pkg/fleetreader"
	mcreconcile "github.com/mcruntime/multicluster-runtime/pkg/reconcile"
	mcsource "github.com/mcruntime/multicluster-runtime/pkg/source"
	clustersprovider "github.com/mcruntime/multicluster-runtime/providers/clusters"
)

// BenchmarkFleetAggregation runs an aggregating controller over a fleet of
// 10 clusters (one namespace each on the benchmark server): mcsource.FanIn
// maps every ConfigMap event to one hub request, whose reconcile lists the
// fleet through a fleetreader.Reader and records each cluster's latest
// generation (the summary a real controller would write to a hub object).
// 100 changes, one at a time, in the clusters in turn; reported: the time
// from the update call to the summary that shows it, p50 and p99, and the
// reconciles per change.
func BenchmarkFleetAggregation(b *testing.B) {
	const members, changes = 10, 100
	for i := 0; i < b.N; i++ {
		ctx := context.Background()
		c, err := client.New(config(), client.Options{})
		if err != nil {
			b.Fatal(err)
		}
		p := clustersprovider.New()
		mgr := newManager(b, p)
		r, err := fleetreader.New(mgr)
		if err != nil {
			b.Fatal(err)
		}
		if err := r.Informer(ctx, &corev1.ConfigMap{}); err != nil {
			b.Fatal(err)
		}
		var (
			mu         sync.Mutex
			summary    = map[string]int{}
			reconciles atomic.Int64
		)
		hub := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "hub", Name: "summary"}}
		if err := mcbuilder.ControllerManagedBy(mgr).Named(fmt.Sprintf("aggregation-%d", nsCounter.Add(1))).
			WatchesRawSource(mcsource.FanIn(&corev1.ConfigMap{}, hub)).
			Complete(mcreconcile.Func(func(ctx context.Context, req mcreconcile.Request) (reconcile.Result, error) {
				reconciles.Add(1)
				entries, err := fleetreader.List[*corev1.ConfigMap](ctx, r, client.MatchingLabels{"bench": "aggregation"})
				if err != nil {
					return reconcile.Result{}, err
				}
				next := make(map[string]int, len(entries))
				for _, e := range entries {
					gen, _ := strconv.Atoi(e.Object.Data["gen"])
					next[e.Cluster] = gen
				}
				mu.Lock()
				summary = next
				mu.Unlock()
				return reconcile.Result{}, nil
			})); err != nil {
			b.Fatal(err)
		}
		stop := run(b, mgr)

		objs := make([]*corev1.ConfigMap, members)
		for m := range members {
			ns := seed(b, 0)
			objs[m] = &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "state", Labels: map[string]string{"bench": "aggregation"}},
				Data:       map[string]string{"gen": "-1"},
			}
			if err := c.Create(ctx, objs[m]); err != nil {
				b.Fatal(err)
			}
			cl, err := pkgclusters.NewCluster(config(), inNamespace(ns))
			if err != nil {
				b.Fatal(err)
			}
			waitFor(b, "the provider to start", func() bool { return p.Add(ctx, fmt.Sprintf("m%02d", m), cl) == nil })
		}
		seen := func(m, gen int) bool {
			mu.Lock()
			defer mu.Unlock()
			g, ok := summary[fmt.Sprintf("m%02d", m)]
			return ok && g == gen
		}
		for m := range members {
			waitFor(b, "the first summary", func() bool { return seen(m, -1) })
		}

		b.ResetTimer()
		before := reconciles.Load()
		latencies := make([]time.Duration, 0, changes)
		for k := range changes {
			m := k % members
			objs[m].Data["gen"] = strconv.Itoa(k)
			start := time.Now()
			if err := c.Update(ctx, objs[m]); err != nil {
				b.Fatal(err)
			}
			waitFor(b, "the summary of a change", func() bool { return seen(m, k) })
			latencies = append(latencies, time.Since(start))
		}
		b.StopTimer()
		b.ReportMetric(ms(percentile(latencies, 0.5)), "ms-p50/change-to-summary")
		b.ReportMetric(ms(percentile(latencies, 0.99)), "ms-p99/change-to-summary")
		b.ReportMetric(float64(reconciles.Load()-before)/changes, "reconciles/change")
		stop()
	}
}
