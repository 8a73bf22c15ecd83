package controller

import (
	"context"
	"fmt"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/mcruntime/multicluster-runtime/pkg/clusters"
	"github.com/mcruntime/multicluster-runtime/pkg/fleet"
	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
	mcmanager "github.com/mcruntime/multicluster-runtime/pkg/manager"
	mcreconcile "github.com/mcruntime/multicluster-runtime/pkg/reconcile"
)

// A request for a cluster that is still joining waits for the cluster to
// change state or engage, and is not looked at again in between: while the
// cluster takes a second to start, the request is looked at once (a poll
// every 100 ms would look ten times), then again when the cluster engages,
// and reconciled.
func TestRequestForAJoiningClusterIsWokenNotPolled(t *testing.T) {
	f := fleettest.New(t, 1)
	mgr := fleettest.NewManager(t, f.Config(0), nil)
	rec := &fleettest.Recorder{}
	ctrl, err := New("join-wake", mgr, Options{Reconciler: rec})
	if err != nil {
		t.Fatal(err)
	}
	c := ctrl.(*mcController[mcreconcile.Request])
	fleettest.RunManager(t, mgr)

	release := make(chan struct{})
	mgr.(fleet.Publisher).SetMember(fleet.Member{Name: "joining", Hash: "1", Build: func(ctx context.Context) (cluster.Cluster, error) {
		select {
		case <-release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return clusters.NewCluster(f.Config(0))
	}})
	engine := mgr.(mcmanager.FleetOwner).Fleet()
	fleettest.Eventually(t, 0, func() error {
		if s, _ := engine.State("joining"); s != fleet.StateStarting {
			return fmt.Errorf("joining is %s", s)
		}
		return nil
	})
	fleettest.Eventually(t, 0, func() error {
		c.mu.RLock()
		defer c.mu.RUnlock()
		if c.queue == nil {
			return fmt.Errorf("the controller has not started")
		}
		return nil
	})
	c.mu.RLock()
	c.queue.Add(fleettest.Request("joining", "ns", "fanned-out"))
	c.mu.RUnlock()
	fleettest.Eventually(t, 0, func() error {
		if c.joinChecks.Load() == 0 {
			return fmt.Errorf("the request was not looked at")
		}
		return nil
	})
	fleettest.Consistently(t, time.Second, func() error {
		if n := rec.Count("joining", "ns", "fanned-out"); n != 0 {
			return fmt.Errorf("the request was reconciled %d times before its cluster joined", n)
		}
		return nil
	})
	if n := c.joinChecks.Load(); n > 1 {
		t.Errorf("the request was looked at %d times while its cluster stayed starting for a second, want 1: it polls", n)
	}
	close(release)
	rec.WaitFor(t, 1, "joining", "ns", "fanned-out")
	// At most one look per change of state (engaged) and one for the
	// engagement with this controller.
	if n := c.joinChecks.Load(); n > 3 {
		t.Errorf("the request was looked at %d times in all, want at most 3", n)
	}
}
