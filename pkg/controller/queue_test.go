package controller

import (
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	mcreconcile "github.com/mcruntime/multicluster-runtime/pkg/reconcile"
)

func TestMaxInFlightPerCluster(t *testing.T) {
	for n, want := range map[int]int{0: 0, 1: 0, 2: 1, 3: 1, 8: 4, 9: 4} {
		if got := MaxInFlightPerCluster(n); got != want {
			t.Errorf("MaxInFlightPerCluster(%d) = %d, want %d", n, got, want)
		}
	}
}

func request(cluster, name string) mcreconcile.Request {
	return mcreconcile.Request{ClusterName: cluster, Request: reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: name}}}
}

// The default queue takes clusters in turn, keeps priorities unless the
// manager turned the priority queue off, and caps a cluster at half the
// workers.
func TestFairQueueHonoursOptions(t *testing.T) {
	rl := workqueue.NewTypedItemExponentialFailureRateLimiter[mcreconcile.Request](time.Millisecond, time.Second)
	high := 10
	for _, usePriority := range []bool{true, false} {
		q := FairQueue(Options{MaxConcurrentReconciles: 4, UsePriorityQueue: ptr.To(usePriority)})("", rl).(priorityqueue.PriorityQueue[mcreconcile.Request])
		q.Add(request("a", "first"))
		q.AddWithOpts(priorityqueue.AddOpts{Priority: &high}, request("a", "urgent"))
		q.Add(request("a", "third"))
		q.Add(request("b", "other"))

		want := []string{"a/urgent", "b/other", "a/first"} // then a is at its cap of 2
		if !usePriority {
			want = []string{"a/first", "b/other", "a/urgent"}
		}
		for _, w := range want {
			r, prio, _ := q.GetWithPriority()
			if got := r.ClusterName + "/" + r.Name; got != w {
				t.Errorf("UsePriorityQueue=%v: got %s, want %s", usePriority, got, w)
			}
			if !usePriority && prio != 0 {
				t.Errorf("UsePriorityQueue=false: priority %d, want 0", prio)
			}
		}
		got := make(chan mcreconcile.Request, 1)
		go func() { r, _ := q.Get(); got <- r }()
		select {
		case r := <-got:
			t.Errorf("UsePriorityQueue=%v: got %v beyond a's cap of 2", usePriority, r)
		case <-time.After(50 * time.Millisecond):
		}
		q.ShutDown()
		<-got
	}
}

// Options that leave the number of workers unset get
// DefaultMaxConcurrentReconciles workers and one request per cluster in
// processing; a number set explicitly keeps its half-the-workers cap, and a
// queue set by the caller is left alone.
func TestDefaultQueue(t *testing.T) {
	rl := workqueue.NewTypedItemExponentialFailureRateLimiter[mcreconcile.Request](time.Millisecond, time.Second)
	// inFlightCap counts the requests of a busy cluster handed out, none done,
	// before the queue holds the rest back.
	inFlightCap := func(o Options) int {
		defaultQueue(&o)
		q := o.NewQueue("", rl)
		for i := range 20 {
			q.Add(request("a", fmt.Sprint(i)))
		}
		q.Add(request("b", "other"))
		got := make(chan mcreconcile.Request)
		go func() {
			defer close(got)
			for {
				r, shutdown := q.Get()
				if shutdown {
					return
				}
				got <- r
			}
		}()
		n := 0
		for {
			select {
			case r := <-got:
				if r.ClusterName == "a" {
					n++
				}
				continue
			case <-time.After(100 * time.Millisecond):
			}
			break
		}
		q.ShutDown()
		for range got {
		}
		return n
	}
	o := Options{}
	defaultQueue(&o)
	if o.MaxConcurrentReconciles != DefaultMaxConcurrentReconciles {
		t.Errorf("MaxConcurrentReconciles unset: %d workers, want %d", o.MaxConcurrentReconciles, DefaultMaxConcurrentReconciles)
	}
	if got := inFlightCap(Options{}); got != 1 {
		t.Errorf("MaxConcurrentReconciles unset: cluster a got %d requests in processing at once, want 1", got)
	}
	if got := inFlightCap(Options{MaxConcurrentReconciles: 6}); got != 3 {
		t.Errorf("MaxConcurrentReconciles 6: cluster a got %d requests in processing at once, want 3", got)
	}
	own := PlainQueue(Options{})
	o = Options{NewQueue: own}
	defaultQueue(&o)
	if o.MaxConcurrentReconciles != 0 {
		t.Errorf("a caller's queue: MaxConcurrentReconciles set to %d, want it left unset", o.MaxConcurrentReconciles)
	}
}
