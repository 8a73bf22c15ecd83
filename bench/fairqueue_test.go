package bench

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	mccontroller "github.com/mcruntime/multicluster-runtime/pkg/controller"
	mcreconcile "github.com/mcruntime/multicluster-runtime/pkg/reconcile"
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
