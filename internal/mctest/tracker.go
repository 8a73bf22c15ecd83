package mctest

import (
	"context"
	"fmt"
	"maps"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/mcruntime/multicluster-runtime/internal/testfleet"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
)

// Tracker is a multicluster.Aware (and a runnable that does nothing) that
// records what a provider engages.
type Tracker struct {
	mu      sync.Mutex
	engaged map[multicluster.ClusterName]cluster.Cluster
	ctxs    map[cluster.Cluster]context.Context // every engagement ever made
	count   map[multicluster.ClusterName]int    // engagements by name
}

var _ multicluster.Aware = &Tracker{}

// NewTracker returns a Tracker that has seen nothing.
func NewTracker() *Tracker {
	return &Tracker{
		engaged: map[multicluster.ClusterName]cluster.Cluster{},
		ctxs:    map[cluster.Cluster]context.Context{},
		count:   map[multicluster.ClusterName]int{},
	}
}

// Start blocks until ctx ends, so that a Tracker can be added to a manager.
func (t *Tracker) Start(ctx context.Context) error { <-ctx.Done(); return nil }

// Engage records the engagement until ctx ends.
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

// Snapshot returns the clusters engaged now, by name.
func (t *Tracker) Snapshot() map[multicluster.ClusterName]cluster.Cluster {
	t.mu.Lock()
	defer t.mu.Unlock()
	return maps.Clone(t.engaged)
}

// Count returns how often name was engaged.
func (t *Tracker) Count(name multicluster.ClusterName) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.count[name]
}

// WaitDisengaged waits until the engagement of cl has ended.
func (t *Tracker) WaitDisengaged(tb testing.TB, cl cluster.Cluster) {
	tb.Helper()
	t.mu.Lock()
	ctx := t.ctxs[cl]
	t.mu.Unlock()
	if ctx == nil {
		tb.Fatal("cluster was never engaged")
	}
	Eventually(tb, time.Minute, func() error {
		if ctx.Err() == nil {
			return fmt.Errorf("the old instance is still engaged")
		}
		return nil
	})
}

// MemberOf tells which member of a marked fleet (testfleet.MarkMembers) cl
// talks to.
func MemberOf(ctx context.Context, cl cluster.Cluster) (int, error) {
	cm := &corev1.ConfigMap{}
	if err := cl.GetAPIReader().Get(ctx, client.ObjectKey{Namespace: "default", Name: testfleet.IdentityConfigMap}, cm); err != nil {
		return -1, err
	}
	return strconv.Atoi(cm.Data["member"])
}

// ExpectEngaged waits until exactly the clusters in want are engaged, each
// talking to the given member of a marked fleet, and returns them.
func ExpectEngaged(t testing.TB, tr *Tracker, want map[multicluster.ClusterName]int) map[multicluster.ClusterName]cluster.Cluster {
	t.Helper()
	var got map[multicluster.ClusterName]cluster.Cluster
	Eventually(t, time.Minute, func() error {
		got = tr.Snapshot()
		if len(got) != len(want) {
			return fmt.Errorf("engaged %d clusters %v, want %v", len(got), keys(got), want)
		}
		for name, m := range want {
			cl, ok := got[name]
			if !ok {
				return fmt.Errorf("%q not engaged", name)
			}
			if n, err := MemberOf(context.Background(), cl); err != nil || n != m {
				return fmt.Errorf("%q reaches member %d (err %v), want %d", name, n, err, m)
			}
		}
		return nil
	})
	return got
}

func keys(m map[multicluster.ClusterName]cluster.Cluster) []multicluster.ClusterName {
	out := make([]multicluster.ClusterName, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
