package sharding_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/mcruntime/multicluster-runtime/internal/testbed"
	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
	"github.com/mcruntime/multicluster-runtime/pkg/manager/sharding"
)

// Three replicas share 12 clusters: each is held by exactly one. A clean stop
// hands its clusters over at once (well before its lease could expire); a
// replica cut off from the host gives up its clusters before a peer takes them
// after the lease expires. No cluster is ever held by two replicas at a time.
func TestHandOffAfterCleanStopAndCrash(t *testing.T) {
	names := clusterNames(12)
	rec := &recorder{}
	// A long lease: the clean hand-off must not wait for it.
	opts := timing(20*time.Second, 14*time.Second, time.Second)
	a := startReplica(t, "handoff", "a", opts, names, rec)
	b := startReplica(t, "handoff", "b", opts, names, rec)
	c := startReplica(t, "handoff", "c", opts, names, rec)
	owners := rec.expectCoverage(t, names, time.Minute)
	for _, r := range []*replica{a, b, c} {
		fleettest.Eventually(t, time.Minute, func() error { // every replica agrees
			for n, o := range owners {
				if got := r.c.Owner(n); got != o {
					return errors.New(r.c.Identity() + " sees " + n + " owned by " + got + ", held by " + o)
				}
			}
			return nil
		})
	}
	t.Logf("owners with 3 replicas: %v", owners)

	stopped := time.Now()
	a.stop()
	rec.expectCoverage(t, names, opts.LeaseDuration/2, "b", "c")
	t.Logf("clean stop handed off in %s", time.Since(stopped))

	// b is cut off: it cannot renew, stops its clusters after RenewDeadline and
	// cannot release them; c takes them over once b's lease has expired.
	b.cut.Store(true)
	rec.expectCoverage(t, names, 2*opts.LeaseDuration+10*time.Second, "c")
	for _, n := range names {
		if !c.c.Owns(n) {
			t.Errorf("c does not own %s", n)
		}
	}
	rec.checkNoOverlap(t)
}

// A replica joining two others takes only its share: no cluster moves between
// the two that stay.
func TestJoiningReplicaTakesOnlyItsShare(t *testing.T) {
	names := clusterNames(12)
	rec := &recorder{}
	opts := timing(6*time.Second, 4*time.Second, 500*time.Millisecond)
	startReplica(t, "join", "a", opts, names, rec)
	startReplica(t, "join", "b", opts, names, rec)
	before := rec.expectCoverage(t, names, time.Minute)

	c := startReplica(t, "join", "c", opts, names, rec)
	waitPeers(t, c.c, 3)
	var after map[string]string
	fleettest.Eventually(t, time.Minute, func() (err error) {
		if after, err = rec.current(names); err != nil {
			return err
		}
		for _, n := range names {
			if want := c.c.Owner(n); after[n] != want {
				return fmt.Errorf("%s held by %s, assigned to %s", n, after[n], want)
			}
		}
		return nil
	})
	moved := 0
	for _, n := range names {
		if after[n] != before[n] {
			moved++
			if after[n] != "c" {
				t.Errorf("%s moved from %s to %s, not to the joining replica", n, before[n], after[n])
			}
		}
	}
	if moved == 0 {
		t.Error("the joining replica took nothing")
	}
	t.Logf("%d of %d clusters moved to the joining replica", moved, len(names))
	rec.checkNoOverlap(t)
}

// Acquire blocks while another replica holds the fence and proceeds at once
// when it is released; the released fenced context ends with ErrReleased.
func TestAcquireWaitsForRelease(t *testing.T) {
	opts := timing(20*time.Second, 14*time.Second, time.Second)
	a := startReplica(t, "acquire", "a", opts, nil, nil)
	b := startReplica(t, "acquire", "b", opts, nil, nil)
	ctx := context.Background()
	waitPeers(t, a.c, 2)
	waitPeers(t, b.c, 2)

	fencedA, releaseA, err := a.c.Acquire(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := a.c.Acquire(ctx, "x"); err == nil {
		t.Fatal("a second Acquire of a held fence succeeded")
	}
	short, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if _, _, err := b.c.Acquire(short, "x"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("b acquired a fence a holds: err=%v", err)
	}

	got := make(chan error, 1)
	var fencedB context.Context
	var releaseB func()
	go func() {
		var err error
		fencedB, releaseB, err = b.c.Acquire(ctx, "x")
		got <- err
	}()
	releaseA()
	if cause := context.Cause(fencedA); !errors.Is(cause, sharding.ErrReleased) {
		t.Errorf("a's fenced context ended with %v, want ErrReleased", cause)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(opts.LeaseDuration / 2): // well before a's lease could expire
		t.Fatal("b did not acquire the released fence")
	}
	if fencedB.Err() != nil {
		t.Fatal("b's fence ended at once")
	}
	releaseB()
	releaseB() // idempotent
	for event, want := range map[string]float64{"acquired": 2, "released": 2, "lost": 0} {
		if got := fenceEvents(t, runGroup(t, "acquire"), event); got != want {
			t.Errorf("multicluster_sharding_fence_events_total{event=%q} = %v, want %v", event, got, want)
		}
	}
}

// fenceEvents reads multicluster_sharding_fence_events_total{group,event}.
func fenceEvents(t *testing.T, group, event string) float64 {
	v, _ := fleettest.Metric(t, "multicluster_sharding_fence_events_total", map[string]string{"group": group, "event": event})
	return v
}

// A stopping coordinator ends every fenced context with ErrStopping.
func TestStopEndsFences(t *testing.T) {
	opts := timing(20*time.Second, 14*time.Second, time.Second)
	a := startReplica(t, "stop", "a", opts, nil, nil)
	waitPeers(t, a.c, 1)
	fenced, release, err := a.c.Acquire(context.Background(), "x")
	if err != nil {
		t.Fatal(err)
	}
	go func() { <-fenced.Done(); release() }() // the engine stops the cluster, then releases
	a.stop()
	if cause := context.Cause(fenced); !errors.Is(cause, sharding.ErrStopping) {
		t.Errorf("fenced context ended with %v, want ErrStopping", cause)
	}
	if a.c.Owns("x") {
		t.Error("a stopped coordinator owns a cluster")
	}
}

func waitPeers(t testing.TB, c *sharding.Coordinator, n int) {
	t.Helper()
	fleettest.Eventually(t, time.Minute, func() error {
		if got := c.Peers(); len(got) != n {
			return errors.New("peers: " + joinStrings(got))
		}
		return nil
	})
}

func joinStrings(s []string) string {
	out := ""
	for i, x := range s {
		if i > 0 {
			out += ","
		}
		out += x
	}
	return out
}

// A replica cut off from the host ends its fenced contexts with ErrFenceLost
// and owns nothing once RenewDeadline passes; its peer acquires the fence only
// after that, when the replica's lease has expired.
func TestCutOffReplicaGivesUpBeforePeerTakesOver(t *testing.T) {
	opts := timing(4*time.Second, 2*time.Second, 250*time.Millisecond)
	a := startReplica(t, "cutoff", "a", opts, nil, nil)
	b := startReplica(t, "cutoff", "b", opts, nil, nil)
	waitPeers(t, a.c, 2)
	waitPeers(t, b.c, 2)
	ctx := context.Background()
	fencedA, _, err := a.c.Acquire(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}

	a.cut.Store(true)
	fencedB, releaseB, err := b.c.Acquire(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	defer releaseB()
	if fencedA.Err() == nil { // a's fence must have ended before b's began
		t.Fatal("b acquired the fence while a's fenced context was still open")
	}
	if cause := context.Cause(fencedA); !errors.Is(cause, sharding.ErrFenceLost) {
		t.Errorf("a's fence ended with %v, want ErrFenceLost", cause)
	}
	if fencedB.Err() != nil {
		t.Error("b's fence ended")
	}
	for _, n := range clusterNames(12) {
		if a.c.Owns(n) {
			t.Errorf("a, cut off, still owns %s", n)
		}
	}
}

// Two processes given the same identity never both run: the second waits while
// the first renews the replica Lease, and starts once the first has left.
func TestSameIdentityRunsOnce(t *testing.T) {
	opts := timing(2*time.Second, 1500*time.Millisecond, 250*time.Millisecond)
	first := startReplica(t, "identity", "dup", opts, nil, nil)
	waitPeers(t, first.c, 1)
	if !first.c.Owns("x") {
		t.Fatal("the only replica does not own x")
	}
	second := startReplica(t, "identity", "dup", opts, nil, nil)
	fleettest.Consistently(t, 2*opts.LeaseDuration, func() error {
		if second.c.Owns("x") {
			return errors.New("a second process with the same identity owns x while the first renews")
		}
		return nil
	})
	first.stop()
	fleettest.Eventually(t, time.Minute, func() error {
		if !second.c.Owns("x") {
			return errors.New("the second process does not own x after the first left")
		}
		return nil
	})
}

// A release that fails (the host briefly unreachable) is retried: the next
// owner is not left waiting on a fence that names a live replica.
func TestFailedReleaseIsRetried(t *testing.T) {
	opts := timing(6*time.Second, 4*time.Second, 250*time.Millisecond)
	a := startReplica(t, "retry", "a", opts, nil, nil)
	b := startReplica(t, "retry", "b", opts, nil, nil)
	waitPeers(t, a.c, 2)
	waitPeers(t, b.c, 2)
	_, release, err := a.c.Acquire(context.Background(), "x")
	if err != nil {
		t.Fatal(err)
	}
	a.cut.Store(true)
	release() // fails: a is cut off
	a.cut.Store(false)

	// a keeps renewing, so only the retried release can free the fence.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, releaseB, err := b.c.Acquire(ctx, "x")
	if err != nil {
		t.Fatalf("b could not acquire a fence a released while cut off: %v", err)
	}
	releaseB()
	if len(a.c.Peers()) != 2 || len(b.c.Peers()) != 2 {
		t.Errorf("a replica left: a sees %v, b sees %v", a.c.Peers(), b.c.Peers())
	}
	if got := fenceEvents(t, runGroup(t, "retry"), "release_failed"); got < 1 {
		t.Errorf("release_failed counted %v times, want at least 1", got)
	}
}

// A fence that names a live replica which does not hold it (a write that timed
// out but was applied, or one left by a previous process with its identity) is
// cleared by that replica, so that the owner is not blocked for its lifetime.
func TestOrphanedFenceIsCleared(t *testing.T) {
	opts := timing(6*time.Second, 4*time.Second, 250*time.Millisecond)
	group := runGroup(t, "orphan")
	orphan := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:   sharding.DefaultNamespace,
			Name:        sharding.FenceLeaseName(group, "x"),
			Labels:      map[string]string{sharding.LabelGroup: group, sharding.LabelRole: "fence"},
			Annotations: map[string]string{sharding.AnnotationCluster: "x"},
		},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("a")},
	}
	if err := testbed.NewClient(t, host).Create(context.Background(), orphan); err != nil {
		t.Fatal(err)
	}
	a := startReplica(t, "orphan", "a", opts, nil, nil)
	b := startReplica(t, "orphan", "b", opts, nil, nil)
	waitPeers(t, a.c, 2)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, release, err := b.c.Acquire(ctx, "x")
	if err != nil {
		t.Fatalf("b could not acquire a fence orphaned by a live replica: %v", err)
	}
	release()
	if len(b.c.Peers()) != 2 {
		t.Errorf("a left: b sees %v", b.c.Peers())
	}
}
