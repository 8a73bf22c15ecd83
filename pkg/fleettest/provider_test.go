package fleettest_test

import (
	"context"
	"errors"
	"testing"

	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
)

func TestProviderAddsAndRemovesMembers(t *testing.T) {
	p := fleettest.NewProvider(shared, fleettest.ProviderOptions{Members: []int{0}, Prefix: "m"})
	if err := p.Add(2); err == nil {
		t.Fatal("Add of a member outside the fleet should fail")
	}
	mgr := fleettest.NewManager(t, shared.Config(0), p)
	tr := fleettest.NewTracker()
	if err := mgr.Add(tr); err != nil {
		t.Fatal(err)
	}
	fleettest.RunManager(t, mgr)

	fleettest.ExpectEngaged(t, tr, map[multicluster.ClusterName]int{"m0": 0})
	if err := p.Add(1); err != nil {
		t.Fatal(err)
	}
	engaged := fleettest.ExpectEngaged(t, tr, map[multicluster.ClusterName]int{"m0": 0, "m1": 1})

	p.Remove(0)
	fleettest.ExpectEngaged(t, tr, map[multicluster.ClusterName]int{"m1": 1})
	tr.WaitDisengaged(t, engaged["m0"])
	if _, err := p.Get(context.Background(), "m0"); !errors.Is(err, multicluster.ErrClusterNotFound) {
		t.Fatalf("Get of a removed member: want ErrClusterNotFound, got %v", err)
	}
	if p.ClusterName(1) != "m1" {
		t.Fatalf("ClusterName(1) = %q, want m1", p.ClusterName(1))
	}
}

// A stopped member is retried in the background and never holds back the
// others: what an unreachable cluster does in production.
func TestProviderEngagesTheLiveMembersWhenOneIsStopped(t *testing.T) {
	f := fleettest.New(t, 2)
	if err := f.MarkMembers(); err != nil {
		t.Fatal(err)
	}
	if err := f.StopMember(1); err != nil {
		t.Fatal(err)
	}
	p := fleettest.NewProvider(f, fleettest.ProviderOptions{})
	mgr := fleettest.NewManager(t, f.Config(0), p)
	tr := fleettest.NewTracker()
	if err := mgr.Add(tr); err != nil {
		t.Fatal(err)
	}
	fleettest.RunManager(t, mgr)

	fleettest.ExpectEngaged(t, tr, map[multicluster.ClusterName]int{"member-0": 0})
	if _, err := p.Get(context.Background(), "member-1"); !errors.Is(err, multicluster.ErrClusterNotFound) {
		t.Fatalf("Get of the stopped member: want ErrClusterNotFound, got %v", err)
	}
}
