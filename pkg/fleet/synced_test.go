package fleet_test

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"

	"github.com/mcruntime/multicluster-runtime/internal/metrics"
	"github.com/mcruntime/multicluster-runtime/internal/testbed"
	mccontroller "github.com/mcruntime/multicluster-runtime/pkg/controller"
	"github.com/mcruntime/multicluster-runtime/pkg/fleet"
	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
	mchandler "github.com/mcruntime/multicluster-runtime/pkg/handler"
	mcmanager "github.com/mcruntime/multicluster-runtime/pkg/manager"
	mcsource "github.com/mcruntime/multicluster-runtime/pkg/source"
)

var runs atomic.Int32

// unique names a controller for one run: controller names are process-wide,
// and -count=N reruns the test in the same process.
func unique(name string) string { return fmt.Sprintf("%s-%d", name, runs.Add(1)) }

// reports collects what the engine reports of a member: nil for engaged.
func reports(t *testing.T) (chan error, func(error)) {
	ch := make(chan error, 1000)
	return ch, func(err error) {
		select {
		case ch <- err:
		default:
			t.Error("too many reports")
		}
	}
}

// Issue 23, item 4: a member whose API server answers 500 to every list is
// not announced engaged, and the failure is reported, naming the controller,
// the cluster and the type, within seconds (not after CacheSyncTimeout).
func TestFailingListIsNotEngaged(t *testing.T) {
	proxy := testbed.NewAPIProxy(t, members.Config(1))
	proxy.FailLists("configmaps")
	p := newConfigProvider(nil)
	mgr := fleettest.NewManager(t, members.Config(0), p)
	name := unique("failing-list")
	fleetController(t, mgr, name, "failing-list")
	fleettest.RunManager(t, mgr)
	<-p.started

	got, report := reports(t)
	start := time.Now()
	p.members.Set("failing", "h1", proxy.Config(), report)
	select {
	case err := <-got:
		if err == nil {
			t.Fatal("the member was announced engaged although every list of its ConfigMaps fails")
		}
		took := time.Since(start)
		t.Logf("reported after %s: %v", took.Round(time.Millisecond), err)
		for _, want := range []string{`"` + name + `"`, `"failing"`, "*v1.ConfigMap", "injected by the test proxy"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("the reported error does not name %s: %v", want, err)
			}
		}
		namesClusterOnce(t, err, "failing")
		if took > 15*time.Second {
			t.Errorf("the failure was reported after %s, want within seconds", took)
		}
	case <-time.After(time.Minute):
		t.Fatal("no report within a minute")
	}
	if state, _ := mgr.(mcmanager.FleetOwner).Fleet().State("failing"); state == fleet.StateEngaged {
		t.Errorf("state %s, want not engaged", state)
	}
	if n := testutil.ToFloat64(metrics.WatchSyncFailures.WithLabelValues(name, "failing", "*v1.ConfigMap")); n == 0 {
		t.Error("multicluster_watch_sync_failures_total has no failure for the controller, cluster and type")
	}
	// Retried: it fails again, and is never announced engaged meanwhile.
	select {
	case err := <-got:
		if err == nil {
			t.Fatal("the member was announced engaged on a retry")
		}
	case <-time.After(time.Minute):
		t.Fatal("not retried within a minute")
	}
}

// Issue 23, item 4: a watch that never syncs (its list never ends) is closed
// when the engagement is given up: no stream outlives it.
func TestUnsyncedWatchIsClosedWhenGivenUp(t *testing.T) {
	const timeout = 3 * time.Second
	proxy := testbed.NewAPIProxy(t, members.Config(1))
	proxy.HangLists("configmaps")
	p := newConfigProvider(nil)
	mgr := fleettest.NewManager(t, members.Config(0), p)
	c, err := mccontroller.New(unique("hanging-list"), mgr, mccontroller.Options{
		Reconciler: &fleettest.Recorder{}, CacheSyncTimeout: timeout,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.MultiClusterWatch(mcsource.Kind(&corev1.ConfigMap{}, mchandler.TypedEnqueueRequestForObject[*corev1.ConfigMap]())); err != nil {
		t.Fatal(err)
	}
	fleettest.RunManager(t, mgr)
	<-p.started

	got, report := reports(t)
	p.members.Set("hanging", "h1", proxy.Config(), report)
	// Streams are bounded by the engagement's time limit (plus slack for the
	// teardown); without the fix the informer's stream stays open for good.
	limit := timeout + 3*time.Second
	deadline := time.Now().Add(4 * limit)
	failures := 0
	for time.Now().Before(deadline) {
		select {
		case err := <-got:
			if err == nil {
				t.Fatal("the member was announced engaged although its list never ends")
			}
			failures++
		default:
		}
		if _, oldest, _ := proxy.Streams(); oldest > limit {
			t.Fatalf("a stream has been open for %s, longer than its engagement's limit %s", oldest.Round(time.Millisecond), limit)
		}
		time.Sleep(50 * time.Millisecond) // polling interval, not an assertion
	}
	open, _, closed := proxy.Streams()
	t.Logf("failures reported: %d; streams closed: %d, open: %d", failures, len(closed), open)
	if failures == 0 || len(closed) == 0 {
		t.Fatalf("the engagement was not given up (%d failures reported, %d streams closed)", failures, len(closed))
	}
	p.members.Remove("hanging")
	fleettest.Eventually(t, 30*time.Second, func() error {
		if open, _, _ := proxy.Streams(); open > 0 {
			return fmt.Errorf("%d streams still open after the member was removed", open)
		}
		return nil
	})
}

// Engagements wait for watches to sync now: a controller added while one is
// in flight (its list hangs) is not held up by it.
func TestLateControllerNotHeldUpBySyncingCluster(t *testing.T) {
	proxy := testbed.NewAPIProxy(t, members.Config(1))
	proxy.HangLists("configmaps")
	p := newConfigProvider(nil)
	mgr := fleettest.NewManager(t, members.Config(0), p)
	fleetController(t, mgr, unique("syncing-first"), "syncing-first")
	fleettest.RunManager(t, mgr)
	<-p.started
	p.members.Set("syncing", "h1", proxy.Config(), nil)
	fleettest.Eventually(t, 30*time.Second, func() error {
		if open, _, _ := proxy.Streams(); open == 0 {
			return fmt.Errorf("the engagement's list is not in flight yet")
		}
		return nil
	})
	added := make(chan struct{})
	go func() {
		defer close(added)
		fleetController(t, mgr, unique("added-late"), "added-late")
	}()
	select {
	case <-added:
	case <-time.After(20 * time.Second):
		t.Fatal("adding a controller waited for a cluster whose watches are syncing")
	}
}
