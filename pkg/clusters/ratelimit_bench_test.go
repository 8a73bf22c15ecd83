package clusters_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mcruntime/multicluster-runtime/internal/testbed"
	"github.com/mcruntime/multicluster-runtime/pkg/clusters"
)

// BenchmarkCreateRateAcrossMembers feeds 10 members 50 creates/s each for a
// few seconds, each member's creates queued for one worker that runs them
// through the member's client, and reports how many are still queued when
// the producers stop and how long the queues take to drain. "clusters" are
// built by NewCluster (controller-runtime's host defaults: no client-side
// limit); "client-go-default" gives the same clusters client-go's default of
// 5 requests/s, burst 10, whose queues grow.
func BenchmarkCreateRateAcrossMembers(b *testing.B) {
	const (
		members  = 10
		rate     = 50 // creates per second per member
		duration = 3 * time.Second
	)
	for _, bc := range []struct {
		name     string
		qps      float32
		burst    int
		maxDrain time.Duration
	}{
		{"clusters", 0, 0, time.Minute},
		{"client-go-default", 5, 10, 0}, // draining 5/s would take minutes: report the backlog only
	} {
		b.Run(bc.name, func(b *testing.B) {
			for range b.N {
				backlog, drain := runCreates(b, members, rate, duration, bc.qps, bc.burst, bc.maxDrain)
				b.ReportMetric(float64(backlog), "queued-at-stop")
				if bc.maxDrain > 0 {
					b.ReportMetric(drain.Seconds(), "s-to-drain")
				}
			}
		})
	}
}

func runCreates(b *testing.B, members, rate int, duration time.Duration, qps float32, burst int, maxDrain time.Duration) (int, time.Duration) {
	ctx := context.Background()
	ns := fmt.Sprintf("rate-%d", time.Now().UnixNano())
	admin := testbed.NewClient(b, fleet.Config(0))
	testbed.CreateNamespace(b, admin, ns)
	admin1 := testbed.NewClient(b, fleet.Config(1))
	testbed.CreateNamespace(b, admin1, ns)

	queues := make([]workqueue.TypedInterface[string], members)
	var wg sync.WaitGroup
	for m := range members {
		cfg := fleet.Config(m % fleet.Len())
		cfg.QPS, cfg.Burst = qps, burst
		cl, err := clusters.NewCluster(rest.CopyConfig(cfg))
		if err != nil {
			b.Fatal(err)
		}
		c := cl.GetClient()
		q := workqueue.NewTyped[string]()
		queues[m] = q
		wg.Go(func() {
			for {
				name, shutdown := q.Get()
				if shutdown {
					return
				}
				cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
				if err := c.Create(ctx, cm); client.IgnoreAlreadyExists(err) != nil {
					b.Error(err)
				}
				q.Done(name)
			}
		})
	}
	defer func() {
		for _, q := range queues {
			q.ShutDown()
		}
		wg.Wait()
	}()

	b.ResetTimer()
	tick := time.NewTicker(time.Second / time.Duration(rate))
	defer tick.Stop()
	stop := time.Now().Add(duration)
	for i := 0; time.Now().Before(stop); i++ {
		<-tick.C
		for m, q := range queues {
			q.Add(fmt.Sprintf("m%d-cm%d", m, i))
		}
	}
	backlog := 0
	for _, q := range queues {
		backlog += q.Len()
	}
	start := time.Now()
	if maxDrain > 0 {
		for {
			left := 0
			for _, q := range queues {
				left += q.Len()
			}
			if left == 0 {
				break
			}
			if time.Since(start) > maxDrain {
				b.Fatalf("%d creates still queued %s after the producers stopped", left, maxDrain)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	b.StopTimer()
	return backlog, time.Since(start)
}
