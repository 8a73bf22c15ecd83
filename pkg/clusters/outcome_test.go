package clusters_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/mcruntime/multicluster-runtime/internal/testbed"
	"github.com/mcruntime/multicluster-runtime/pkg/clusters"
	mcfleet "github.com/mcruntime/multicluster-runtime/pkg/fleet"
	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
	mcmanager "github.com/mcruntime/multicluster-runtime/pkg/manager"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
)

// refuser is a runnable subscribed to the fleet that refuses the clusters
// it is told to, and remembers the engagements it accepted.
type refuser struct {
	mu      sync.Mutex
	refuse  map[multicluster.ClusterName]bool
	engaged map[multicluster.ClusterName]context.Context
}

func newRefuser() *refuser {
	return &refuser{refuse: map[multicluster.ClusterName]bool{}, engaged: map[multicluster.ClusterName]context.Context{}}
}

func (r *refuser) Start(ctx context.Context) error { <-ctx.Done(); return nil }

func (r *refuser) Engage(ctx context.Context, name multicluster.ClusterName, _ cluster.Cluster) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.refuse[name] {
		return errors.New("refused by the test")
	}
	r.engaged[name] = ctx
	return nil
}

func (r *refuser) setRefuse(name multicluster.ClusterName, refuse bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.refuse[name] = refuse
}

func (r *refuser) engagement(name multicluster.ClusterName) context.Context {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.engaged[name]
}

// refusedAndGone checks what a refused Add leaves: an error, no member in
// the engine, no name in c, and room for the next Add of the name.
func refusedAndGone(t *testing.T, c *clusters.Clusters[cluster.Cluster], engine *mcfleet.Engine, r *refuser, name multicluster.ClusterName, err error, aware multicluster.Aware) {
	t.Helper()
	if err == nil {
		t.Fatalf("Add of %s returned nil, want the refusal: it returned before its outcome", name)
	}
	fleettest.Eventually(t, 30*time.Second, func() error {
		if state, known := engine.State(name); known {
			return fmt.Errorf("%s is still a member (%s) after its Add was refused", name, state)
		}
		return nil
	})
	r.setRefuse(name, false)
	if err := c.Add(context.Background(), name, testbed.NewCluster(t, fleet.Config(1)), aware); err != nil {
		t.Fatalf("Add of %s after the refused one: %v", name, err)
	}
}

// Issue 40, defect 3: Add with the manager reports the outcome of its own
// publication even when the name was just removed and is still being torn
// down (a reconcile holds it). Add used to read the engine's state as
// "wanted", take it for "not run here" and return nil before the outcome:
// the refused cluster stayed a member, retried for ever, and the next Add
// failed with ErrClusterExists.
func TestAddAfterRemoveReportsItsOwnOutcome(t *testing.T) {
	mgr := fleettest.NewManager(t, fleet.Config(0), nil)
	r := newRefuser()
	if err := mgr.Add(r); err != nil {
		t.Fatal(err)
	}
	fleettest.RunManager(t, mgr)
	engine := mgr.(mcmanager.FleetOwner).Fleet()
	fleettest.Eventually(t, 0, func() error { return engine.Ready(nil) })

	c := clusters.New[cluster.Cluster]()
	ctx := context.Background()
	const name = "removed-then-added"
	if err := c.Add(ctx, name, testbed.NewCluster(t, fleet.Config(1)), mgr); err != nil {
		t.Fatal(err)
	}
	// A reconcile holds the cluster: its teardown waits for it.
	_, done, ok := engine.Hold(r.engagement(name), name)
	if !ok {
		t.Fatal("no hold on the engaged cluster")
	}
	c.Remove(name)
	fleettest.Eventually(t, 30*time.Second, func() error { // let go of, and torn down while held
		if state, known := engine.State(name); known {
			return fmt.Errorf("%s is %s after Remove, want it let go of", name, state)
		}
		return nil
	})
	r.setRefuse(name, true)
	added := make(chan error, 1)
	go func() { added <- c.Add(ctx, name, testbed.NewCluster(t, fleet.Config(1)), mgr) }()
	fleettest.Eventually(t, 30*time.Second, func() error { // published, the old one still torn down
		if state, _ := engine.State(name); state != mcfleet.StateWanted {
			return fmt.Errorf("%s is %s, want the new member wanted", name, state)
		}
		return nil
	})
	done() // the teardown ends; the new member's attempt is refused
	refusedAndGone(t, &c, engine, r, name, <-added, mgr)
}

// Issue 40, defect 3: under sharding, Add on the replica that owns the
// cluster reports the outcome while the cluster's fence is being acquired,
// instead of returning nil at once as if the cluster were owned elsewhere.
// The engine stands for the manager: both are the fleet.Publisher Add
// publishes to.
func TestAddWhileTheFenceIsAcquiredReportsItsOwnOutcome(t *testing.T) {
	fences := testbed.NewFences()
	engine := mcfleet.New(mcfleet.Options{Admission: fences, MinBackoff: 20 * time.Millisecond, Logger: testr.New(t)})
	r := newRefuser()
	engine.Subscribe(r)
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() { defer close(stopped); _ = engine.Start(ctx) }()
	t.Cleanup(func() { cancel(); <-stopped })
	fleettest.Eventually(t, 0, func() error { return engine.Ready(nil) }) // before it runs, Add returns at once

	c := clusters.New[cluster.Cluster]()
	const name = "fenced"
	r.setRefuse(name, true)
	unblock := fences.Block()
	added := make(chan error, 1)
	go func() { added <- c.Add(ctx, name, testbed.NewCluster(t, fleet.Config(1)), engine) }()
	fleettest.Eventually(t, 30*time.Second, func() error { // published, its fence not acquired yet
		if state, _ := engine.State(name); state != mcfleet.StateWanted {
			return fmt.Errorf("%s is %s, want wanted while its fence is acquired", name, state)
		}
		return nil
	})
	unblock()
	refusedAndGone(t, &c, engine, r, name, <-added, engine)
}
