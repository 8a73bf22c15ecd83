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
//
// It keeps only what is engaged now: an engagement that ended is forgotten,
// so that a long test with clusters coming and going does not keep every
// cluster it ever saw. Count answers for the names engaged now and for the
// last 1,024 names that left.
type Tracker struct {
	mu       sync.Mutex
	engaged  map[multicluster.ClusterName]cluster.Cluster // the latest instance of each name, until it ends
	ctxs     map[cluster.Cluster]context.Context          // the engagements that have not ended
	count    map[multicluster.ClusterName]int             // engagements by name: engaged now, or among gone
	gone     []goneName                                   // the names that left last, oldest first
	lastLeft map[multicluster.ClusterName]uint64          // each of their last departures
	seq      uint64                                       // departures seen
}

// keptGoneNames is the number of names that left whose counts a Tracker
// keeps (see Tracker.Count).
const keptGoneNames = 1024

// goneName is a name that left, at the seq-th departure the tracker saw.
type goneName struct {
	name multicluster.ClusterName
	seq  uint64
}

// NewTracker returns a Tracker that has seen nothing.
func NewTracker() *Tracker {
	return &Tracker{
		engaged:  map[multicluster.ClusterName]cluster.Cluster{},
		ctxs:     map[cluster.Cluster]context.Context{},
		count:    map[multicluster.ClusterName]int{},
		lastLeft: map[multicluster.ClusterName]uint64{},
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
		if t.ctxs[cl] == ctx {
			delete(t.ctxs, cl)
		}
		if t.engaged[name] == cl {
			delete(t.engaged, name)
			t.left(name)
		}
	})
	return nil
}

// left keeps the count of name, which has no engagement now, among the last
// keptGoneNames names that left, and forgets the oldest of those unless it
// came back or left again since; under mu.
func (t *Tracker) left(name multicluster.ClusterName) {
	t.seq++
	t.lastLeft[name] = t.seq
	t.gone = append(t.gone, goneName{name, t.seq})
	if len(t.gone) <= keptGoneNames {
		return
	}
	old := t.gone[0]
	t.gone = t.gone[1:]
	if t.lastLeft[old.name] != old.seq {
		return // it left again since: kept for that
	}
	delete(t.lastLeft, old.name)
	if _, back := t.engaged[old.name]; !back {
		delete(t.count, old.name)
	}
}

// Engaged returns the clusters engaged now, by name: those whose engagement
// context has not ended (the entry itself goes a moment later, from the
// context's AfterFunc).
func (t *Tracker) Engaged() map[multicluster.ClusterName]cluster.Cluster {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := maps.Clone(t.engaged)
	maps.DeleteFunc(out, func(_ multicluster.ClusterName, cl cluster.Cluster) bool {
		ctx := t.ctxs[cl]
		return ctx == nil || ctx.Err() != nil
	})
	return out
}

// Count returns how many times a cluster was engaged under name: for a name
// engaged now or among the last 1,024 names that left; a name that
// left before those counts 0.
func (t *Tracker) Count(name multicluster.ClusterName) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.count[name]
}

// WaitDisengaged waits until the engagement of cl has ended: a provider that
// replaces a cluster must let the old instance go. The tracker keeps no
// record of an engagement that ended: for cl not engaged now, ended or never
// engaged, it returns at once.
func (t *Tracker) WaitDisengaged(tb testing.TB, cl cluster.Cluster) {
	tb.Helper()
	t.mu.Lock()
	ctx := t.ctxs[cl]
	t.mu.Unlock()
	if ctx == nil {
		return
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
