package fleet_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/mcruntime/multicluster-runtime/pkg/fleet"
	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
)

// An ownership change is a wish like any other: it supersedes the step in
// flight. A replica that waits for a cluster's fence and is told the
// cluster is owned elsewhere stops waiting at once, and never takes the
// fence when it frees up (it would compete with the rightful owner).
func TestAnOwnershipChangeCancelsTheFenceAcquire(t *testing.T) {
	fences := newFenceService()
	block := make(chan struct{})
	fences.block = block
	e, _ := startEngine(t, fleet.Options{Admission: fences, MinBackoff: 10 * time.Millisecond})
	cl := &fakeCluster{name: "reassigned", running: &runningSet{n: map[string]int{}}}
	e.SetMember(fleet.Member{Name: "reassigned", Hash: "1", Build: func(context.Context) (cluster.Cluster, error) { return cl, nil }})
	fleettest.Eventually(t, 10*time.Second, func() error {
		fences.mu.Lock()
		defer fences.mu.Unlock()
		if fences.asked == 0 {
			return fmt.Errorf("the engine has not asked for the fence yet")
		}
		return nil
	})

	fences.setOwns("reassigned", false)
	fleettest.Eventually(t, 5*time.Second, func() error {
		fences.mu.Lock()
		defer fences.mu.Unlock()
		if fences.abandoned == 0 {
			return fmt.Errorf("the Acquire of a cluster owned elsewhere still waits")
		}
		return nil
	})
	close(block) // the fence frees up: an Acquire still in flight would take it now
	e.SetMember(fleet.Member{Name: "other", Hash: "1", Build: func(context.Context) (cluster.Cluster, error) {
		return &fakeCluster{name: "other", running: &runningSet{n: map[string]int{}}}, nil
	}})
	fleettest.Eventually(t, 10*time.Second, func() error {
		if !fences.holds("other") {
			return fmt.Errorf("other's fence not taken yet")
		}
		return nil
	})
	if n := fences.acquired("reassigned"); n != 0 {
		t.Fatalf("the fence of a cluster owned elsewhere was taken %d times after the ownership changed", n)
	}
}

// A cluster reassigned while it starts is let go within a bound: its build
// is cancelled, not carried on to the end (up to CacheSyncTimeout) with its
// initial list reconciled on the wrong replica while the new owner waits
// for the fence.
func TestAnOwnershipChangeCancelsTheStartInFlight(t *testing.T) {
	fences := newFenceService()
	e, tr := startEngine(t, fleet.Options{Admission: fences, MinBackoff: 10 * time.Millisecond, CacheSyncTimeout: time.Minute})
	building := make(chan struct{})
	cancelled := make(chan struct{})
	e.SetMember(fleet.Member{Name: "moving", Hash: "1", Build: func(ctx context.Context) (cluster.Cluster, error) {
		close(building)
		select {
		case <-ctx.Done():
			close(cancelled)
			return nil, ctx.Err()
		case <-time.After(time.Minute):
			return &fakeCluster{name: "moving", running: &runningSet{n: map[string]int{}}}, nil
		}
	}})
	select {
	case <-building:
	case <-time.After(10 * time.Second):
		t.Fatal("the cluster was not built within 10s")
	}
	fences.setOwns("moving", false)
	select {
	case <-cancelled:
	case <-time.After(5 * time.Second):
		t.Fatal("the build of a cluster reassigned to another replica still runs 5s after the ownership changed")
	}
	fleettest.Eventually(t, 5*time.Second, func() error {
		if fences.holds("moving") {
			return fmt.Errorf("the fence of a cluster owned elsewhere is still held")
		}
		return nil
	})
	fleettest.Eventually(t, 5*time.Second, notEngaged(tr, "moving"))
}

// With probing disabled, the probe queue does not grow with engagements:
// nothing takes its entries, and each would hold its record long after the
// record is forgotten.
func TestProbeQueueStaysEmptyWhenProbingIsDisabled(t *testing.T) {
	e, tr := runningEngine(t, fleet.Options{Health: fleet.HealthOptions{Disabled: true}, MinBackoff: 10 * time.Millisecond})
	running := &runningSet{n: map[string]int{}}
	for i := range 50 {
		name := fmt.Sprintf("churn-%d", i%5)
		cl := &fakeCluster{name: name, running: running}
		e.SetMember(fleet.Member{Name: name, Hash: fmt.Sprint(i), Build: func(context.Context) (cluster.Cluster, error) { return cl, nil }})
		fleettest.Eventually(t, 10*time.Second, engagedWith(tr, name, cl))
		if i%2 == 1 {
			e.RemoveMember(name)
			fleettest.Eventually(t, 10*time.Second, notEngaged(tr, name))
		}
	}
	if n := e.ProbeEntries(); n != 0 {
		t.Fatalf("the probe queue holds %d entries after 50 engagements with probing disabled, want 0", n)
	}
}

// A publication waiting for its outcome while its cluster's fence lapses
// hears the outcome of the cluster's next run on this replica, which still
// owns it: not nil at the lapse, when the cluster is engaged nowhere. Found
// by the whole-system checker (internal/systemmodel, seed 4, step 67: a
// host outage lapsed the fence of a cluster that could not start, and its
// Add returned nil).
func TestAnOutcomeOutlastsAFenceLapse(t *testing.T) {
	fences := newFenceService()
	e, _ := startEngine(t, fleet.Options{Admission: fences})
	fleettest.Eventually(t, 10*time.Second, func() error { return e.Ready(nil) }) // before, the outcome is nil at once
	building := make(chan struct{})
	var builds atomic.Int32
	outcome := make(chan error, 1)
	e.SetMember(fleet.Member{Name: "lapsed", Hash: "1", Outcome: outcome, Build: func(ctx context.Context) (cluster.Cluster, error) {
		if builds.Add(1) > 1 {
			return nil, errors.New("refused by its server")
		}
		close(building)
		<-ctx.Done() // the build in flight ends with the fence
		return nil, ctx.Err()
	}})
	select {
	case <-building:
	case <-time.After(10 * time.Second):
		t.Fatal("the cluster was not built within 10s")
	}
	fences.lose("lapsed")
	select {
	case err := <-outcome:
		if err == nil {
			t.Fatal("the outcome was nil after the fence lapsed, though the cluster was engaged nowhere and its next start failed")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no outcome within 10s of the fence's lapse")
	}
}
