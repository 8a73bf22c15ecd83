package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	rtmetrics "runtime/metrics"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
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

// BenchmarkDrain holds every reconcile until all requests are queued (the
// caches of 10 clusters hold 2,000 ConfigMaps each: 20,000 requests), then
// releases them and measures how 1, 8 or 16 workers drain them with a cached
// Get each: with the fair queue, with controller-runtime's queue
// (WithFairQueue(false)), and plain controller-runtime draining 20,000
// ConfigMaps of one cluster in the same process.
//
// The main figure is the process's CPU time per reconcile over the drain
// (getrusage, user+system): on a shared machine wall-clock rates swing 2×
// between runs, CPU per reconcile does not. The drain rate is reported
// beside it. A drain lasts well under a second, so each figure is the median
// of 5 runs, the three kinds taking turns. One line per kind
// (Drain/workers=N/fair, .../plainqueue, .../controller-runtime); the fair
// line carries the ratios to plain controller-runtime: cpu-ratio (CPU per
// reconcile) and ratio (reconciles/s). DRAIN_PERF_CTL lets perf profile the
// measured windows alone (see perfControl).
func BenchmarkDrain(b *testing.B) {
	const clusters, perCluster, rounds = 10, 2000, 5
	ns := seed(b, perCluster)
	crNS := seed(b, clusters*perCluster)
	for _, workers := range []int{1, 8, 16} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			var fair, plainQ, cr drainRuns
			kinds := []func(){
				func() { fair.add(multiClusterDrain(b, ns, clusters, perCluster, workers, true)) },
				func() { plainQ.add(multiClusterDrain(b, ns, clusters, perCluster, workers, false)) },
				func() { cr.add(controllerRuntimeDrain(b, crNS, clusters*perCluster, workers)) },
			}
			for r := range rounds {
				for k := range kinds {
					kinds[(k+r)%len(kinds)]()
				}
			}
			b.Logf("runs (µs CPU/reconcile): fair %.2f, controller-runtime's queue %.2f, plain controller-runtime %.2f", fair.cpu, plainQ.cpu, cr.cpu)
			b.Logf("runs (reconciles/s): fair %.0f, controller-runtime's queue %.0f, plain controller-runtime %.0f", fair.rate, plainQ.rate, cr.rate)
			b.Logf("runs (heap allocations/reconcile, every goroutine's): fair %.1f, controller-runtime's queue %.1f, plain controller-runtime %.1f", fair.allocs, plainQ.allocs, cr.allocs)
			report(b, "fair", fair.figures(),
				figure{median(fair.cpu) / median(cr.cpu), "cpu-ratio"},
				figure{median(fair.rate) / median(cr.rate), "ratio"})
			report(b, "plainqueue", plainQ.figures())
			report(b, "controller-runtime", cr.figures())
		})
	}
}

// drainRuns collects the runs of one kind of drain.
type drainRuns struct{ rate, cpu, allocs []float64 }

func (d *drainRuns) add(r drainResult) {
	d.rate = append(d.rate, r.rate)
	d.cpu = append(d.cpu, r.cpuPerReconcile)
	d.allocs = append(d.allocs, r.allocsPerReconcile)
}

func (d *drainRuns) figures() figure { return figure{median(d.cpu), "µs-cpu/reconcile"} }

type drainResult struct {
	rate               float64 // reconciles/s
	cpuPerReconcile    float64 // µs of process CPU per reconcile
	allocsPerReconcile float64 // heap allocations of the process per reconcile
}

// heapAllocs returns the number of heap allocations the process made so far.
func heapAllocs() uint64 {
	s := []rtmetrics.Sample{{Name: "/gc/heap/allocs:objects"}}
	rtmetrics.Read(s)
	return s[0].Value.Uint64()
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

// gate holds every reconcile until released and counts them.
type gate struct {
	kind         string // fair, plainqueue or controller-runtime: which drain
	queued, done atomic.Int64
	release      chan struct{}
	// open is set before release is closed: once it is, a reconcile does not
	// receive from the closed channel, which takes the channel's lock, and
	// the workers of every kind would contend for it on every reconcile.
	open atomic.Bool
}

func newGate(kind string) *gate { return &gate{kind: kind, release: make(chan struct{})} }

func (g *gate) predicate() predicate.Funcs {
	return predicate.Funcs{CreateFunc: func(event.CreateEvent) bool { g.queued.Add(1); return true }}
}

func (g *gate) reconciled() {
	if !g.open.Load() {
		<-g.release
	}
	g.done.Add(1)
}

// measure waits until total requests are queued, releases the reconciles
// and returns the drain rate and the process's CPU time per reconcile.
func (g *gate) measure(b *testing.B, total int64) drainResult {
	waitFor(b, "every request to be queued", func() bool { return g.queued.Load() >= total })
	// The last event's Add follows its predicate at once; give the handler
	// that instant before timing.
	time.Sleep(10 * time.Millisecond)
	// No run pays for collecting the garbage of the run before it.
	runtime.GC()
	if drainProfHook != nil && (drainProfKind == "" || drainProfKind == g.kind) {
		drainProfHook(true)
		defer drainProfHook(false)
	}
	allocs0 := heapAllocs()
	begin, cpu0 := time.Now(), processCPU()
	g.open.Store(true)
	close(g.release)
	// Polled every 100µs: the poll's own CPU is counted too, equally for
	// every kind.
	for g.done.Load() < total {
		time.Sleep(100 * time.Microsecond)
		if time.Since(begin) > 2*time.Minute {
			b.Fatal("timed out waiting for the queue to drain")
		}
	}
	elapsed, cpu := time.Since(begin), processCPU()-cpu0
	allocs := heapAllocs() - allocs0
	return drainResult{
		rate:               float64(total) / elapsed.Seconds(),
		cpuPerReconcile:    float64(cpu.Microseconds()) / float64(total),
		allocsPerReconcile: float64(allocs) / float64(total),
	}
}

// drainProfHook, when set, is called with true right before a drain's
// measured window and with false right after it; with DRAIN_PERF_KIND set
// (fair, plainqueue or controller-runtime), only for the drains of that kind,
// so that a profile shows one kind's reconciles alone.
var (
	drainProfHook = perfControl()
	drainProfKind = os.Getenv("DRAIN_PERF_KIND")
)

// perfControl lets perf profile the drains alone: with DRAIN_PERF_CTL naming
// the control FIFO of a perf record started with --delay=-1 and
// --control=fifo:CTL,ACK (or fd:N,M), each measured window is enabled and
// disabled in the profile, and the setup around it (seeding, lists, cache
// sync) is left out. With DRAIN_PERF_ACK naming perf's acknowledgement FIFO,
// each command waits for perf to have carried it out: perf reads its control
// FIFO when it gets to it, and without the wait the next drain's setup
// (its lists, its queue filling up) is often profiled as part of a window.
//
//	mkfifo /tmp/ctl /tmp/ack
//	DRAIN_PERF_CTL=/tmp/ctl DRAIN_PERF_ACK=/tmp/ack DRAIN_PERF_KIND=fair \
//	  perf record --delay=-1 --control=fifo:/tmp/ctl,/tmp/ack -g -o drain.perf -- ./bench.test ...
func perfControl() func(bool) {
	path, ack := os.Getenv("DRAIN_PERF_CTL"), os.Getenv("DRAIN_PERF_ACK")
	if path == "" {
		return nil
	}
	return func(on bool) {
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			panic(fmt.Sprintf("DRAIN_PERF_CTL=%s: %v", path, err))
		}
		defer f.Close()
		cmd := "disable\n"
		if on {
			cmd = "enable\n"
		}
		if _, err := f.WriteString(cmd); err != nil {
			panic(fmt.Sprintf("DRAIN_PERF_CTL=%s: %v", path, err))
		}
		if ack == "" {
			return
		}
		a, err := os.Open(ack)
		if err != nil {
			panic(fmt.Sprintf("DRAIN_PERF_ACK=%s: %v", ack, err))
		}
		defer a.Close()
		buf := make([]byte, len("ack\n"))
		if _, err := io.ReadFull(a, buf); err != nil {
			panic(fmt.Sprintf("DRAIN_PERF_ACK=%s: %v", ack, err))
		}
	}
}

func multiClusterDrain(b *testing.B, ns string, clusters, perCluster, workers int, fair bool) drainResult {
	p := clustersprovider.New()
	mgr := newManager(b, p)
	g := newGate("plainqueue")
	if fair {
		g.kind = "fair"
	}
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

func controllerRuntimeDrain(b *testing.B, ns string, total, workers int) drainResult {
	mgr, err := manager.New(config(), manager.Options{
		Metrics:                server.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Logger:                 logr.Discard(),
		Cache:                  cacheInNamespace(ns),
	})
	if err != nil {
		b.Fatal(err)
	}
	g := newGate("controller-runtime")
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

// BenchmarkDrainQueue is the queue's share of BenchmarkDrain alone: 20,000
// requests over 10 clusters are queued, then 1, 8 or 16 workers take each,
// Forget and Done it, as controller-runtime's workers do, with nothing in
// between; the fair queue (with the controller's per-cluster cap for that
// many workers) and controller-runtime's priority queue, both named so that
// both report their workqueue metrics. The figure is the process's CPU time
// per request while the workers run; cpu-ratio is the fair queue's over
// controller-runtime's, median of 5 runs each, alternated.
func BenchmarkDrainQueue(b *testing.B) {
	const clusters, perCluster, rounds = 10, 2000, 5
	reqs := make([]mcreconcile.Request, 0, clusters*perCluster)
	for c := range clusters {
		for i := range perCluster {
			reqs = append(reqs, busyReq(fmt.Sprintf("cluster-%d", c), i))
		}
	}
	rl := func() workqueue.TypedRateLimiter[mcreconcile.Request] {
		return workqueue.NewTypedItemExponentialFailureRateLimiter[mcreconcile.Request](5*time.Millisecond, 1000*time.Second)
	}
	for _, workers := range []int{1, 8, 16} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			fair := mccontroller.FairQueue(mccontroller.Options{MaxConcurrentReconciles: workers})
			plain := mccontroller.PlainQueue(mccontroller.Options{})
			var fairCPU, plainCPU []float64
			for range rounds {
				fairCPU = append(fairCPU, drainQueue(fair(fmt.Sprintf("drainq-%d", nsCounter.Add(1)), rl()), reqs, workers))
				plainCPU = append(plainCPU, drainQueue(plain(fmt.Sprintf("drainq-%d", nsCounter.Add(1)), rl()), reqs, workers))
			}
			report(b, "fair", figure{median(fairCPU), "ns-cpu/request"}, figure{median(fairCPU) / median(plainCPU), "cpu-ratio"})
			report(b, "controller-runtime", figure{median(plainCPU), "ns-cpu/request"})
		})
	}
}

// drainQueue queues reqs in q, has workers take them all, and returns the
// process's CPU nanoseconds per request while they do; it shuts q down.
func drainQueue(q workqueue.TypedRateLimitingInterface[mcreconcile.Request], reqs []mcreconcile.Request, workers int) float64 {
	defer q.ShutDown()
	for _, r := range reqs {
		q.Add(r)
	}
	for q.Len() < len(reqs) { // controller-runtime's queue hands them over asynchronously
		time.Sleep(time.Millisecond)
	}
	runtime.GC()
	var left atomic.Int64
	left.Store(int64(len(reqs)))
	var wg sync.WaitGroup
	cpu0 := processCPU()
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for left.Add(-1) >= 0 {
				r, _ := q.Get()
				q.Forget(r)
				q.Done(r)
			}
		}()
	}
	wg.Wait()
	return float64((processCPU() - cpu0).Nanoseconds()) / float64(len(reqs))
}
