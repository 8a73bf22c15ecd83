package controller

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

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
	f := fleettest.New(t, 1)
	mgr := fleettest.NewManager(t, f.Config(0), nil)
	rec := &fleettest.Recorder{}
	ctrl, err := New("pause", mgr, Options{Reconciler: rec})
	if err != nil {
		t.Fatal(err)
	}
	c := ctrl.(*mcController[mcreconcile.Request])
	fleettest.RunManager(t, mgr)
	const name = "repaired"
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
		return testutil.ToFloat64(metrics.DroppedRequests.WithLabelValues("pause", reason))
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
