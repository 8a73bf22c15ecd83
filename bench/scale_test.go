package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	mcbuilder "github.com/mcruntime/multicluster-runtime/pkg/builder"
	pkgclusters "github.com/mcruntime/multicluster-runtime/pkg/clusters"
	"github.com/mcruntime/multicluster-runtime/pkg/fleet"
	mcmanager "github.com/mcruntime/multicluster-runtime/pkg/manager"
	mcreconcile "github.com/mcruntime/multicluster-runtime/pkg/reconcile"
	clustersprovider "github.com/mcruntime/multicluster-runtime/providers/clusters"
)

// BenchmarkScale starts a manager whose provider knows N clusters at start-up
// (1,000, 5,000 and 10,000 on one real API server, 20 ConfigMaps each), as a
// file provider with N kubeconfigs would, and measures until every ConfigMap
// of every cluster is reconciled with a cached Get (16 workers, the default);
// then, in the same process, the floor: bare client-go informers, one per
// cluster, doing the same lists and watches, their events reconciled by 16
// workers from one workqueue with a read of the cluster's informer cache, and
// no library. Skipped by -short; SCALE_CLUSTERS=N runs N clusters alone.
//
// SCALE_ROUNDS=k (default 1) measures each size k times, alternating which
// side goes first (round 1 the library, round 2 the floor, ...): the two
// sides share the API server and the two cores, so a single pair says little.
// Before each side starts, the benchmark waits (up to two minutes, logged,
// and logged as TIMED OUT if it did not come) until the process's goroutines
// (HTTP connections' read loops aside), the API server's long-running
// requests (apiserver_longrunning_requests, watches mostly) and the TCP
// connections to the API server are back at what they were before the first
// side ran, idle pooled connections closed: no side pays for the teardown of
// the one before it, and each starts with no pooled connection, as the first
// did (see idleState). A connection that the benchmark cannot close is left
// to the API server's 90 s idle timeout, which the wait then lasts.
//
// One line per kind (Scale/clusters=N/multicluster, .../client-go): s/all-
// reconciled and ms-cpu/cluster (wall time and process CPU on each side from
// before its clients are built, NewCluster's for the library, the clientsets
// and informers for the floor, until every object is reconciled), KB-
// heap/cluster and goroutines/cluster (after two GCs, once all are
// reconciled; the heap counted from before the clusters, or the floor's
// clients and informers, were built; goroutine descriptors, which the runtime
// never frees, not counted on either side: see warmGoroutines) and
// %core-idle (the process's CPU over the next two default probe intervals,
// one core = 100). The multicluster line adds what only the library has:
// s/build (the NewCluster loop, part of s/all-reconciled), s/readyz (when the
// "clusters" readyz check first passes, from the same start), %core-probing
// (its idle CPU above the floor's: health probes at the default interval,
// mostly), probes/s, metrics-series (series in controller-runtime's registry
// added by the fleet), %wall-engine-lock and %wall-fairqueue-lock (time
// goroutines waited for a lock released in the fleet engine, or in the fair
// queue, from the mutex profile, summed over the waiting goroutines, as a
// share of the time to all reconciled; µs-engine-lock/cluster is the same
// wait per cluster), and the ratios to the floor: time-ratio, cpu-ratio,
// heap-ratio. With k > 1 rounds, each round prints its own lines
// (.../multicluster-roundR and .../client-go-roundR, with that round's
// ratios), and the multicluster and client-go lines carry the median of each
// figure over the rounds, the ratios being the median of the rounds' ratios,
// followed by their min and max (time-ratio-min, time-ratio-max, ...).
// SCALE_CPUPROFILE=DIR writes a CPU profile of each side of each round, from
// its start until all are reconciled, as DIR/KIND-N-roundR.cpu.
func BenchmarkScale(b *testing.B) {
	sizes := []int{1000, 5000, 10000}
	if s := os.Getenv("SCALE_CLUSTERS"); s != "" {
		// For a quick look, e.g. SCALE_CLUSTERS=200.
		n, err := strconv.Atoi(s)
		if err != nil {
			b.Fatalf("SCALE_CLUSTERS=%q: %v", s, err)
		}
		sizes = []int{n}
	}
	if testing.Short() {
		b.Skip("10,000 clusters on one API server take minutes; skipped by -short")
	}
	rounds := scaleRounds(b)
	ns := seed(b, objectsPerCluster)
	defer recordLockWaits()()
	var idle *idleState // before the first side ran, measured in a size's benchmark (as deep in goroutines as the waits)
	for _, n := range sizes {
		b.Run(fmt.Sprintf("clusters=%d", n), func(b *testing.B) {
			warmGoroutines(16 * n)
			if idle == nil {
				s := idleBaseline(b)
				idle = &s
			}
			var mc, floor scaleResult
			alternateRounds(b, rounds, *idle,
				func(round int) { mc = scaleMultiCluster(b, n, ns, round) },
				func(round int) { floor = scaleFloor(b, n, ns, false, fmt.Sprintf("client-go-%d-round%d", n, round)) },
				func() ([]figure, []figure) { return mc.besideFloor(n, floor), floor.figures(n) })
		})
	}
}

type scaleResult struct {
	all        time.Duration // start to every object reconciled
	cpu        time.Duration // process CPU over all
	heap       int64         // live heap added, bytes
	goroutines int           // goroutines added
	idle       float64       // % of one core over one probe interval after all

	build, readyz         time.Duration
	probes                float64 // per second, while idle
	series                int
	engineLock, queueLock float64 // % of all
	engineLockPerCluster  float64 // µs
}

func (r scaleResult) figures(n int) []figure {
	return []figure{
		{r.all.Seconds(), "s/all-reconciled"},
		{float64(r.cpu.Microseconds()) / 1000 / float64(n), "ms-cpu/cluster"},
		{float64(r.heap) / 1024 / float64(n), "KB-heap/cluster"},
		{float64(r.goroutines) / float64(n), "goroutines/cluster"},
		{r.idle, "%core-idle"},
	}
}

// besideFloor is the multicluster line's figures: r's, what only the library
// has, and the ratios to floor, measured in the same round.
func (r scaleResult) besideFloor(n int, floor scaleResult) []figure {
	return append(r.figures(n),
		figure{r.build.Seconds(), "s/build"},
		figure{r.readyz.Seconds(), "s/readyz"},
		figure{r.idle - floor.idle, "%core-probing"},
		figure{r.probes, "probes/s"},
		figure{float64(r.series), "metrics-series"},
		figure{r.engineLock, "%wall-engine-lock"},
		figure{r.queueLock, "%wall-fairqueue-lock"},
		figure{r.engineLockPerCluster, "µs-engine-lock/cluster"},
		figure{r.all.Seconds() / floor.all.Seconds(), "time-ratio"},
		figure{r.cpu.Seconds() / floor.cpu.Seconds(), "cpu-ratio"},
		figure{float64(r.heap) / float64(floor.heap), "heap-ratio"},
	)
}

func scaleMultiCluster(b *testing.B, n int, ns string, round int) scaleResult {
	p := clustersprovider.New()
	mgr := newManager(b, p)
	counter := &fleetCounter{first: map[string]time.Time{}}
	if err := mcbuilder.ControllerManagedBy(mgr).Named(fmt.Sprintf("scale-%d", nsCounter.Add(1))).For(&corev1.ConfigMap{}).
		Complete(cachedGetReconciler(mgr, func(r mcreconcile.Request) { counter.record(string(r.ClusterName)) })); err != nil {
		b.Fatal(err)
	}
	eng := mgr.(mcmanager.FleetOwner).Fleet()
	ctx := context.Background()
	// The heap counts from before the clusters are built, as the floor's
	// counts its clients and informers: what NewCluster holds per cluster is
	// the library's too.
	heap0, _ := heapAndGoroutines()
	writeProfiles(b, fmt.Sprintf("multicluster-%d-start", n))
	// Time and CPU count from here, building the clusters included, as the
	// floor's count building its clientsets and informers.
	stopProfile := cpuProfile(b, fmt.Sprintf("multicluster-%d-round%d", n, round))
	defer stopProfile()
	begin, cpu0 := time.Now(), processCPU()
	for i := range n {
		cl, err := pkgclusters.NewCluster(config(), inNamespace(ns))
		if err != nil {
			b.Fatal(err)
		}
		// Before the manager starts, Add only makes the cluster known.
		if err := p.Add(ctx, fmt.Sprintf("s%05d", i), cl); err != nil {
			b.Fatal(err)
		}
	}
	build := time.Since(begin)
	series0 := seriesCount(b)
	lock0 := lockWaits(b)
	g0 := runtime.NumGoroutine()
	stop := run(b, mgr)
	defer stop() // the next side, or the next size, waits for the teardown
	var readyz atomic.Int64
	go func() {
		for eng.Ready(nil) != nil {
			time.Sleep(10 * time.Millisecond)
		}
		readyz.Store(int64(time.Since(begin)))
	}()
	want := int64(n * objectsPerCluster)
	if !pollLong(func() bool { return counter.total.Load() >= want }) {
		b.Fatalf("timed out waiting for every reconcile: %d of %d; %s", counter.total.Load(), want, unreconciled(eng, counter))
	}
	r := scaleResult{all: time.Since(begin), cpu: processCPU() - cpu0, build: build}
	stopProfile()
	lock1 := lockWaits(b)
	r.engineLock = 100 * (lock1.engine - lock0.engine).Seconds() / r.all.Seconds()
	r.queueLock = 100 * (lock1.queue - lock0.queue).Seconds() / r.all.Seconds()
	r.engineLockPerCluster = float64((lock1.engine - lock0.engine).Microseconds()) / float64(n)
	heap1, g1 := heapAndGoroutines()
	r.heap, r.goroutines = int64(heap1)-int64(heap0), g1-g0
	writeProfiles(b, fmt.Sprintf("multicluster-%d", n))
	r.series = seriesCount(b) - series0
	probes0 := histogramCount()
	r.idle = idleCPU()
	r.probes = (histogramCount() - probes0) / idleWindow.Seconds()
	waitForLong(b, "the readyz check", func() bool { return readyz.Load() != 0 })
	r.readyz = time.Duration(readyz.Load())
	return r
}

// scaleFloor is the same work with bare client-go: an informer per cluster
// (listing and watching ConfigMaps with the same field selector, managed
// fields stripped as controller-runtime's cache does), started all at once
// (serial: one after another, each once the one before has synced, the
// workers starting after the last) and reconciled by 16 workers from one
// workqueue, each reading the object from
// its cluster's informer cache. profile names its CPU profile (see
// cpuProfile).
func scaleFloor(b *testing.B, n int, ns string, serial bool, profile string) scaleResult {
	type key struct {
		cluster int
		types.NamespacedName
	}
	var done atomic.Int64
	heap0, g0 := heapAndGoroutines()
	writeProfiles(b, fmt.Sprintf("client-go-%d-start", n))
	stopProfile := cpuProfile(b, profile)
	defer stopProfile()
	begin, cpu0 := time.Now(), processCPU()
	ctx, cancel := context.WithCancel(context.Background())
	q := workqueue.NewTyped[key]()
	informers := make([]toolscache.SharedIndexInformer, n)
	var started sync.WaitGroup
	for i := range n {
		start := func() {
			cs, err := corev1client.NewForConfig(config())
			if err != nil {
				b.Error(err)
				return
			}
			lw := toolscache.NewFilteredListWatchFromClient(cs.RESTClient(), "configmaps", metav1.NamespaceAll, func(o *metav1.ListOptions) {
				o.FieldSelector = "metadata.namespace=" + ns
			})
			inf := toolscache.NewSharedIndexInformer(lw, &corev1.ConfigMap{}, 0, toolscache.Indexers{})
			_ = inf.SetTransform(crcache.TransformStripManagedFields())
			enqueue := func(obj any) {
				if o, ok := obj.(metav1.Object); ok {
					q.Add(key{i, types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetName()}})
				}
			}
			if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
				AddFunc:    enqueue,
				UpdateFunc: func(_, obj any) { enqueue(obj) },
				DeleteFunc: enqueue,
			}); err != nil {
				b.Error(err)
				return
			}
			informers[i] = inf
			go inf.Run(ctx.Done())
		}
		if !serial {
			started.Go(start)
			continue
		}
		start()
		if inf := informers[i]; inf != nil {
			select {
			case <-inf.HasSyncedChecker().Done():
			case <-time.After(2 * time.Minute):
				b.Fatalf("informer %d did not sync in 2 minutes", i)
			}
		}
	}
	started.Wait()
	var workers sync.WaitGroup
	for range 16 {
		workers.Go(func() {
			for {
				k, shutdown := q.Get()
				if shutdown {
					return
				}
				if _, ok, err := informers[k.cluster].GetIndexer().GetByKey(k.Namespace + "/" + k.Name); err == nil && ok {
					done.Add(1)
				}
				q.Done(k)
			}
		})
	}
	defer func() {
		cancel()
		q.ShutDown()
		workers.Wait()
	}()
	want := int64(n * objectsPerCluster)
	waitForLong(b, "every reconcile", func() bool { return done.Load() >= want })
	r := scaleResult{all: time.Since(begin), cpu: processCPU() - cpu0}
	stopProfile()
	heap1, g1 := heapAndGoroutines()
	r.heap, r.goroutines = int64(heap1)-int64(heap0), g1-g0
	writeProfiles(b, fmt.Sprintf("client-go-%d", n))
	r.idle = idleCPU()
	return r
}

func init() {
	if os.Getenv("SCALE_HEAPPROFILE") != "" {
		// One sample per 4 KiB allocated instead of 512 KiB: per-cluster
		// structures of a few hundred bytes show up at a thousand clusters.
		runtime.MemProfileRate = 4096
	}
}

// warmGoroutines starts n goroutines and lets them end, so that neither side
// of the scale benchmark counts goroutine descriptors in its heap. The runtime
// never frees one (it keeps it for the next goroutine), so without this the
// side measured first paid for every descriptor, a few hundred bytes for each
// of its goroutines (8 KB per cluster at 12 goroutines per cluster), and the
// floor, measured second, reused them for nothing. Goroutines are counted
// apart, as goroutines/cluster.
func warmGoroutines(n int) {
	var wg sync.WaitGroup
	release := make(chan struct{})
	for range n {
		wg.Go(func() { <-release })
	}
	close(release)
	wg.Wait()
}

// writeProfiles writes the heap (inuse_space after the two collections of
// heapAndGoroutines) and goroutine profiles of the process, once everything is
// reconciled, as DIR/NAME.heap and DIR/NAME.goroutine, when SCALE_HEAPPROFILE=DIR
// is set, and the same at the start of the measure as NAME-start.*: to see
// what a cluster costs beyond the floor's informer, compare each side against
// its start, e.g. go tool pprof -sample_index=inuse_space -top -base
// DIR/multicluster-1000-start.heap DIR/multicluster-1000.heap.
func writeProfiles(b *testing.B, name string) {
	dir := os.Getenv("SCALE_HEAPPROFILE")
	if dir == "" {
		return
	}
	for _, kind := range []string{"heap", "goroutine"} {
		f, err := os.Create(filepath.Join(dir, name+"."+kind))
		if err != nil {
			b.Fatal(err)
		}
		if err := pprof.Lookup(kind).WriteTo(f, 0); err != nil {
			b.Fatal(err)
		}
		if err := f.Close(); err != nil {
			b.Fatal(err)
		}
	}
	// The goroutines as text, each with where it was created.
	f, err := os.Create(filepath.Join(dir, name+".goroutines.txt"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if err := pprof.Lookup("goroutine").WriteTo(f, 2); err != nil {
		b.Fatal(err)
	}
}

// idleWindow is how long idle CPU is measured: two default probe intervals,
// so that every cluster is probed in it whatever its phase.
const idleWindow = 2 * fleet.DefaultProbeInterval

// idleCPU is the process's CPU over idleWindow, in % of one core.
func idleCPU() float64 {
	cpu0 := processCPU()
	time.Sleep(idleWindow)
	return 100 * (processCPU() - cpu0).Seconds() / idleWindow.Seconds()
}

// seriesCount is the number of series in controller-runtime's registry.
func seriesCount(b *testing.B) int {
	mfs, err := crmetrics.Registry.Gather()
	if err != nil {
		b.Fatal(err)
	}
	n := 0
	for _, mf := range mfs {
		n += len(mf.GetMetric())
	}
	return n
}

// waitForLong is waitFor with a bound for fleets of thousands: ten minutes.
func waitForLong(b *testing.B, what string, cond func() bool) {
	if !pollLong(cond) {
		b.Fatalf("timed out waiting for %s", what)
	}
}

// pollLong polls cond for up to ten minutes and reports whether it held.
func pollLong(cond func() bool) bool {
	deadline := time.Now().Add(10 * time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
	return true
}

// unreconciled says which clusters had no reconcile yet and what the engine
// says of them, for a run that timed out.
func unreconciled(eng *fleet.Engine, counter *fleetCounter) string {
	states := map[fleet.State]int{}
	var missing []string
	counter.mu.Lock()
	defer counter.mu.Unlock()
	for _, st := range eng.Clusters() {
		if _, ok := counter.first[string(st.Name)]; !ok {
			states[st.State]++
			if len(missing) < 10 {
				missing = append(missing, fmt.Sprintf("%s (%s)", st.Name, st.State))
			}
		}
	}
	return fmt.Sprintf("clusters with no reconcile by state: %v, e.g. %v", states, missing)
}
