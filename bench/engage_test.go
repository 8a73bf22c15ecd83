package bench

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	mcbuilder "github.com/mcruntime/multicluster-runtime/pkg/builder"
	pkgclusters "github.com/mcruntime/multicluster-runtime/pkg/clusters"
	mcmanager "github.com/mcruntime/multicluster-runtime/pkg/manager"
	mcreconcile "github.com/mcruntime/multicluster-runtime/pkg/reconcile"
	clustersprovider "github.com/mcruntime/multicluster-runtime/providers/clusters"
)

const objectsPerCluster = 20

// fleetCounter counts reconciles per cluster and when each cluster's first
// reconcile happened.
type fleetCounter struct {
	total atomic.Int64
	mu    sync.Mutex
	first map[string]time.Time
}

func (c *fleetCounter) record(name string) {
	c.total.Add(1)
	if c.first == nil {
		return
	}
	c.mu.Lock()
	if _, ok := c.first[name]; !ok {
		c.first[name] = time.Now()
	}
	c.mu.Unlock()
}

// cachedGetReconciler reads the object from its cluster's cache, the least a
// real reconciler does, and counts.
func cachedGetReconciler(mgr mcmanager.Manager, count func(mcreconcile.Request)) mcreconcile.Reconciler {
	return mcreconcile.Func(func(ctx context.Context, req mcreconcile.Request) (reconcile.Result, error) {
		cl, err := mgr.GetCluster(ctx, req.ClusterName)
		if err != nil {
			return reconcile.Result{}, err
		}
		if err := cl.GetClient().Get(ctx, req.NamespacedName, &corev1.ConfigMap{}); err != nil {
			return reconcile.Result{}, err
		}
		count(req)
		return reconcile.Result{}, nil
	})
}

// BenchmarkEngage engages N clusters on one API server, 20 ConfigMaps each,
// and reports: the time until every ConfigMap of every cluster is reconciled,
// engage-to-first-reconcile latency, heap and goroutines per engaged cluster,
// and what is left after all are disengaged.
func BenchmarkEngage(b *testing.B) {
	for _, n := range []int{100, 500, 1000} {
		b.Run(fmt.Sprintf("clusters=%d", n), func(b *testing.B) {
			ns := seed(b, objectsPerCluster)
			for i := 0; i < b.N; i++ {
				engageOnce(b, n, ns, pkgclusters.NewCluster)
			}
		})
	}
}

// BenchmarkEngageOwnDiscovery is BenchmarkEngage with 500 clusters that do
// not share discovery data, as clusters on distinct API servers: with the
// lazy mapper of NewCluster, and with controller-runtime's own.
func BenchmarkEngageOwnDiscovery(b *testing.B) {
	mappers := map[string]func(*rest.Config, *http.Client) (meta.RESTMapper, error){
		"mapper=lazy":               pkgclusters.NewLazyRESTMapper,
		"mapper=controller-runtime": apiutil.NewDynamicRESTMapper,
	}
	for _, name := range []string{"mapper=lazy", "mapper=controller-runtime"} {
		b.Run(name, func(b *testing.B) {
			ns := seed(b, objectsPerCluster)
			build := func(cfg *rest.Config, opts ...cluster.Option) (cluster.Cluster, error) {
				return cluster.New(cfg, append(opts, func(o *cluster.Options) { o.MapperProvider = mappers[name] })...)
			}
			for i := 0; i < b.N; i++ {
				engageOnce(b, 500, ns, build)
			}
		})
	}
}

func engageOnce(b *testing.B, n int, ns string, newCluster func(*rest.Config, ...cluster.Option) (cluster.Cluster, error)) {
	p := clustersprovider.New()
	mgr := newManager(b, p)
	counter := &fleetCounter{first: map[string]time.Time{}}
	if err := mcbuilder.ControllerManagedBy(mgr).Named(fmt.Sprintf("engage-%s-%d", ns, nsCounter.Add(1))).For(&corev1.ConfigMap{}).
		Complete(cachedGetReconciler(mgr, func(req mcreconcile.Request) { counter.record(req.ClusterName) })); err != nil {
		b.Fatal(err)
	}
	stop := run(b, mgr)
	defer stop()
	ctx := context.Background()
	// Wait for the provider to run, so that Add engages at once.
	probe, _ := newCluster(config(), inNamespace(ns))
	if err := p.Add(ctx, "probe", probe); err != nil {
		b.Fatal(err)
	}
	waitFor(b, "the provider to start", func() bool { _, err := mgr.GetCluster(ctx, "probe"); return err == nil })
	waitFor(b, "the probe's reconciles", func() bool { return counter.total.Load() == objectsPerCluster })
	p.Remove("probe")
	waitFor(b, "the probe to leave", func() bool { _, err := mgr.GetCluster(ctx, "probe"); return err != nil })
	counter.total.Store(0)

	heap0, g0 := heapAndGoroutines()
	b.ResetTimer()
	started := make([]time.Time, n)
	errs := make(chan error, n)
	begin := time.Now()
	for i := range n {
		go func() {
			name := fmt.Sprintf("c%04d", i)
			started[i] = time.Now()
			cl, err := newCluster(config(), inNamespace(ns))
			if err == nil {
				err = p.Add(ctx, name, cl)
			}
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			b.Fatal(err)
		}
	}
	want := int64(n * objectsPerCluster)
	waitFor(b, "every reconcile", func() bool { return counter.total.Load() >= want })
	elapsed := time.Since(begin)
	b.StopTimer()

	var herd []time.Duration
	counter.mu.Lock()
	for i := range n {
		herd = append(herd, counter.first[fmt.Sprintf("c%04d", i)].Sub(started[i]))
	}
	counter.mu.Unlock()
	heap1, g1 := heapAndGoroutines()

	// One cluster joining the engaged fleet at a time: engage to first reconcile.
	var joins []time.Duration
	for i := range 20 {
		name := fmt.Sprintf("join%02d", i)
		before := counter.total.Load()
		begin := time.Now()
		cl, err := newCluster(config(), inNamespace(ns))
		if err != nil {
			b.Fatal(err)
		}
		if err := p.Add(ctx, name, cl); err != nil {
			b.Fatal(err)
		}
		waitFor(b, name+"'s first reconcile", func() bool {
			counter.mu.Lock()
			defer counter.mu.Unlock()
			_, ok := counter.first[name]
			return ok
		})
		joins = append(joins, time.Since(begin))
		waitFor(b, name+"'s reconciles", func() bool { return counter.total.Load() == before+objectsPerCluster })
	}

	for _, name := range p.ClusterNames() {
		p.Remove(name)
	}
	waitFor(b, "every cluster to disengage", func() bool { return len(p.ClusterNames()) == 0 })
	heap2, g2 := settle(g0)

	b.ReportMetric(elapsed.Seconds(), "s/all-reconciled")
	b.ReportMetric(ms(percentile(joins, 0.5)), "ms-p50/join-first-reconcile")
	b.ReportMetric(ms(percentile(joins, 0.99)), "ms-p99/join-first-reconcile")
	b.ReportMetric(ms(percentile(herd, 0.5)), "ms-p50/herd-first-reconcile")
	b.ReportMetric(float64(int64(heap1)-int64(heap0))/float64(n)/1024, "KB-heap/cluster")
	b.ReportMetric(float64(g1-g0)/float64(n), "goroutines/cluster")
	b.ReportMetric(float64(g2-g0), "goroutines-left")
	b.ReportMetric(float64(int64(heap2)-int64(heap0))/1024, "KB-heap-left")
}
