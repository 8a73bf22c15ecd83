package fleettest

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
)

// DefaultTimeout bounds Eventually when it is given no timeout, and the waits
// of Tracker and ExpectEngaged. Engaging a cluster starts its cache, which
// takes seconds on a loaded machine.
const DefaultTimeout = time.Minute

// Eventually polls cond until it returns nil, and fails the test with cond's
// last error if that has not happened after timeout (DefaultTimeout if 0).
// Tests wait with it instead of sleeping: a condition met early ends the wait
// early, and one never met names what was missing.
func Eventually(t testing.TB, timeout time.Duration, cond func() error) {
	t.Helper()
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %s: %v", timeout, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Consistently polls cond for the whole of d and fails the test at the first
// error it returns: the way to check that something does not happen (a fence
// released too early, say), failing as soon as it does instead of after a
// sleep.
func Consistently(t testing.TB, d time.Duration, cond func() error) {
	t.Helper()
	for deadline := time.Now().Add(d); ; time.Sleep(10 * time.Millisecond) {
		if err := cond(); err != nil {
			t.Fatalf("condition broken within %s: %v", d, err)
		}
		if time.Now().After(deadline) {
			return
		}
	}
}

var _ multicluster.Aware = &Tracker{}

// Tracker is a multicluster.Aware that records the clusters a provider
// engages, so that a provider's test can see which clusters are engaged now
// and whether an old instance of a cluster was let go. It is also a runnable
// that does nothing, so it can be added to a manager (mgr.Add), which then
// hands it every cluster its provider engages:
//
//	tr := fleettest.NewTracker()
//	if err := mgr.Add(tr); err != nil { ... }
//	// start mgr, then:
//	fleettest.ExpectEngaged(t, tr, map[multicluster.ClusterName]int{"member-0": 0})
type Tracker struct {
	mu      sync.Mutex
	engaged map[multicluster.ClusterName]cluster.Cluster
	ctxs    map[cluster.Cluster]context.Context // every engagement ever made
	count   map[multicluster.ClusterName]int    // engagements by name
}

// NewTracker returns a Tracker that has seen nothing.
func NewTracker() *Tracker {
	return &Tracker{
		engaged: map[multicluster.ClusterName]cluster.Cluster{},
		ctxs:    map[cluster.Cluster]context.Context{},
		count:   map[multicluster.ClusterName]int{},
	}
}

// Start blocks until ctx ends.
func (t *Tracker) Start(ctx context.Context) error { <-ctx.Done(); return nil }

// Engage records cl as engaged under name until ctx ends (the provider's
// signal that the cluster is gone) or another cluster is engaged under name.
func (t *Tracker) Engage(ctx context.Context, name multicluster.ClusterName, cl cluster.Cluster) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.engaged[name] = cl
	t.ctxs[cl] = ctx
	t.count[name]++
	context.AfterFunc(ctx, func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		if t.engaged[name] == cl {
			delete(t.engaged, name)
		}
	})
	return nil
}

// Engaged returns the clusters engaged now, by name: those whose engagement
// context has not ended (the entry itself goes a moment later, from the
// context's AfterFunc).
func (t *Tracker) Engaged() map[multicluster.ClusterName]cluster.Cluster {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := maps.Clone(t.engaged)
	maps.DeleteFunc(out, func(_ multicluster.ClusterName, cl cluster.Cluster) bool { return t.ctxs[cl].Err() != nil })
	return out
}

// Count returns how many times a cluster was engaged under name.
func (t *Tracker) Count(name multicluster.ClusterName) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.count[name]
}

// WaitDisengaged waits until the engagement of cl has ended: a provider that
// replaces a cluster must let the old instance go.
func (t *Tracker) WaitDisengaged(tb testing.TB, cl cluster.Cluster) {
	tb.Helper()
	t.mu.Lock()
	ctx := t.ctxs[cl]
	t.mu.Unlock()
	if ctx == nil {
		tb.Fatal("fleettest: WaitDisengaged of a cluster that was never engaged")
	}
	Eventually(tb, DefaultTimeout, func() error {
		if ctx.Err() == nil {
			return fmt.Errorf("the cluster is still engaged")
		}
		return nil
	})
}

// MemberOf tells which member of a fleet marked with MarkMembers cl talks
// to, by reading the identity ConfigMap through cl's API reader.
func MemberOf(ctx context.Context, cl cluster.Cluster) (int, error) {
	cm := &corev1.ConfigMap{}
	if err := cl.GetAPIReader().Get(ctx, client.ObjectKey{Namespace: "default", Name: IdentityConfigMap}, cm); err != nil {
		return -1, fmt.Errorf("fleettest: reading the identity ConfigMap: %w", err)
	}
	n, err := strconv.Atoi(cm.Data["member"])
	if err != nil {
		return -1, fmt.Errorf("fleettest: identity ConfigMap: %w", err)
	}
	return n, nil
}

// ExpectEngaged waits until exactly the clusters named in want are engaged
// in tr, each talking to the member of a marked fleet (MarkMembers) want
// gives for it, and returns them. It fails the test after DefaultTimeout.
func ExpectEngaged(t testing.TB, tr *Tracker, want map[multicluster.ClusterName]int) map[multicluster.ClusterName]cluster.Cluster {
	t.Helper()
	return expectEngaged(t, tr, want, func(name multicluster.ClusterName, cl cluster.Cluster) error {
		if n, err := MemberOf(context.Background(), cl); err != nil || n != want[name] {
			return fmt.Errorf("%q reaches member %d (%v), want member %d", name, n, err, want[name])
		}
		return nil
	})
}

// expectEngaged waits until exactly the clusters named in want are engaged
// in tr and check accepts each, and returns them.
func expectEngaged[V any](t testing.TB, tr *Tracker, want map[multicluster.ClusterName]V, check func(multicluster.ClusterName, cluster.Cluster) error) map[multicluster.ClusterName]cluster.Cluster {
	t.Helper()
	var got map[multicluster.ClusterName]cluster.Cluster
	Eventually(t, DefaultTimeout, func() error {
		got = tr.Engaged()
		if len(got) != len(want) {
			return fmt.Errorf("engaged %v, want %v", slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want)))
		}
		for name := range want {
			cl, ok := got[name]
			if !ok {
				return fmt.Errorf("%q is not engaged", name)
			}
			if err := check(name, cl); err != nil {
				return err
			}
		}
		return nil
	})
	return got
}
