package controller_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/mcruntime/multicluster-runtime/internal/metrics"
	"github.com/mcruntime/multicluster-runtime/internal/testbed"
	mccontroller "github.com/mcruntime/multicluster-runtime/pkg/controller"
	mcfleet "github.com/mcruntime/multicluster-runtime/pkg/fleet"
	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
	mcmanager "github.com/mcruntime/multicluster-runtime/pkg/manager"
	mcreconcile "github.com/mcruntime/multicluster-runtime/pkg/reconcile"
)

// A request for a cluster nobody engaged is dropped without calling the
// reconciler, logged at a visible level with the reason and counted.
func TestRequestForAnUnknownClusterIsDroppedLoggedAndCounted(t *testing.T) {
	var logs fleettest.LogBuffer
	rec := &fleettest.Recorder{}
	c, name := newController(t, newLoggingManager(t, logs.Logger()), mccontroller.Options{Reconciler: rec})
	q, _ := run(t, c)

	before := dropped(name, "cluster-not-engaged")
	q.Add(fleettest.Request("ghost", "ns", "obj"))
	// The drop is counted, then logged: wait for both.
	line := ""
	fleettest.Eventually(t, 0, func() error {
		if dropped(name, "cluster-not-engaged") == before {
			return errors.New("the request was not counted as dropped")
		}
		for l := range strings.SplitSeq(logs.String(), "\n") {
			if strings.Contains(l, "Dropping request") && strings.Contains(l, "ghost") {
				line = l
			}
		}
		if line == "" {
			return fmt.Errorf("no line drops the request for ghost; logged:\n%s", logs.String())
		}
		return nil
	})
	if n := rec.Count("ghost", "ns", "obj"); n != 0 {
		t.Fatalf("the reconciler saw a request for an unknown cluster %d times", n)
	}
	if !strings.Contains(line, "cluster-not-engaged") || !strings.Contains(line, `"level"=0`) {
		t.Fatalf("want a level-0 line dropping the request for ghost with its reason; got:\n%s", line)
	}
}

// A reconcile's context ends when its cluster disengages; the request is
// then dropped (counted) rather than requeued: the cluster's initial list
// brings the work back if it is engaged again.
func TestDisengagedDuringReconcileIsDroppedNotRequeued(t *testing.T) {
	ended := make(chan struct{})
	rec := &fleettest.Recorder{Result: func(ctx context.Context, _ mcreconcile.Request) (reconcile.Result, error) {
		<-ctx.Done()
		close(ended)
		return reconcile.Result{}, ctx.Err()
	}}
	c, name := newController(t, newManager(t), mccontroller.Options{Reconciler: rec})
	q, _ := run(t, c)
	ctx, disengage := context.WithCancel(context.Background())
	defer disengage()
	if err := c.Engage(ctx, "m1", newFakeCluster(1)); err != nil {
		t.Fatal(err)
	}

	before := dropped(name, "cluster-disengaged")
	q.Add(fleettest.Request("m1", "ns", "obj"))
	rec.WaitFor(t, 1, "m1", "ns", "obj")
	disengage()
	select {
	case <-ended:
	case <-time.After(fleettest.DefaultTimeout):
		t.Fatal("the reconcile's context did not end with its cluster's engagement")
	}
	fleettest.Eventually(t, 0, func() error {
		if got := dropped(name, "cluster-disengaged") - before; got != 1 {
			return fmt.Errorf("%v requests dropped as cluster-disengaged, want 1", got)
		}
		return nil
	})
	fleettest.Consistently(t, 300*time.Millisecond, func() error {
		if n := rec.Count("m1", "ns", "obj"); n != 1 {
			return fmt.Errorf("the request was reconciled %d times after its cluster left", n)
		}
		return nil
	})
}

// A reconcile whose cluster is replaced under the same name (rotated
// credentials, a reconnect) is requeued and reconciled again against the new
// cluster, not dropped: a request no watch would produce again is not lost.
func TestReplacedDuringReconcileIsRequeued(t *testing.T) {
	second := newFakeCluster(2)
	var calls atomic.Int32
	rec := &fleettest.Recorder{Result: func(ctx context.Context, _ mcreconcile.Request) (reconcile.Result, error) {
		if calls.Add(1) == 1 {
			<-ctx.Done() // the first engagement ends
			return reconcile.Result{}, ctx.Err()
		}
		return reconcile.Result{}, nil
	}}
	c, name := newController(t, newManager(t), mccontroller.Options{Reconciler: rec})
	q, _ := run(t, c)
	if err := c.Engage(context.Background(), "m1", newFakeCluster(1)); err != nil {
		t.Fatal(err)
	}
	before := dropped(name, "cluster-disengaged")
	q.Add(fleettest.Request("m1", "ns", "obj"))
	rec.WaitFor(t, 1, "m1", "ns", "obj")
	if err := c.Engage(context.Background(), "m1", second); err != nil {
		t.Fatal(err)
	}
	rec.WaitFor(t, 2, "m1", "ns", "obj")
	if got := dropped(name, "cluster-disengaged") - before; got != 0 {
		t.Fatalf("%v requests dropped although the cluster was replaced", got)
	}
}

// Requests still queued for a cluster that disengages are dropped without
// calling the reconciler.
func TestQueuedRequestsOfADisengagedClusterAreDropped(t *testing.T) {
	release := make(chan struct{})
	rec := &fleettest.Recorder{Result: func(_ context.Context, req mcreconcile.Request) (reconcile.Result, error) {
		if req.ClusterName == "busy" {
			<-release
		}
		return reconcile.Result{}, nil
	}}
	c, name := newController(t, newManager(t), mccontroller.Options{Reconciler: rec, MaxConcurrentReconciles: 1})
	q, _ := run(t, c)
	if err := c.Engage(context.Background(), "busy", newFakeCluster(1)); err != nil {
		t.Fatal(err)
	}
	ctx, disengage := context.WithCancel(context.Background())
	if err := c.Engage(ctx, "leaving", newFakeCluster(2)); err != nil {
		t.Fatal(err)
	}

	q.Add(fleettest.Request("busy", "ns", "obj"))
	rec.WaitFor(t, 1, "busy", "ns", "obj") // the one worker is taken
	drops := func() float64 { return dropped(name, "cluster-not-engaged") + dropped(name, "cluster-disengaged") }
	before := drops()
	q.Add(fleettest.Request("leaving", "ns", "obj"))
	disengage()
	close(release) // the worker takes the queued request at once
	fleettest.Eventually(t, 0, func() error {
		if got := drops() - before; got != 1 {
			return fmt.Errorf("%v queued requests dropped, want 1", got)
		}
		return nil
	})
	if n := rec.Count("leaving", "ns", "obj"); n != 0 {
		t.Fatalf("a request queued for a disengaged cluster was reconciled %d times", n)
	}
}

// gatedCache holds its cache's sync until the gate opens: a cluster that
// stays joining (starting, in the fleet engine) for as long as a test wants.
type gatedCache struct {
	cache.Cache
	gate <-chan struct{}
}

func (c *gatedCache) WaitForCacheSync(ctx context.Context) bool {
	select {
	case <-c.gate:
		return c.Cache.WaitForCacheSync(ctx)
	case <-ctx.Done():
		return false
	}
}

// joiningFleet runs a manager whose provider engages member 1 as "member-1"
// once gate opens (its cache syncs only then), with a managed controller
// built with opts; it returns the controller's name and queue, and the
// recorder reconciling.
func joiningFleet(t *testing.T, gate <-chan struct{}, opts mccontroller.Options) (string, *fleettest.Recorder, func(mcreconcile.Request)) {
	t.Helper()
	provider := fleettest.NewProvider(fleet, fleettest.ProviderOptions{Members: []int{1}, ClusterOptions: []cluster.Option{func(o *cluster.Options) {
		o.NewCache = func(cfg *rest.Config, co cache.Options) (cache.Cache, error) {
			c, err := cache.New(cfg, co)
			return &gatedCache{Cache: c, gate: gate}, err
		}
	}}})
	mgr, err := mcmanager.New(fleet.Config(0), provider, mcmanager.Options{Metrics: server.Options{BindAddress: "0"}, HealthProbeBindAddress: "0"})
	if err != nil {
		t.Fatal(err)
	}
	rec := &fleettest.Recorder{}
	opts.Reconciler = rec
	name := testbed.Name("joining")
	c, err := mccontroller.New(name, mgr, opts)
	if err != nil {
		t.Fatal(err)
	}
	tap := newQueueTap()
	if err := c.MultiClusterWatch(tap); err != nil {
		t.Fatal(err)
	}
	fleettest.RunManager(t, mgr)
	q := tap.queue(t)
	engine := mgr.(mcmanager.FleetOwner).Fleet()
	fleettest.Eventually(t, 0, func() error {
		if state, _ := engine.State(provider.ClusterName(1)); state != mcfleet.StateStarting {
			return fmt.Errorf("member-1 is %q, want it starting", state)
		}
		return nil
	})
	return name, rec, func(req mcreconcile.Request) { q.Add(req) }
}

// A request for a cluster that is joining (hub fan-out may name a member
// before it is engaged) waits for it, instead of being dropped.
func TestRequestForAJoiningClusterWaitsForIt(t *testing.T) {
	gate := make(chan struct{})
	name, rec, add := joiningFleet(t, gate, mccontroller.Options{})
	before := dropped(name, "cluster-not-engaged") + dropped(name, "cluster-join-timeout")

	add(fleettest.Request("member-1", "ns", "early"))
	fleettest.Consistently(t, 300*time.Millisecond, func() error {
		if n := rec.Count("member-1", "ns", "early"); n != 0 {
			return fmt.Errorf("reconciled %d times before the cluster was engaged", n)
		}
		return nil
	})
	close(gate)
	rec.WaitFor(t, 1, "member-1", "ns", "early")
	if got := dropped(name, "cluster-not-engaged") + dropped(name, "cluster-join-timeout") - before; got != 0 {
		t.Fatalf("%v requests dropped while the cluster joined", got)
	}
}

// A request waits for a joining cluster for CacheSyncTimeout at most; then it
// is dropped, counted with the reason cluster-join-timeout.
func TestRequestForAJoiningClusterIsDroppedAfterCacheSyncTimeout(t *testing.T) {
	gate := make(chan struct{})
	defer close(gate)
	name, rec, add := joiningFleet(t, gate, mccontroller.Options{CacheSyncTimeout: 500 * time.Millisecond})
	before := dropped(name, "cluster-join-timeout")
	add(fleettest.Request("member-1", "ns", "late"))
	fleettest.Eventually(t, 0, func() error {
		if got := dropped(name, "cluster-join-timeout") - before; got != 1 {
			return fmt.Errorf("%v requests dropped for the join timeout, want 1", got)
		}
		return nil
	})
	if n := rec.Count("member-1", "ns", "late"); n != 0 {
		t.Fatalf("reconciled %d times", n)
	}
}

// With per-cluster reconcile metrics on, each reconcile is counted by
// controller, cluster and result, for the first clusters up to the cap only.
func TestPerClusterReconcileMetricsAreCapped(t *testing.T) {
	rec := &fleettest.Recorder{Result: func(_ context.Context, req mcreconcile.Request) (reconcile.Result, error) {
		if req.Name == "fails" {
			return reconcile.Result{}, errTest
		}
		return reconcile.Result{}, nil
	}}
	c, name := newController(t, newManager(t, mcmanager.WithPerClusterReconcileMetrics(1)), mccontroller.Options{Reconciler: rec})
	q, _ := run(t, c)
	for i, cl := range []string{"first", "second"} {
		if err := c.Engage(context.Background(), cl, newFakeCluster(i)); err != nil {
			t.Fatal(err)
		}
	}
	series := testutil.CollectAndCount(metrics.Reconciles)
	q.Add(fleettest.Request("first", "ns", "ok"))
	rec.WaitFor(t, 1, "first", "ns", "ok")
	q.Add(fleettest.Request("first", "ns", "fails"))
	q.Add(fleettest.Request("second", "ns", "ok"))
	rec.WaitFor(t, 1, "second", "ns", "ok")
	fleettest.Eventually(t, 0, func() error {
		if got := testutil.ToFloat64(metrics.Reconciles.WithLabelValues(name, "first", "error")); got < 1 {
			return fmt.Errorf("%v failed reconciles of the first cluster counted", got)
		}
		return nil
	})
	if got := testutil.ToFloat64(metrics.Reconciles.WithLabelValues(name, "first", "success")); got != 1 {
		t.Errorf("%v successful reconciles of the first cluster counted, want 1", got)
	}
	// first/success and first/error; the second cluster is beyond the cap.
	if got := testutil.CollectAndCount(metrics.Reconciles) - series; got != 2 {
		t.Errorf("%d new series, want 2 (the second cluster is beyond the cap of 1)", got)
	}
}
