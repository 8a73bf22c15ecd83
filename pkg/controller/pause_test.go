package controller

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/mcruntime/multicluster-runtime/internal/metrics"
	"github.com/mcruntime/multicluster-runtime/pkg/clusters"
	"github.com/mcruntime/multicluster-runtime/pkg/fleet"
	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
	mcmanager "github.com/mcruntime/multicluster-runtime/pkg/manager"
	mcreconcile "github.com/mcruntime/multicluster-runtime/pkg/reconcile"
)

// A paused cluster stays engaged and readable, and its requests are held,
// deduplicated, neither dropped nor reconciled; once it is resumed each held
// request is reconciled once.
func TestPausedClusterHoldsItsRequestsUntilResumed(t *testing.T) {
	const name = "repaired"
	rec := &fleettest.Recorder{}
	mgr, c, engaged := pausable(t, name, rec)

	mgr.(mcmanager.ClusterPauser).PauseCluster(name)
	if v := testutil.ToFloat64(metrics.Paused.WithLabelValues(name)); v != 1 {
		t.Errorf("multicluster_cluster_paused{cluster=%q} = %v, want 1", name, v)
	}
	add := func(names ...string) {
		c.mu.RLock()
		defer c.mu.RUnlock()
		for _, n := range names {
			c.queue.Add(fleettest.Request(name, "ns", n))
		}
	}
	add("a", "b", "a")
	fleettest.Consistently(t, time.Second, func() error {
		if n := rec.Count(name, "ns", "a") + rec.Count(name, "ns", "b"); n != 0 {
			return fmt.Errorf("%d requests of the paused cluster reconciled", n)
		}
		if err := engaged(); err != nil {
			return fmt.Errorf("paused: %w", err)
		}
		if _, err := mgr.GetCluster(context.Background(), name); err != nil {
			return fmt.Errorf("GetCluster of the paused cluster: %w", err)
		}
		return nil
	})
	add("a") // while paused, again: still once
	dropped := func(reason string) float64 {
		return testutil.ToFloat64(metrics.DroppedRequests.WithLabelValues(t.Name(), reason))
	}
	if got := dropped("cluster-not-engaged") + dropped("cluster-disconnected"); got != 0 {
		t.Errorf("%v requests of the paused cluster dropped", got)
	}

	mgr.(mcmanager.ClusterPauser).ResumeCluster(name)
	rec.WaitFor(t, 1, name, "ns", "a")
	rec.WaitFor(t, 1, name, "ns", "b")
	fleettest.Consistently(t, 500*time.Millisecond, func() error {
		if n := rec.Count(name, "ns", "a"); n != 1 {
			return fmt.Errorf("a held request added three times was reconciled %d times after the resume, want once", n)
		}
		return nil
	})
	if _, n := fleettest.Metric(t, "multicluster_cluster_paused", map[string]string{"cluster": name}); n != 0 {
		t.Errorf("%d multicluster_cluster_paused series left after the resume", n)
	}
}

// pausable starts a manager whose controller, named after the test, reconciles with rec, and
// engages a real member under name; engaged reports whether it is engaged with
// the engine and the controller.
func pausable(t *testing.T, name string, rec *fleettest.Recorder) (mcmanager.Manager, *mcController[mcreconcile.Request], func() error) {
	t.Helper()
	f := fleettest.New(t, 1)
	mgr := fleettest.NewManager(t, f.Config(0), nil)
	// Named after the test, and again under -count.
	ctrl, err := New(t.Name(), mgr, Options{Reconciler: rec, SkipNameValidation: ptr.To(true)})
	if err != nil {
		t.Fatal(err)
	}
	c := ctrl.(*mcController[mcreconcile.Request])
	fleettest.RunManager(t, mgr)
	mgr.(fleet.Publisher).SetMember(fleet.Member{Name: name, Hash: "1", Build: func(context.Context) (cluster.Cluster, error) {
		return clusters.NewCluster(f.Config(0))
	}})
	engine := mgr.(mcmanager.FleetOwner).Fleet()
	engaged := func() error {
		if s, _ := engine.State(name); s != fleet.StateEngaged {
			return fmt.Errorf("%s is %s", name, s)
		}
		if c.engagement(name) == nil {
			return fmt.Errorf("%s not engaged with the controller", name)
		}
		return nil
	}
	fleettest.Eventually(t, 0, engaged)

	return mgr, c, engaged
}

// Each request of a paused cluster is reconciled once after the resume, also
// one queued again just before it: at the resume some of its copies are still
// queued, some in processing, some held. Rounds of many keys, each added
// twice while paused, with reconciles that take a moment, so that the resume
// comes while workers hold some of them.
func TestPausedRequestsQueuedAtTheResumeAreReconciledOnce(t *testing.T) {
	const name, rounds, keys = "held-twice", 5, 400
	rec := &fleettest.Recorder{Result: func(context.Context, mcreconcile.Request) (reconcile.Result, error) {
		time.Sleep(200 * time.Microsecond) // a reconcile's work, so that several are in flight at the resume
		return reconcile.Result{}, nil
	}}
	mgr, c, _ := pausable(t, name, rec)
	pauser := mgr.(mcmanager.ClusterPauser)
	add := func(round int) {
		c.mu.RLock()
		defer c.mu.RUnlock()
		for i := range keys {
			c.queue.Add(fleettest.Request(name, "ns", fmt.Sprint(round, "-", i)))
		}
	}
	for round := range rounds {
		pauser.PauseCluster(name)
		add(round)
		fleettest.Consistently(t, 100*time.Millisecond, func() error {
			for req, n := range rec.Counts() {
				if strings.HasPrefix(req.Name, fmt.Sprint(round, "-")) {
					return fmt.Errorf("%v of the paused cluster reconciled %d times", req, n)
				}
			}
			return nil
		})
		add(round) // again, then resumed at once: these are queued at the resume
		pauser.ResumeCluster(name)
		count := func() (reconciled int, err error) {
			for i := range keys {
				switch n := rec.Count(name, "ns", fmt.Sprint(round, "-", i)); {
				case n > 1:
					return 0, fmt.Errorf("round %d: request %d, added twice while paused, reconciled %d times after the resume, want once", round, i, n)
				case n == 1:
					reconciled++
				}
			}
			return reconciled, nil
		}
		fleettest.Eventually(t, 0, func() error {
			n, err := count()
			if err != nil {
				t.Fatal(err) // not undone by waiting
			}
			if n < keys {
				return fmt.Errorf("round %d: %d of %d held requests reconciled after the resume", round, n, keys)
			}
			return nil
		})
		fleettest.Consistently(t, 300*time.Millisecond, func() error { _, err := count(); return err })
	}
}
