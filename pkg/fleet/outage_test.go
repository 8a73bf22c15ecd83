package fleet_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/mcruntime/multicluster-runtime/internal/testbed"
	"github.com/mcruntime/multicluster-runtime/pkg/fleet"
	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
)

// A reconcile that held a cluster before an outage may outlive it: when the
// cluster is engaged again after the outage and later let go of, its fence
// (which a next owner waits for) is released only once that reconcile has
// returned too, not only the reconciles of the engagement after the outage,
// whichever engagement the reconcile held.
func TestReleaseWaitsForAReconcileFromBeforeAnOutage(t *testing.T) {
	cfg, proxy := testbed.Proxied(t, members.Config(1))
	fences := newFenceService()
	tr := newHolder()
	e := serveEngine(t, fleet.Options{
		Admission:    fences,
		Health:       fleet.HealthOptions{Interval: 100 * time.Millisecond, Timeout: 200 * time.Millisecond, FailureThreshold: 1},
		MinBackoff:   50 * time.Millisecond,
		MaxBackoff:   200 * time.Millisecond,
		DrainTimeout: time.Minute,
	}, tr)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)

	cl, err := cluster.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	provider, stopProvider := context.WithCancel(ctx)
	if err := e.Engage(provider, "outage", cl); err != nil {
		t.Fatal(err)
	}
	state := func(want fleet.State) func() error {
		return func() error {
			if s, _ := e.State("outage"); s != want {
				return fmt.Errorf("outage is %s, want %s", s, want)
			}
			return nil
		}
	}
	fleettest.Eventually(t, 30*time.Second, state(fleet.StateEngaged))
	if !fences.holds("outage") {
		t.Fatal("an engaged cluster without its fence")
	}

	outage := func() {
		proxy.Cut()
		fleettest.Eventually(t, 30*time.Second, state(fleet.StateDisconnected))
		proxy.SetUp(true)
		fleettest.Eventually(t, 30*time.Second, state(fleet.StateEngaged))
	}
	// A first outage: the cluster is engaged again as it was, under a new
	// engagement. A reconcile starts then and is still running after a second
	// outage.
	outage()
	_, done, ok := e.Hold(context.Background(), "outage")
	if !ok {
		t.Fatal("Hold of an engaged cluster refused")
	}
	outage()

	// The provider lets go of the cluster: its release waits for the reconcile.
	stopProvider()
	fleettest.Eventually(t, 30*time.Second, func() error {
		if _, known := e.State("outage"); known {
			return fmt.Errorf("outage still known")
		}
		return nil
	})
	fleettest.Consistently(t, time.Second, func() error {
		if !fences.holds("outage") {
			return fmt.Errorf("fence released while a reconcile from before the outage still holds the cluster")
		}
		return nil
	})
	done()
	fleettest.Eventually(t, 30*time.Second, func() error {
		if fences.holds("outage") {
			return fmt.Errorf("fence not released after the reconcile returned")
		}
		return nil
	})
}
