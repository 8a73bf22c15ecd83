package controller_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	mccontroller "github.com/mcruntime/multicluster-runtime/pkg/controller"
	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
	mcreconcile "github.com/mcruntime/multicluster-runtime/pkg/reconcile"
)

// A controller runs once: a second Start fails, as controller-runtime's does.
func TestStartTwiceFails(t *testing.T) {
	c, _ := newController(t, newManager(t), mccontroller.Options{Reconciler: &fleettest.Recorder{}})
	run(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), fleettest.DefaultTimeout)
	defer cancel()
	if err := c.Start(ctx); err == nil {
		t.Fatal("a second Start succeeded")
	}
}

// The controller waits for leadership unless its options say otherwise.
func TestNeedLeaderElection(t *testing.T) {
	mgr := newManager(t)
	for _, tc := range []struct {
		option *bool
		want   bool
	}{{nil, true}, {ptr.To(true), true}, {ptr.To(false), false}} {
		c, _ := newController(t, mgr, mccontroller.Options{Reconciler: &fleettest.Recorder{}, NeedLeaderElection: tc.option})
		le, ok := c.(manager.LeaderElectionRunnable)
		if !ok {
			t.Fatal("the controller does not tell the manager whether it needs leadership")
		}
		if got := le.NeedLeaderElection(); got != tc.want {
			t.Errorf("NeedLeaderElection with option %v = %v, want %v", tc.option, got, tc.want)
		}
	}
}

// A reconciler that panics does not bring the process down: the panic is
// recovered as controller-runtime recovers it, and the request retried.
func TestPanicIsRecoveredAndRetried(t *testing.T) {
	var once sync.Once
	rec := &fleettest.Recorder{Result: func(context.Context, mcreconcile.Request) (reconcile.Result, error) {
		once.Do(func() { panic("reconciler bug") })
		return reconcile.Result{}, nil
	}}
	c, _ := newController(t, newManager(t), mccontroller.Options{Reconciler: rec})
	q, _ := run(t, c)
	if err := c.Engage(context.Background(), "m1", newFakeCluster(1)); err != nil {
		t.Fatal(err)
	}
	q.Add(fleettest.Request("m1", "ns", "obj"))
	rec.WaitFor(t, 2, "m1", "ns", "obj")
}

// inflight is a reconciler that holds every request until released, and
// records how many run at once, per cluster and in all.
type inflight struct {
	release chan struct{}

	mu         sync.Mutex
	now, peak  map[string]int
	total, top int
}

func newInflight() *inflight {
	return &inflight{release: make(chan struct{}), now: map[string]int{}, peak: map[string]int{}}
}

func (f *inflight) Reconcile(_ context.Context, req mcreconcile.Request) (reconcile.Result, error) {
	f.mu.Lock()
	f.now[req.ClusterName]++
	f.total++
	f.peak[req.ClusterName] = max(f.peak[req.ClusterName], f.now[req.ClusterName])
	f.top = max(f.top, f.total)
	f.mu.Unlock()
	<-f.release
	f.mu.Lock()
	f.now[req.ClusterName]--
	f.total--
	f.mu.Unlock()
	return reconcile.Result{}, nil
}

// running returns the reconciles running now, in all.
func (f *inflight) running() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.total
}

// peaks returns the most reconciles seen at once per cluster.
func (f *inflight) peaks() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]int{}
	for k, v := range f.peak {
		out[k] = v
	}
	return out
}

// workers runs a controller with opts over clusters, queues perCluster
// requests for each, waits until want reconciles run at once, checks that no
// more start for a while, releases them and returns the peaks per cluster.
func workers(t *testing.T, opts mccontroller.Options, clusters []string, perCluster, want int) map[string]int {
	t.Helper()
	rec := newInflight()
	opts.Reconciler = rec
	c, _ := newController(t, newManager(t), opts)
	q, _ := run(t, c)
	defer close(rec.release) // before the controller stops: its workers return
	for i, name := range clusters {
		if err := c.Engage(context.Background(), name, newFakeCluster(i)); err != nil {
			t.Fatal(err)
		}
		for j := range perCluster {
			q.Add(fleettest.Request(name, "ns", fmt.Sprintf("obj-%d", j)))
		}
	}
	fleettest.Eventually(t, 0, func() error {
		if got := rec.running(); got < want {
			return fmt.Errorf("%d reconciles run at once, want %d", got, want)
		}
		return nil
	})
	fleettest.Consistently(t, 300*time.Millisecond, func() error {
		if got := rec.running(); got > want {
			return fmt.Errorf("%d reconciles run at once, want at most %d", got, want)
		}
		return nil
	})
	return rec.peaks()
}

// By default, clusters are reconciled side by side, one reconcile per
// cluster at a time: a member that does not answer holds one worker.
func TestDefaultWorkersServeOneRequestPerClusterAtATime(t *testing.T) {
	peaks := workers(t, mccontroller.Options{}, []string{"a", "b", "c"}, 3, 3)
	for _, cl := range []string{"a", "b", "c"} {
		if peaks[cl] != 1 {
			t.Errorf("cluster %s had %d reconciles at once, want 1", cl, peaks[cl])
		}
	}
}

// With MaxConcurrentReconciles set, that many workers run, and one cluster
// holds at most MaxInFlightPerCluster of them.
func TestMaxConcurrentReconcilesCapsEachCluster(t *testing.T) {
	peaks := workers(t, mccontroller.Options{MaxConcurrentReconciles: 4}, []string{"a", "b"}, 4, 4)
	for _, cl := range []string{"a", "b"} {
		if want := mccontroller.MaxInFlightPerCluster(4); peaks[cl] != want {
			t.Errorf("cluster %s had %d reconciles at once, want %d", cl, peaks[cl], want)
		}
	}
}

// One worker serves the whole fleet, one request at a time.
func TestOneWorkerServesTheFleet(t *testing.T) {
	workers(t, mccontroller.Options{MaxConcurrentReconciles: 1}, []string{"a", "b"}, 2, 1)
}

// The plain queue takes requests as they come whatever their cluster: one
// cluster may take every worker.
func TestPlainQueueLetsOneClusterTakeEveryWorker(t *testing.T) {
	opts := mccontroller.Options{MaxConcurrentReconciles: 4}
	opts.NewQueue = mccontroller.PlainQueue(opts)
	peaks := workers(t, opts, []string{"a"}, 4, 4)
	if peaks["a"] != 4 {
		t.Fatalf("cluster a had %d reconciles at once with the plain queue, want 4", peaks["a"])
	}
}
