package clusters_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/mcruntime/multicluster-runtime/internal/testbed"
	"github.com/mcruntime/multicluster-runtime/pkg/clusters"
	mcfleet "github.com/mcruntime/multicluster-runtime/pkg/fleet"
	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
	mcmanager "github.com/mcruntime/multicluster-runtime/pkg/manager"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
)

// Handed the manager, Clusters has no lifecycle of its own: the cluster is a
// member the engine runs. A cluster that stops running on its own is the
// engine's to handle (disconnected, still a member, Get finds nothing), not
// removed by Clusters behind the engine's back; Remove withdraws the member.
func TestAddWithTheManagerPublishesAMember(t *testing.T) {
	mgr := fleettest.NewManager(t, fleet.Config(0), nil)
	fleettest.RunManager(t, mgr)
	engine := mgr.(mcmanager.FleetOwner).Fleet()
	// Add returns at once, with the cluster waiting, while the engine has
	// not started (documented): what is tested here is Add on a running
	// manager.
	fleettest.Eventually(t, 0, func() error { return engine.Ready(nil) })

	c := clusters.New[cluster.Cluster]()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cl := &stoppable{Cluster: testbed.NewCluster(t, fleet.Config(1))}
	if err := c.Add(ctx, "published", cl, mgr); err != nil {
		t.Fatal(err)
	}
	if got, err := c.GetTyped(ctx, "published"); err != nil || got != cluster.Cluster(cl) {
		t.Fatalf("GetTyped after Add = %v, %v", got, err)
	}
	if state, _ := engine.State("published"); state != mcfleet.StateEngaged {
		t.Fatalf("engine state after Add: %q, want engaged", state)
	}

	cl.stop()
	fleettest.Eventually(t, 0, func() error {
		if state, known := engine.State("published"); !known || state != mcfleet.StateDisconnected {
			return fmt.Errorf("engine state %q (known %v), want the member disconnected", state, known)
		}
		return nil
	})
	if _, err := c.Get(ctx, "published"); !errors.Is(err, multicluster.ErrClusterNotFound) {
		t.Fatalf("Get of a disconnected member: %v, want ErrClusterNotFound", err)
	}
	if names := c.ClusterNames(); len(names) != 0 {
		t.Fatalf("ClusterNames lists %v, want only engaged clusters", names)
	}

	c.Remove("published")
	fleettest.Eventually(t, 0, func() error {
		if _, known := engine.State("published"); known {
			return errors.New("the member is still known to the engine after Remove")
		}
		return nil
	})
}
