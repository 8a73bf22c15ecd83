package bench

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics/server"

	mcbuilder "github.com/mcruntime/multicluster-runtime/pkg/builder"
	pkgclusters "github.com/mcruntime/multicluster-runtime/pkg/clusters"
	"github.com/mcruntime/multicluster-runtime/pkg/fleet"
	mcmanager "github.com/mcruntime/multicluster-runtime/pkg/manager"
	"github.com/mcruntime/multicluster-runtime/pkg/manager/sharding"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
	mcreconcile "github.com/mcruntime/multicluster-runtime/pkg/reconcile"
)

// publishingProvider publishes n members built on demand: a replica builds
// only the clusters sharding admits.
type publishingProvider struct {
	members pkgclusters.Members
	n       int
}

func (p *publishingProvider) Start(ctx context.Context, aware multicluster.Aware) error {
	p.members.Start(ctx, aware, logr.Discard())
	for i := range p.n {
		p.members.Set(fmt.Sprintf("s%04d", i), "1", config(), nil)
	}
	<-ctx.Done()
	p.members.Wait()
	return nil
}

func (p *publishingProvider) Get(ctx context.Context, name multicluster.ClusterName) (cluster.Cluster, error) {
	return p.members.Get(ctx, name)
}

func (p *publishingProvider) IndexField(ctx context.Context, obj client.Object, field string, extract client.IndexerFunc) error {
	return p.members.IndexField(ctx, obj, field, extract)
}

// BenchmarkShardedReplicas runs 300 clusters on 1 and on 3 sharded replicas
// in one process and reports the clusters each replica runs (min and max)
// and the heap per cluster of the whole process: with 3 replicas each runs
// about a third, and the fleet costs what it costs on one replica.
func BenchmarkShardedReplicas(b *testing.B) {
	const clusters = 300
	for _, replicas := range []int{1, 3} {
		b.Run(fmt.Sprintf("replicas=%d", replicas), func(b *testing.B) {
			ns := seed(b, objectsPerCluster)
			group := fmt.Sprintf("bench-sharding-%d", nsCounter.Add(1))
			heap0, _ := heapAndGoroutines()
			var total atomic.Int64
			engines := make([]*fleet.Engine, replicas)
			var stops []func()
			begin := time.Now()
			for r := range replicas {
				p := &publishingProvider{n: clusters}
				p.members.ClusterOptions = []cluster.Option{inNamespace(ns)}
				mgr, err := mcmanager.New(config(), p, manager.Options{
					Metrics: server.Options{BindAddress: "0"}, HealthProbeBindAddress: "0", Logger: logr.Discard(),
				}, mcmanager.WithSharding(sharding.Options{
					Name: group, Identity: fmt.Sprintf("replica-%d", r),
					LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 500 * time.Millisecond,
				}))
				if err != nil {
					b.Fatal(err)
				}
				if err := mcbuilder.ControllerManagedBy(mgr).Named(fmt.Sprintf("%s-%d", group, r)).For(&corev1.ConfigMap{}).
					Complete(mcreconcile.Func(func(context.Context, mcreconcile.Request) (mcreconcile.Result, error) {
						total.Add(1)
						return mcreconcile.Result{}, nil
					})); err != nil {
					b.Fatal(err)
				}
				engines[r] = mgr.(mcmanager.FleetOwner).Fleet()
				stops = append(stops, run(b, mgr))
			}
			waitFor(b, "every cluster reconciled by its owner", func() bool { return total.Load() >= clusters*objectsPerCluster })
			elapsed := time.Since(begin)
			heap1, _ := heapAndGoroutines()
			minRun, maxRun := clusters, 0
			for _, e := range engines {
				n := 0
				for _, s := range e.Clusters() {
					if s.State == fleet.StateEngaged {
						n++
					}
				}
				minRun, maxRun = min(minRun, n), max(maxRun, n)
			}
			for _, stop := range stops {
				stop()
			}
			b.ReportMetric(float64(minRun), "min-clusters/replica")
			b.ReportMetric(float64(maxRun), "max-clusters/replica")
			b.ReportMetric(float64(int64(heap1)-int64(heap0))/clusters/1024, "KB-heap/cluster")
			b.ReportMetric(elapsed.Seconds(), "s/all-reconciled")
		})
	}
}
