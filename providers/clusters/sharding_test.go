package clusters_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"

	"github.com/mcruntime/multicluster-runtime/internal/testbed"
	mcfleet "github.com/mcruntime/multicluster-runtime/pkg/fleet"
	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
	"github.com/mcruntime/multicluster-runtime/providers/clusters"
)

// shardedProvider runs a clusters provider on a fleet engine whose fences
// the test decides, with a tracker subscribed, until the test ends.
func shardedProvider(t *testing.T) (*clusters.Provider, *mcfleet.Engine, *testbed.Fences) {
	t.Helper()
	fences := testbed.NewFences()
	e := mcfleet.New(mcfleet.Options{Admission: fences, MinBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond,
		Logger: testr.New(t)})
	e.Subscribe(fleettest.NewTracker())
	p := clusters.New()
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{}, 2)
	go func() { _ = e.Start(ctx); stopped <- struct{}{} }()
	go func() { _ = p.Start(ctx, e); stopped <- struct{}{} }()
	t.Cleanup(func() { cancel(); <-stopped; <-stopped })
	// Both run: before, Add keeps the cluster for the provider's start, and
	// the engine answers at once.
	<-p.Listed()
	fleettest.Eventually(t, 0, func() error { return e.Ready(nil) })
	return p, e, fences
}

// Issue 40, defect 1: a cluster added to the provider (lent to the engine)
// that leaves this replica — handed to another, or its fence lost to a
// renewal lapse — is engaged again when it comes back. The engine used to
// stop it when it left and then refuse to start it again ("a pre-built
// cluster cannot be started again"): it stayed disconnected for ever.
func TestAddedClusterEngagedAgainAfterHandOffAndFenceLoss(t *testing.T) {
	p, e, fences := shardedProvider(t)
	const name = "lent"
	if err := p.Add(context.Background(), name, testbed.NewCluster(t, fleet.Config(1))); err != nil {
		t.Fatal(err)
	}
	testbed.LeaveAndComeBack(t, e, fences, name, func(name multicluster.ClusterName) error {
		_, err := p.Get(context.Background(), name)
		return err
	})
}

// Issue 40, defect 2: Add of a cluster another replica owns returns at once,
// as Engage and Clusters[T].Add do, and the cluster stays added: it is
// engaged when this replica comes to own it. Add used to wait for a first
// report the engine never makes for a cluster it does not run, until its
// ctx ended, and ending the ctx removed the cluster.
func TestAddOfAClusterOwnedElsewhereReturnsAtOnce(t *testing.T) {
	p, e, fences := shardedProvider(t)
	const name = "elsewhere"
	fences.SetOwns(name, false)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	added := make(chan error, 1)
	go func() { added <- p.Add(ctx, name, testbed.NewCluster(t, fleet.Config(1))) }()
	select {
	case err := <-added:
		if err != nil {
			t.Fatalf("Add of a cluster owned elsewhere: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Add of a cluster owned elsewhere did not return within 10s")
	}
	if state, _ := e.State(name); state != mcfleet.StateWanted {
		t.Fatalf("the cluster is %s after Add, want wanted (owned elsewhere)", state)
	}

	fences.SetOwns(name, true)
	fleettest.Eventually(t, 30*time.Second, func() error {
		_, err := p.Get(ctx, name)
		return err
	})
}

// An Add waiting for its cluster's fence returns when the cluster is handed
// to another replica meanwhile: it is engaged where it runs, as Add of a
// cluster owned elsewhere returns at once. It used to wait until its ctx
// ended: the engine let go of the fence's Acquire and answered nobody.
// Found by the whole-system checker (internal/systemmodel, seed 2, step 36).
func TestAddWaitingForItsFenceReturnsWhenTheClusterIsHandedAway(t *testing.T) {
	p, e, fences := shardedProvider(t)
	const name = "handed-away"
	unblock := fences.Block() // the fence is held by a peer: Acquire waits
	defer unblock()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	added := make(chan error, 1)
	go func() { added <- p.Add(ctx, name, testbed.NewCluster(t, fleet.Config(1))) }()
	fleettest.Eventually(t, 10*time.Second, func() error {
		if _, known := e.State(name); !known {
			return errors.New("not published yet")
		}
		return nil
	})
	select {
	case err := <-added:
		t.Fatalf("Add returned before the cluster's fence was acquired: %v", err)
	case <-time.After(100 * time.Millisecond):
	}

	fences.SetOwns(name, false)
	select {
	case err := <-added:
		if err != nil {
			t.Fatalf("Add of a cluster handed to another replica while it waited for its fence: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Add of a cluster handed to another replica while it waited for its fence did not return within 10s")
	}
	if state, _ := e.State(name); state != mcfleet.StateWanted {
		t.Fatalf("the cluster is %s, want wanted (owned elsewhere)", state)
	}
	unblock()
	fences.SetOwns(name, true)
	fleettest.Eventually(t, 30*time.Second, func() error {
		_, err := p.Get(ctx, name)
		return err
	})
}
