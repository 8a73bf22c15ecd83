package bench

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	mcbuilder "github.com/mcruntime/multicluster-runtime/pkg/builder"
	pkgclusters "github.com/mcruntime/multicluster-runtime/pkg/clusters"
	mccontroller "github.com/mcruntime/multicluster-runtime/pkg/controller"
	mcreconcile "github.com/mcruntime/multicluster-runtime/pkg/reconcile"
	clustersprovider "github.com/mcruntime/multicluster-runtime/providers/clusters"
)

func busyReq(cluster string, i int) mcreconcile.Request {
	return mcreconcile.Request{ClusterName: cluster, Request: reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: fmt.Sprintf("obj-%d", i)}}}
}

func newFairQueue() workqueue.TypedRateLimitingInterface[mcreconcile.Request] {
	return namedFairQueue("")
}

func newPlainQueue() workqueue.TypedRateLimitingInterface[mcreconcile.Request] {
	return namedPlainQueue("")
}

// namedFairQueue returns the fair queue of a controller with one worker;
// name labels its metrics ("" for none).
func namedFairQueue(name string) workqueue.TypedRateLimitingInterface[mcreconcile.Request] {
	return mccontroller.FairQueue(mccontroller.Options{})(name, workqueue.NewTypedItemExponentialFailureRateLimiter[mcreconcile.Request](5*time.Millisecond, 1000*time.Second))
}

// namedPlainQueue returns controller-runtime's priority queue.
func namedPlainQueue(name string) workqueue.TypedRateLimitingInterface[mcreconcile.Request] {
	return mccontroller.PlainQueue(mccontroller.Options{})(name, workqueue.NewTypedItemExponentialFailureRateLimiter[mcreconcile.Request](5*time.Millisecond, 1000*time.Second))
}

// BenchmarkStarvation queues 5,000 requests for one busy cluster, lets one
// worker take them (each reconcile takes 1ms), then queues a request for a
// quiet cluster and measures the time until the worker starts it: p50 and
// p99 over 200 trials for the fair queue, over 3 trials for controller-
// runtime's priority queue (each of which waits for the whole backlog).
func BenchmarkStarvation(b *testing.B) {
	for i := 0; i < b.N; i++ {
		fair := starvation(b, newFairQueue, 200)
		plain := starvation(b, newPlainQueue, 3)
		b.ReportMetric(ms(percentile(fair, 0.5)), "ms-p50-fair")
		b.ReportMetric(ms(percentile(fair, 0.99)), "ms-p99-fair")
		b.ReportMetric(ms(percentile(plain, 0.5)), "ms-p50-plain")
		b.ReportMetric(ms(percentile(plain, 0.99)), "ms-p99-plain")
	}
}

func starvation(b *testing.B, newQueue func() workqueue.TypedRateLimitingInterface[mcreconcile.Request], trials int) []time.Duration {
	const backlog = 5000
	quiet := busyReq("quiet", 0)
	var waits []time.Duration
	for range trials {
		q := newQueue()
		for i := range backlog {
			q.Add(busyReq("busy", i))
		}
		var started atomic.Int64
		var quietAdded time.Time
		got := make(chan time.Duration, 1)
		go func() { // the controller's worker
			for {
				r, shutdown := q.Get()
				if shutdown {
					return
				}
				if r == quiet {
					got <- time.Since(quietAdded)
				} else {
					started.Add(1)
					time.Sleep(time.Millisecond)
				}
				q.Forget(r)
				q.Done(r)
			}
		}()
		waitFor(b, "the worker to start", func() bool { return started.Load() > 0 })
		quietAdded = time.Now()
		q.Add(quiet)
		waits = append(waits, <-got)
		q.ShutDown()
	}
	return waits
}

// BenchmarkQueueMemory reports the heap per queued request (100,000 requests
// over 100 clusters) of the fair queue and of controller-runtime's priority
// queue.
func BenchmarkQueueMemory(b *testing.B) {
	const clusters, perCluster = 100, 1000
	measure := func(newQueue func() workqueue.TypedRateLimitingInterface[mcreconcile.Request]) float64 {
		reqs := make([]mcreconcile.Request, 0, clusters*perCluster)
		for c := range clusters {
			for i := range perCluster {
				reqs = append(reqs, busyReq(fmt.Sprintf("cluster-%d", c), i))
			}
		}
		before, _ := heapAndGoroutines()
		q := newQueue()
		for _, r := range reqs {
			q.Add(r)
		}
		waitFor(b, "the queue to hold every request", func() bool { return q.Len() == len(reqs) })
		after, _ := heapAndGoroutines()
		q.ShutDown()
		runtime.KeepAlive(reqs)
		return float64(int64(after)-int64(before)) / float64(len(reqs))
	}
	for i := 0; i < b.N; i++ {
		b.ReportMetric(measure(newFairQueue), "B/item-fair")
		b.ReportMetric(measure(newPlainQueue), "B/item-plain")
	}
}

// BenchmarkDrain holds every reconcile until all requests are queued (the
// caches of 10 clusters hold 2,000 ConfigMaps each: 20,000 requests), then
// reports how fast 1 or 8 workers drain them with a cached Get each: with
// the fair queue, with controller-runtime's queue (WithFairQueue(false)), and
// plain controller-runtime draining 20,000 ConfigMaps of one cluster in the
// same run; ratio is fair / controller-runtime. A drain lasts well under a
// second, so on a shared machine one run says little: each figure is the
// median of 5 runs, the three kinds taking turns.
func BenchmarkDrain(b *testing.B) {
	const clusters, perCluster, rounds = 10, 2000, 5
	ns := seed(b, perCluster)
	crNS := seed(b, clusters*perCluster)
	for _, workers := range []int{1, 8} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				var fair, plainQ, cr []float64
				kinds := []func(){
					func() { fair = append(fair, multiClusterDrain(b, ns, clusters, perCluster, workers, true)) },
					func() { plainQ = append(plainQ, multiClusterDrain(b, ns, clusters, perCluster, workers, false)) },
					func() { cr = append(cr, controllerRuntimeDrain(b, crNS, clusters*perCluster, workers)) },
				}
				for r := range rounds {
					for k := range kinds {
						kinds[(k+r)%len(kinds)]()
					}
				}
				b.Logf("runs (reconciles/s): fair %.0f, controller-runtime's queue %.0f, plain controller-runtime %.0f", fair, plainQ, cr)
				b.ReportMetric(median(fair), "reconciles/s-fair")
				b.ReportMetric(median(plainQ), "reconciles/s-plainqueue")
				b.ReportMetric(median(cr), "reconciles/s-controller-runtime")
				b.ReportMetric(median(fair)/median(cr), "ratio")
			}
		})
	}
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

// gate holds every reconcile until released and counts them.
type gate struct {
	queued, done atomic.Int64
	release      chan struct{}
}

func newGate() *gate { return &gate{release: make(chan struct{})} }

func (g *gate) predicate() predicate.Funcs {
	return predicate.Funcs{CreateFunc: func(event.CreateEvent) bool { g.queued.Add(1); return true }}
}

func (g *gate) reconciled() {
	<-g.release
	g.done.Add(1)
}

// measure waits until total requests are queued, releases the reconciles
// and returns the drain rate.
func (g *gate) measure(b *testing.B, total int64) float64 {
	waitFor(b, "every request to be queued", func() bool { return g.queued.Load() >= total })
	// The last event's Add follows its predicate at once; give the handler
	// that instant before timing.
	time.Sleep(10 * time.Millisecond)
	begin := time.Now()
	close(g.release)
	waitFor(b, "the queue to drain", func() bool { return g.done.Load() >= total })
	return float64(total) / time.Since(begin).Seconds()
}

func multiClusterDrain(b *testing.B, ns string, clusters, perCluster, workers int, fair bool) float64 {
	p := clustersprovider.New()
	mgr := newManager(b, p)
	g := newGate()
	if err := mcbuilder.ControllerManagedBy(mgr).Named(fmt.Sprintf("drain-%d", nsCounter.Add(1))).
		For(&corev1.ConfigMap{}).WithEventFilter(g.predicate()).
		WithOptions(mccontroller.Options{MaxConcurrentReconciles: workers}).
		WithFairQueue(fair).
		Complete(cachedGetReconciler(mgr, func(mcreconcile.Request) { g.reconciled() })); err != nil {
		b.Fatal(err)
	}
	stop := run(b, mgr)
	defer stop()
	for c := range clusters {
		cl, err := pkgclusters.NewCluster(config(), inNamespace(ns))
		if err != nil {
			b.Fatal(err)
		}
		if err := p.Add(context.Background(), fmt.Sprintf("drain-%d", c), cl); err != nil {
			b.Fatal(err)
		}
	}
	return g.measure(b, int64(clusters*perCluster))
}

func controllerRuntimeDrain(b *testing.B, ns string, total, workers int) float64 {
	mgr, err := manager.New(config(), manager.Options{
		Metrics:                server.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Logger:                 logr.Discard(),
		Cache:                  cacheInNamespace(ns),
	})
	if err != nil {
		b.Fatal(err)
	}
	g := newGate()
	if err := builder.ControllerManagedBy(mgr).Named(fmt.Sprintf("cr-drain-%d", nsCounter.Add(1))).
		For(&corev1.ConfigMap{}).WithEventFilter(g.predicate()).
		WithOptions(controller.Options{MaxConcurrentReconciles: workers}).
		Complete(reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
			if err := mgr.GetClient().Get(ctx, req.NamespacedName, &corev1.ConfigMap{}); err != nil {
				return reconcile.Result{}, err
			}
			g.reconciled()
			return reconcile.Result{}, nil
		})); err != nil {
		b.Fatal(err)
	}
	stop := run(b, mgr)
	defer stop()
	return g.measure(b, int64(total))
}
