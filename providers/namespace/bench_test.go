package namespace

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	mcbuilder "github.com/mcruntime/multicluster-runtime/pkg/builder"
	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
	mcmanager "github.com/mcruntime/multicluster-runtime/pkg/manager"
	mcreconcile "github.com/mcruntime/multicluster-runtime/pkg/reconcile"
)

var (
	benchSeeded sync.Map     // namespace prefix -> struct{}
	benchCycles atomic.Int64 // names engage/disengage cycles uniquely across runs
)

// benchReconciler counts the clusters of a prefix whose "cm" was reconciled
// and reports when a watched request is reconciled.
type benchReconciler struct {
	prefix string
	want   int64
	n      atomic.Int64
	seen   sync.Map // cluster name -> struct{}
	all    chan struct{}

	waiters sync.Map // mcreconcile.Request -> chan time.Time
}

func (r *benchReconciler) Reconcile(_ context.Context, req mcreconcile.Request) (reconcile.Result, error) {
	now := time.Now()
	if ch, ok := r.waiters.LoadAndDelete(req); ok {
		ch.(chan time.Time) <- now
	}
	if req.Name == "cm" && strings.HasPrefix(req.ClusterName, r.prefix) {
		if _, dup := r.seen.LoadOrStore(req.ClusterName, struct{}{}); !dup && r.n.Add(1) == r.want {
			close(r.all)
		}
	}
	return reconcile.Result{}, nil
}

// BenchmarkNamespaces measures, for 100 and 1,000 namespaces with one
// ConfigMap each: the time from manager start until every virtual cluster
// reconciled its ConfigMap; the create-to-reconcile latency of new objects;
// goroutines and heap per virtual cluster; and WATCH requests per type on the
// API server. Figures are reported, never asserted.
func BenchmarkNamespaces(b *testing.B) {
	for _, n := range []int{100, 1000} {
		b.Run(fmt.Sprintf("namespaces=%d", n), func(b *testing.B) { benchmarkNamespaces(b, n) })
	}
}

func benchmarkNamespaces(b *testing.B, n int) {
	prefix := fmt.Sprintf("bench%d", n)
	if _, done := benchSeeded.LoadOrStore(prefix, struct{}{}); !done {
		createNamespaces(b, directClient(b), names(prefix, n), "cm")
	}
	direct := directClient(b)

	var allSecs, p50s, p90s, gPerCluster, gPerClusterAll, gLeft, heapPerCluster, cmWatches, nsWatches float64
	for range b.N {
		counter := &watchCounter{watches: map[string]int{}}
		cfg := fleet.Config(0)
		cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { counter.next = rt; return counter })
		cl, err := cluster.New(cfg)
		if err != nil {
			b.Fatal(err)
		}
		p := New(cl)
		mgr, err := mcmanager.New(fleet.Config(0), p, mcmanager.Options{
			Metrics:    server.Options{BindAddress: "0"},
			Controller: config.Controller{SkipNameValidation: ptr.To(true)},
		})
		if err != nil {
			b.Fatal(err)
		}
		rec := &benchReconciler{prefix: prefix + "-", want: int64(n), all: make(chan struct{})}
		if err := mcbuilder.ControllerManagedBy(mgr).For(&corev1.ConfigMap{}).Complete(rec); err != nil {
			b.Fatal(err)
		}

		runtime.GC()
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		goroutinesBefore := runtime.NumGoroutine()

		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		start := time.Now()
		go func() { done <- mgr.Start(ctx) }()
		select {
		case <-rec.all:
		case <-time.After(5 * time.Minute):
			b.Fatalf("only %d of %d virtual clusters reconciled", rec.n.Load(), n)
		}
		allSecs += time.Since(start).Seconds()

		// Let engagements of namespaces outside the benchmark's set settle.
		engaged := waitStable(func() int { return len(p.ClusterNames()) })
		runtime.GC()
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		gPerClusterAll += float64(runtime.NumGoroutine()-goroutinesBefore) / float64(engaged)
		heapPerCluster += float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / float64(engaged)

		p50, p90 := measureLatency(b, direct, rec, prefix, n)
		p50s += p50
		p90s += p90

		marginal, left := engageDisengageCycle(b, direct, p, fmt.Sprintf("%s-cycle%d", prefix, benchCycles.Add(1)))
		gPerCluster += marginal
		gLeft += left

		w := counter.snapshot()
		cmWatches += float64(w["/api/v1/configmaps"])
		nsWatches += float64(w["/api/v1/namespaces"])

		cancel()
		if err := <-done; err != nil {
			b.Fatal(err)
		}
	}
	N := float64(b.N)
	b.ReportMetric(allSecs/N, "s-all-reconciled")
	b.ReportMetric(p50s/N, "ms-p50-create-to-reconcile")
	b.ReportMetric(p90s/N, "ms-p90-create-to-reconcile")
	b.ReportMetric(gPerCluster/N, "goroutines/cluster")
	b.ReportMetric(gPerClusterAll/N, "goroutines/cluster-incl-manager")
	b.ReportMetric(gLeft/N, "goroutines-left-after-disengage")
	b.ReportMetric(heapPerCluster/N, "heap-B/cluster")
	b.ReportMetric(cmWatches/N, "configmap-watches")
	b.ReportMetric(nsWatches/N, "namespace-watches")
	b.ReportMetric(0, "ns/op") // wall time per op is not meaningful here
}

// waitStable polls f until it returns the same value for 200ms.
func waitStable(f func() int) int {
	last, since := f(), time.Now()
	for time.Since(since) < 200*time.Millisecond {
		time.Sleep(20 * time.Millisecond)
		if v := f(); v != last {
			last, since = v, time.Now()
		}
	}
	return last
}

// measureLatency creates ConfigMaps one by one in engaged namespaces and
// returns the p50 and p90 of create-to-reconcile, in milliseconds.
func measureLatency(b *testing.B, c client.Client, rec *benchReconciler, prefix string, n int) (float64, float64) {
	const samples = 50
	ctx := context.Background()
	lat := make([]float64, 0, samples)
	for i := range samples {
		ns := fmt.Sprintf("%s-%d", prefix, (i*7919)%n)
		name := fmt.Sprintf("lat-%d-%d", time.Now().UnixNano(), i)
		ch := make(chan time.Time, 1)
		rec.waiters.Store(request(ns, name), ch)
		start := time.Now()
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		if err := c.Create(ctx, cm); err != nil {
			b.Fatal(err)
		}
		select {
		case t := <-ch:
			lat = append(lat, float64(t.Sub(start).Microseconds())/1000)
		case <-time.After(30 * time.Second):
			b.Fatalf("cluster %q: %s not reconciled", ns, name)
		}
		if err := c.Delete(ctx, cm); err != nil {
			b.Fatal(err)
		}
	}
	slices.Sort(lat)
	return lat[len(lat)/2], lat[len(lat)*9/10]
}

// engageDisengageCycle engages 50 more namespaces and returns the goroutines
// they added per virtual cluster; then deletes them and returns how many
// goroutines above the earlier count remain once they are disengaged.
func engageDisengageCycle(b *testing.B, c client.Client, p *Provider, prefix string) (float64, float64) {
	const extra = 50
	ctx := context.Background()
	engaged := len(p.ClusterNames())
	before := stableGoroutines()
	nss := names(prefix, extra)
	createNamespaces(b, c, nss)
	waitFor(b, func() bool { return len(p.ClusterNames()) == engaged+extra })
	marginal := float64(stableGoroutines()-before) / extra
	for _, ns := range nss {
		if err := c.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			b.Fatal(err)
		}
	}
	waitFor(b, func() bool { return len(p.ClusterNames()) == engaged })
	return marginal, float64(stableGoroutines() - before)
}

func waitFor(b *testing.B, cond func() bool) {
	b.Helper()
	fleettest.Eventually(b, time.Minute, func() error {
		if !cond() {
			return errors.New("condition not met")
		}
		return nil
	})
}
