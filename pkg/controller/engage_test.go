package controller_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/mcruntime/multicluster-runtime/internal/metrics"
	"github.com/mcruntime/multicluster-runtime/internal/testbed"
	mccontroller "github.com/mcruntime/multicluster-runtime/pkg/controller"
	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
)

// A controller needs a reconciler, and refuses the host's name for a cluster.
func TestNewAndEngageRefuseMisuse(t *testing.T) {
	mgr := newManager(t)
	if _, err := mccontroller.NewUnmanaged(testbed.Name("ctl"), mgr, mccontroller.Options{}); err == nil || !strings.Contains(err.Error(), "Reconciler") {
		t.Fatalf("NewUnmanaged without a reconciler: want an error naming the Reconciler, got %v", err)
	}
	c, _ := newController(t, mgr, mccontroller.Options{Reconciler: &fleettest.Recorder{}})
	if err := c.Engage(context.Background(), "", newFakeCluster(0)); err == nil || !strings.Contains(err.Error(), "reserved") {
		t.Fatalf(`Engage under "": want an error saying the name is reserved, got %v`, err)
	}
}

// An engagement whose context is already done would end at once (and end the
// live engagement it replaces): it is refused, and nothing is started.
func TestEngageWithADoneContextIsRefused(t *testing.T) {
	for _, running := range []bool{false, true} {
		t.Run(fmt.Sprintf("running=%v", running), func(t *testing.T) {
			src := syncedSource()
			c, name := newController(t, newManager(t), mccontroller.Options{Reconciler: &fleettest.Recorder{}})
			if err := c.MultiClusterWatch(src); err != nil {
				t.Fatal(err)
			}
			if running {
				run(t, c)
			}
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			err := c.Engage(ctx, "m1", newFakeCluster(1))
			if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), `"m1"`) {
				t.Fatalf("want an error wrapping context.Canceled naming controller %q and cluster m1, got %v", name, err)
			}
			if got := src.started(); len(got) != 0 {
				t.Fatalf("the source was started for a refused engagement: %v", got)
			}
		})
	}
}

// Engaged means synced: after Start, Engage returns only once every watch
// in the cluster has synced, so that whoever engages announces the cluster
// only then.
func TestEngageReturnsOnceWatchesSynced(t *testing.T) {
	src := newFakeSource()
	c, _ := newController(t, newManager(t), mccontroller.Options{Reconciler: &fleettest.Recorder{}})
	if err := c.MultiClusterWatch(src); err != nil {
		t.Fatal(err)
	}
	run(t, c)

	engaged := make(chan error, 1)
	go func() { engaged <- c.Engage(context.Background(), "m1", newFakeCluster(1)) }()
	src.waitStarted(t, 1)
	fleettest.Consistently(t, 300*time.Millisecond, func() error {
		select {
		case err := <-engaged:
			return fmt.Errorf("Engage returned (%v) before the watch synced", err)
		default:
			return nil
		}
	})
	close(src.synced)
	select {
	case err := <-engaged:
		if err != nil {
			t.Fatalf("Engage: %v", err)
		}
	case <-time.After(fleettest.DefaultTimeout):
		t.Fatal("Engage did not return after the watch synced")
	}
}

// A watch that does not sync within CacheSyncTimeout fails the engagement:
// the error names controller, cluster and watch, the failure is counted by
// cluster, and the watch is stopped.
func TestEngageFailsWhenAWatchDoesNotSync(t *testing.T) {
	src := newFakeSource() // never syncs
	const timeout = 500 * time.Millisecond
	c, name := newController(t, newManager(t), mccontroller.Options{Reconciler: &fleettest.Recorder{}, CacheSyncTimeout: timeout})
	if err := c.MultiClusterWatch(src); err != nil {
		t.Fatal(err)
	}
	run(t, c)

	start := time.Now()
	err := c.Engage(context.Background(), "m1", newFakeCluster(1))
	if err == nil {
		t.Fatal("Engage succeeded although the watch never synced")
	}
	if took := time.Since(start); took > 20*timeout {
		t.Errorf("Engage took %s to fail, CacheSyncTimeout is %s", took, timeout)
	}
	if n := strings.Count(err.Error(), "m1"); n != 1 {
		t.Errorf("error %q names the cluster %d times, want once", err, n)
	}
	for _, want := range []string{name, `"m1"`, "fake source did not sync"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
	if got := testutil.ToFloat64(metrics.WatchFailures.WithLabelValues(name)); got != 1 {
		t.Errorf("watch failures of %s = %v, want 1", name, got)
	}
	if got := testutil.ToFloat64(metrics.WatchSyncFailures.WithLabelValues(name, "m1", "*controller_test.fakeWatch")); got != 1 {
		t.Errorf("sync failures of %s in m1 = %v, want 1", name, got)
	}
	starts := src.started()
	if len(starts) != 1 || !done(starts[0].ctx) {
		t.Fatalf("want the one watch started and stopped, got %v", starts)
	}
}

// A watch whose sync fails at once fails the engagement at once, with the
// cause.
func TestEngageFailsWithTheSyncError(t *testing.T) {
	src := newFakeSource()
	src.syncErr = errTest
	c, _ := newController(t, newManager(t), mccontroller.Options{Reconciler: &fleettest.Recorder{}})
	if err := c.MultiClusterWatch(src); err != nil {
		t.Fatal(err)
	}
	run(t, c)
	if err := c.Engage(context.Background(), "m1", newFakeCluster(1)); !errors.Is(err, errTest) {
		t.Fatalf("want the sync error, got %v", err)
	}
}

// Beyond metrics.MaxWatchSyncSeries clusters, sync failures of a controller
// share the cluster label <other>: a large fleet cannot blow up the metrics
// endpoint.
func TestSyncFailureSeriesAreCapped(t *testing.T) {
	src := newFakeSource()
	src.syncErr = errTest
	c, name := newController(t, newManager(t), mccontroller.Options{Reconciler: &fleettest.Recorder{}})
	if err := c.MultiClusterWatch(src); err != nil {
		t.Fatal(err)
	}
	run(t, c)
	const typ = "*controller_test.fakeWatch"
	seriesBefore := testutil.CollectAndCount(metrics.WatchSyncFailures)
	for i := range metrics.MaxWatchSyncSeries + 2 {
		if err := c.Engage(context.Background(), fmt.Sprintf("m%d", i), newFakeCluster(i)); err == nil {
			t.Fatalf("cluster %d engaged although its watch failed", i)
		}
	}
	if got := testutil.ToFloat64(metrics.WatchSyncFailures.WithLabelValues(name, fmt.Sprintf("m%d", metrics.MaxWatchSyncSeries-1), typ)); got != 1 {
		t.Errorf("the last cluster within the cap has %v failures in its own series, want 1", got)
	}
	if got := testutil.ToFloat64(metrics.WatchSyncFailures.WithLabelValues(name, metrics.OtherClusters, typ)); got != 2 {
		t.Errorf("series %s has %v failures, want 2 (the clusters beyond the cap)", metrics.OtherClusters, got)
	}
	if got := testutil.CollectAndCount(metrics.WatchSyncFailures) - seriesBefore; got != metrics.MaxWatchSyncSeries+1 {
		t.Errorf("%d new series, want %d: one per cluster within the cap and %s", got, metrics.MaxWatchSyncSeries+1, metrics.OtherClusters)
	}
}

// Engaging the same cluster again under the same name changes nothing;
// another cluster under the name replaces it: the old watches stop, new ones
// start. Cancelling the engagement's context disengages the cluster.
func TestEngageAgainReplaceAndDisengage(t *testing.T) {
	src := syncedSource()
	c, _ := newController(t, newManager(t), mccontroller.Options{Reconciler: &fleettest.Recorder{}})
	if err := c.MultiClusterWatch(src); err != nil {
		t.Fatal(err)
	}
	run(t, c)

	first, second := newFakeCluster(1), newFakeCluster(2)
	ctx, disengage := context.WithCancel(context.Background())
	defer disengage()
	for range 2 {
		if err := c.Engage(ctx, "m1", first); err != nil {
			t.Fatal(err)
		}
	}
	if starts := src.started(); len(starts) != 1 || starts[0].cl != first {
		t.Fatalf("after engaging one cluster twice: want one start in it, got %v", starts)
	}

	if err := c.Engage(ctx, "m1", second); err != nil {
		t.Fatal(err)
	}
	starts := src.started()
	if len(starts) != 2 || starts[1].cl != second {
		t.Fatalf("after replacing the cluster: want a second start in the new one, got %v", starts)
	}
	if !done(starts[0].ctx) {
		t.Error("the replaced cluster's watch was not stopped")
	}
	if done(starts[1].ctx) {
		t.Error("the new cluster's watch was stopped")
	}

	disengage()
	fleettest.Eventually(t, 0, func() error {
		if !done(starts[1].ctx) {
			return errors.New("the watch goes on after its engagement ended")
		}
		return nil
	})
	// The name can be engaged again.
	if err := c.Engage(context.Background(), "m1", first); err != nil {
		t.Fatalf("engaging again after disengaging: %v", err)
	}
	src.waitStarted(t, 3)
}

// Sources watched before Start start in the clusters engaged before Start,
// once the controller runs; a source watched after Start starts at once in
// every engaged cluster.
func TestWatchBeforeAndAfterStart(t *testing.T) {
	before, after := syncedSource(), syncedSource()
	c, _ := newController(t, newManager(t), mccontroller.Options{Reconciler: &fleettest.Recorder{}})
	if err := c.MultiClusterWatch(before); err != nil {
		t.Fatal(err)
	}
	m1 := newFakeCluster(1)
	if err := c.Engage(context.Background(), "m1", m1); err != nil {
		t.Fatalf("engaging before Start: %v", err)
	}
	if got := before.started(); len(got) != 0 {
		t.Fatalf("a source started before the controller: %v", got)
	}

	run(t, c)
	if got := before.waitStarted(t, 1); got[0].cl != m1 {
		t.Fatalf("the source started in %v, want m1", got[0].name)
	}
	if err := c.Engage(context.Background(), "m2", newFakeCluster(2)); err != nil {
		t.Fatal(err)
	}
	if err := c.MultiClusterWatch(after); err != nil {
		t.Fatalf("watching after Start: %v", err)
	}
	got := map[string]bool{}
	for _, s := range after.started() {
		got[s.name] = true
	}
	if len(got) != 2 || !got["m1"] || !got["m2"] {
		t.Fatalf("a source watched after Start started in %v, want m1 and m2 at once", got)
	}
}

// Stopping the controller stops its watches in every cluster, and a cluster
// engaged after it stopped is refused.
func TestStopEndsEveryWatch(t *testing.T) {
	src := syncedSource()
	c, name := newController(t, newManager(t), mccontroller.Options{Reconciler: &fleettest.Recorder{}})
	if err := c.MultiClusterWatch(src); err != nil {
		t.Fatal(err)
	}
	_, stop := run(t, c)
	for i := range 3 {
		if err := c.Engage(context.Background(), fmt.Sprintf("m%d", i), newFakeCluster(i)); err != nil {
			t.Fatal(err)
		}
	}
	stop()
	fleettest.Eventually(t, 0, func() error {
		for _, s := range src.started() {
			if !done(s.ctx) {
				return fmt.Errorf("the watch in %s goes on after the controller stopped", s.name)
			}
		}
		return nil
	})
	if err := c.Engage(context.Background(), "late", newFakeCluster(9)); err == nil || !strings.Contains(err.Error(), name) {
		t.Fatalf("engaging after the controller stopped: want an error naming the controller, got %v", err)
	}
}
