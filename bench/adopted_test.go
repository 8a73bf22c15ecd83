package bench

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	mcbuilder "github.com/mcruntime/multicluster-runtime/pkg/builder"
	pkgclusters "github.com/mcruntime/multicluster-runtime/pkg/clusters"
	mcreconcile "github.com/mcruntime/multicluster-runtime/pkg/reconcile"
)

// adoptingProvider is the seeds' custom provider: it embeds
// clusters.Clusters, builds each cluster itself and hands it to the manager
// with Add, which starts it, waits for its cache and engages it: the fleet
// engine adopts a cluster its provider runs.
type adoptingProvider struct {
	pkgclusters.Clusters[cluster.Cluster]
}

// BenchmarkAdopted measures the seeds' custom-provider path: N clusters
// (500; ADOPTED_CLUSTERS=N sets another count) on one API server, 20
// ConfigMaps each, each built with clusters.NewCluster and added with
// Clusters.Add(ctx, name, cl, mgr) to a running manager with one controller
// (a cached Get per ConfigMap, 16 workers). serial adds one cluster after
// another, each Add returning once the cluster is engaged (engaged means its
// controller's watch synced); concurrent adds all at once. Beside it, in the
// same process, the floor of BenchmarkScale: bare client-go informers doing
// the same lists and watches, started one after another (each once the one
// before has synced) for serial, all at once for concurrent.
//
// Lines and figures are BenchmarkScale's (s/all-reconciled and ms-cpu/cluster
// from before the first cluster is built until every ConfigMap is
// reconciled, KB-heap/cluster, goroutines/cluster, %core-idle, and on the
// multicluster line the ratios to the floor of the same round); SCALE_ROUNDS
// alternates which side goes first, SCALE_CPUPROFILE=DIR writes each side's
// CPU profile as DIR/adopted-MODE-N-roundR.cpu and
// DIR/client-go-MODE-N-roundR.cpu. Skipped by -short.
func BenchmarkAdopted(b *testing.B) {
	n := 500
	if s := os.Getenv("ADOPTED_CLUSTERS"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil || n < 1 {
			b.Fatalf("ADOPTED_CLUSTERS=%q: want a count of at least 1", s)
		}
	}
	if testing.Short() {
		b.Skip("hundreds of clusters engaged one after another take a minute; skipped by -short")
	}
	rounds := scaleRounds(b)
	ns := seed(b, objectsPerCluster)
	warmGoroutines(16 * n)
	var idle *idleState // measured in a mode's benchmark, as deep in goroutines as the waits
	for _, serial := range []bool{true, false} {
		mode := "concurrent"
		if serial {
			mode = "serial"
		}
		b.Run(fmt.Sprintf("clusters=%d/%s", n, mode), func(b *testing.B) {
			if idle == nil {
				s := idleBaseline(b)
				idle = &s
			}
			alternateResultRounds(b, n, rounds, *idle, "adopted",
				func(r int) scaleResult {
					return adoptedRun(b, n, ns, serial, fmt.Sprintf("adopted-%s-%d-round%d", mode, n, r))
				},
				func(r int) scaleResult {
					return scaleFloor(b, n, ns, serial, fmt.Sprintf("client-go-%s-%d-round%d", mode, n, r))
				},
				func(mc, floor scaleResult) []figure { return mc.beside(n, floor) })
		})
	}
}

// beside is r's figures with the ratios to floor, measured in the same round.
func (r scaleResult) beside(n int, floor scaleResult) []figure {
	return append(r.figures(n),
		figure{r.all.Seconds() / floor.all.Seconds(), "time-ratio"},
		figure{r.cpu.Seconds() / floor.cpu.Seconds(), "cpu-ratio"},
		figure{float64(r.heap) / float64(floor.heap), "heap-ratio"},
	)
}

// adoptedRun is one measure of the library's side of BenchmarkAdopted.
func adoptedRun(b *testing.B, n int, ns string, serial bool, profile string) scaleResult {
	p := &adoptingProvider{}
	mgr := newManager(b, p)
	counter := &fleetCounter{}
	if err := mcbuilder.ControllerManagedBy(mgr).Named(fmt.Sprintf("adopted-%d", nsCounter.Add(1))).For(&corev1.ConfigMap{}).
		Complete(cachedGetReconciler(mgr, func(r mcreconcile.Request) { counter.record(r.ClusterName) })); err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	stop := run(b, mgr)
	defer func() {
		cancel() // every cluster's ctx: they stop and leave
		stop()
	}()
	// The manager runs once a first cluster is engaged and reconciled; it
	// leaves before the measure.
	probe, err := pkgclusters.NewCluster(config(), inNamespace(ns))
	if err != nil {
		b.Fatal(err)
	}
	probeCtx, removeProbe := context.WithCancel(ctx)
	if err := p.Add(probeCtx, "probe", probe, mgr); err != nil {
		b.Fatal(err)
	}
	waitFor(b, "the probe's reconciles", func() bool { return counter.total.Load() == objectsPerCluster })
	removeProbe()
	waitFor(b, "the probe to leave", func() bool { _, err := mgr.GetCluster(ctx, "probe"); return err != nil })
	counter.total.Store(0)

	heap0, g0 := heapAndGoroutines()
	stopProfile := cpuProfile(b, profile)
	defer stopProfile()
	begin, cpu0 := time.Now(), processCPU()
	add := func(i int) error {
		cl, err := pkgclusters.NewCluster(config(), inNamespace(ns))
		if err != nil {
			return err
		}
		return p.Add(ctx, fmt.Sprintf("a%05d", i), cl, mgr)
	}
	if serial {
		for i := range n {
			if err := add(i); err != nil {
				b.Fatal(err)
			}
		}
	} else {
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() { errs[i] = add(i) })
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				b.Fatal(err)
			}
		}
	}
	want := int64(n * objectsPerCluster)
	waitForLong(b, "every reconcile", func() bool { return counter.total.Load() >= want })
	r := scaleResult{all: time.Since(begin), cpu: processCPU() - cpu0}
	stopProfile()
	heap1, g1 := heapAndGoroutines()
	r.heap, r.goroutines = int64(heap1)-int64(heap0), g1-g0
	r.idle = idleCPU()
	return r
}
