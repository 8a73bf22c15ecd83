package bench

import (
	"fmt"
	"testing"

	"k8s.io/client-go/util/workqueue"

	mcreconcile "github.com/mcruntime/multicluster-runtime/pkg/reconcile"
)

// BenchmarkQueueOps measures the queue alone: 20,000 requests over 10
// clusters are added, then taken and marked done by one worker, for the fair
// queue and for controller-runtime's priority queue. The queues are named,
// so that both report their workqueue metrics as in a controller.
func BenchmarkQueueOps(b *testing.B) {
	const clusters, perCluster = 10, 2000
	reqs := make([]mcreconcile.Request, 0, clusters*perCluster)
	for c := range clusters {
		for i := range perCluster {
			reqs = append(reqs, busyReq(fmt.Sprintf("cluster-%d", c), i))
		}
	}
	for _, kind := range []struct {
		name string
		new  func(string) workqueue.TypedRateLimitingInterface[mcreconcile.Request]
	}{{"fair", namedFairQueue}, {"plain", namedPlainQueue}} {
		b.Run(kind.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				q := kind.new(fmt.Sprintf("queueops-%d", nsCounter.Add(1)))
				for _, r := range reqs {
					q.Add(r)
				}
				for range reqs {
					r, _ := q.Get()
					q.Done(r)
				}
				q.ShutDown()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(reqs)), "ns/request")
		})
	}
}
