package bench

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	mcbuilder "github.com/mcruntime/multicluster-runtime/pkg/builder"
	pkgclusters "github.com/mcruntime/multicluster-runtime/pkg/clusters"
	mcreconcile "github.com/mcruntime/multicluster-runtime/pkg/reconcile"
	clustersprovider "github.com/mcruntime/multicluster-runtime/providers/clusters"

	"github.com/go-logr/logr"
)

const (
	throughputClusters = 10
	throughputCreates  = 2000
)

// BenchmarkThroughput creates 2,000 ConfigMaps spread over 10 engaged clusters
// and reports reconciles per second from the first create to the last
// reconcile, beside plain controller-runtime reconciling 2,000 creates in one
// cluster in the same run. The API server's create rate bounds both.
func BenchmarkThroughput(b *testing.B) {
	for i := 0; i < b.N; i++ {
		mc := multiClusterThroughput(b)
		cr := controllerRuntimeThroughput(b)
		b.ReportMetric(mc, "reconciles/s-multicluster")
		b.ReportMetric(cr, "reconciles/s-controller-runtime")
		b.ReportMetric(mc/cr, "ratio")
	}
}

func multiClusterThroughput(b *testing.B) float64 {
	p := clustersprovider.New()
	mgr := newManager(b, p)
	var done atomic.Int64
	if err := mcbuilder.ControllerManagedBy(mgr).Named(fmt.Sprintf("throughput-%d", nsCounter.Add(1))).For(&corev1.ConfigMap{}).
		Complete(cachedGetReconciler(mgr, func(mcreconcile.Request) { done.Add(1) })); err != nil {
		b.Fatal(err)
	}
	stop := run(b, mgr)
	defer stop()
	ctx := context.Background()
	namespaces := make([]string, throughputClusters)
	for i := range namespaces {
		namespaces[i] = seed(b, 0)
		cl, err := pkgclusters.NewCluster(config(), inNamespace(namespaces[i]))
		if err != nil {
			b.Fatal(err)
		}
		if err := p.Add(ctx, fmt.Sprintf("tp-%d", i), cl); err != nil {
			// Before the provider runs, Add only queues the cluster.
			b.Fatal(err)
		}
	}
	waitFor(b, "the clusters to engage", func() bool { return len(p.ClusterNames()) == throughputClusters })
	c, err := client.New(config(), client.Options{})
	if err != nil {
		b.Fatal(err)
	}
	begin := time.Now()
	perCluster := throughputCreates / throughputClusters
	errs := make(chan error, throughputClusters)
	for _, ns := range namespaces {
		go func() { errs <- createMany(c, ns, perCluster) }()
	}
	for range namespaces {
		if err := <-errs; err != nil {
			b.Fatal(err)
		}
	}
	waitFor(b, "every reconcile", func() bool { return done.Load() >= throughputCreates })
	return throughputCreates / time.Since(begin).Seconds()
}

func controllerRuntimeThroughput(b *testing.B) float64 {
	ns := seed(b, 0)
	mgr, err := manager.New(config(), manager.Options{
		Metrics:                server.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Logger:                 logr.Discard(),
		Cache:                  cacheInNamespace(ns),
	})
	if err != nil {
		b.Fatal(err)
	}
	var done atomic.Int64
	if err := builder.ControllerManagedBy(mgr).Named(fmt.Sprintf("cr-throughput-%d", nsCounter.Add(1))).For(&corev1.ConfigMap{}).
		Complete(reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
			if err := mgr.GetClient().Get(ctx, req.NamespacedName, &corev1.ConfigMap{}); err != nil {
				return reconcile.Result{}, err
			}
			done.Add(1)
			return reconcile.Result{}, nil
		})); err != nil {
		b.Fatal(err)
	}
	stop := run(b, mgr)
	defer stop()
	waitFor(b, "the manager's caches", func() bool { return mgr.GetCache().WaitForCacheSync(context.Background()) })
	c, err := client.New(config(), client.Options{})
	if err != nil {
		b.Fatal(err)
	}
	begin := time.Now()
	perWorker := throughputCreates / throughputClusters
	errs := make(chan error, throughputClusters)
	for w := range throughputClusters {
		go func() { errs <- createManyPrefixed(c, ns, fmt.Sprintf("w%d", w), perWorker) }()
	}
	for range throughputClusters {
		if err := <-errs; err != nil {
			b.Fatal(err)
		}
	}
	waitFor(b, "every reconcile", func() bool { return done.Load() >= throughputCreates })
	return throughputCreates / time.Since(begin).Seconds()
}

func createMany(c client.Client, ns string, n int) error { return createManyPrefixed(c, ns, "cm", n) }

func createManyPrefixed(c client.Client, ns, prefix string, n int) error {
	for i := range n {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("%s-%d", prefix, i)}}
		if err := c.Create(context.Background(), cm); err != nil {
			return err
		}
	}
	return nil
}

func cacheInNamespace(ns string) cache.Options {
	var o cluster.Options
	inNamespace(ns)(&o)
	return o.Cache
}
