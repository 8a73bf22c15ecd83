package fleet_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/mcruntime/multicluster-runtime/pkg/fleet"
	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
)

// A reconcile handed a pre-built cluster's second engagement (its first was
// refused, and the retry engages the run the first attempt started) may
// outlive it: when the provider replaces the cluster and then removes it,
// the fence is released only once that reconcile has returned. The
// engagement that was replaced used to leave the books, and the fence went
// while the reconcile still ran.
func TestReleaseWaitsForAReconcileOfAReplacedEngagement(t *testing.T) {
	running, holds := &runningSet{n: map[string]int{}}, &runningSet{n: map[string]int{}}
	fences := &checkedFences{fenceService: newFenceService(), running: running, inflight: holds}
	tr := newHolder()
	e := serveEngine(t, fleet.Options{Admission: fences, MinBackoff: 5 * time.Millisecond, MaxBackoff: 50 * time.Millisecond,
		Health: fleet.HealthOptions{Disabled: true}, DrainTimeout: time.Minute}, tr)

	first := &fakeCluster{name: "replaced", running: running}
	first.refuse.Store(true)
	e.SetMember(fleet.Member{Name: "replaced", Hash: "1", Cluster: first})
	fleettest.Eventually(t, 30*time.Second, engagedWith(tr, "replaced", first))
	_, done, ok := e.Hold(context.Background(), "replaced")
	if !ok {
		t.Fatal("Hold of an engaged cluster refused")
	}
	holds.add("replaced")

	second := &fakeCluster{name: "replaced", running: running}
	e.SetMember(fleet.Member{Name: "replaced", Hash: "2", Cluster: second})
	fleettest.Eventually(t, 30*time.Second, engagedWith(tr, "replaced", second))
	e.RemoveMember("replaced")
	fleettest.Eventually(t, 30*time.Second, func() error {
		if running.get("replaced") > 0 {
			return fmt.Errorf("replaced still runs")
		}
		return nil
	})
	fleettest.Consistently(t, time.Second, func() error {
		if v := fences.violations.Load(); v != nil {
			return fmt.Errorf("%s", v)
		}
		if !fences.holds("replaced") {
			return fmt.Errorf("fence released while a reconcile of the replaced engagement still holds the cluster")
		}
		return nil
	})
	holds.done("replaced")
	done()
	fleettest.Eventually(t, 30*time.Second, func() error {
		if fences.holds("replaced") {
			return fmt.Errorf("fence not released after the reconcile returned")
		}
		return nil
	})
}

// blockingSubscriber blocks its first Engage until unblocked, and records
// whether a second one came while the first was blocked.
type blockingSubscriber struct {
	*holder
	entered, unblock chan struct{}
	calls            atomic.Int32
	blocked          atomic.Bool
	overlapped       atomic.Bool
}

func (b *blockingSubscriber) Engage(ctx context.Context, name multicluster.ClusterName, cl cluster.Cluster) error {
	if b.calls.Add(1) == 1 {
		b.blocked.Store(true)
		close(b.entered)
		<-b.unblock
		err := b.holder.Engage(ctx, name, cl)
		b.blocked.Store(false)
		return err
	}
	if b.blocked.Load() {
		b.overlapped.Store(true)
	}
	return b.holder.Engage(ctx, name, cl)
}

// A name removed and published again while its engagement is still calling
// subscribers: the new engagement reaches a subscriber only after the old one
// returned, so that the old one, whose context ended meanwhile, cannot
// replace the new one there (the subscriber would hold nothing while the
// engine counts the cluster engaged).
func TestEngagementsOfARepublishedNameDoNotOverlap(t *testing.T) {
	running := &runningSet{n: map[string]int{}}
	sub := &blockingSubscriber{holder: newHolder(), entered: make(chan struct{}), unblock: make(chan struct{})}
	e := serveEngine(t, fleet.Options{Health: fleet.HealthOptions{Disabled: true}}, sub)
	var unblock sync.Once
	release := func() { unblock.Do(func() { close(sub.unblock) }) }
	t.Cleanup(release) // before the engine stops: it waits for the engagement

	first := &fakeCluster{name: "again", running: running}
	e.SetMember(fleet.Member{Name: "again", Hash: "1", Cluster: first})
	<-sub.entered
	e.RemoveMember("again")
	second := &fakeCluster{name: "again", running: running}
	e.SetMember(fleet.Member{Name: "again", Hash: "2", Cluster: second})
	fleettest.Consistently(t, 500*time.Millisecond, func() error {
		if sub.overlapped.Load() {
			return errors.New("the new engagement reached the subscriber while the removed one was still engaging it")
		}
		return nil
	})
	release()
	fleettest.Eventually(t, 30*time.Second, engagedWith(sub.holder, "again", second))
	if sub.overlapped.Load() {
		t.Fatal("the new engagement reached the subscriber while the removed one was still engaging it")
	}
}
