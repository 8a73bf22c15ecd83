package clusters_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/mcruntime/multicluster-runtime/internal/testbed"
	"github.com/mcruntime/multicluster-runtime/pkg/clusters"
	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
)

// notAPointer is a cluster.Cluster of another type than the registry's.
type notAPointer struct{ cluster.Cluster }

func TestRegistryRecordsEngagementsWhileTheyLast(t *testing.T) {
	r := clusters.NewRegistry[cluster.Cluster]()
	a, b := testbed.NewCluster(t, fleet.Config(0)), testbed.NewCluster(t, fleet.Config(1))
	ctxA, endA := context.WithCancel(t.Context())
	if err := r.Engage(ctxA, "a", a); err != nil {
		t.Fatal(err)
	}
	if err := r.Engage(t.Context(), "b", b); err != nil {
		t.Fatal(err)
	}
	if got := r.ClusterNames(); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("ClusterNames = %v", got)
	}
	if got, err := r.GetTyped(t.Context(), "a"); err != nil || got != a {
		t.Fatalf("GetTyped(a) = %v, %v", got, err)
	}
	// b is engaged again within ctxA. A newer engagement of a replaces a;
	// when ctxA ends, b goes, and the end of a's older engagement does not
	// remove the newer one.
	if err := r.Engage(ctxA, "b", b); err != nil { // the same instance: the record stays
		t.Fatal(err)
	}
	a2 := testbed.NewCluster(t, fleet.Config(0))
	if err := r.Engage(t.Context(), "a", a2); err != nil {
		t.Fatal(err)
	}
	endA()
	fleettest.Eventually(t, 0, func() error {
		if _, err := r.Get(t.Context(), "b"); !errors.Is(err, multicluster.ErrClusterNotFound) {
			return errors.New("b is still recorded after its engagement ended")
		}
		return nil
	})
	if got, err := r.Get(t.Context(), "a"); err != nil || got != a2 {
		t.Fatalf("after the older engagement ended Get(a) = %v, %v; want the newer cluster", got, err)
	}
}

func TestRegistryAddRemoveForEach(t *testing.T) {
	r := clusters.NewRegistry[cluster.Cluster]()
	a, b, c := testbed.NewCluster(t, fleet.Config(0)), testbed.NewCluster(t, fleet.Config(1)), testbed.NewCluster(t, fleet.Config(0))
	if err := r.Add("a", a); err != nil {
		t.Fatal(err)
	}
	if err := r.Add("a", b); !errors.Is(err, clusters.ErrClusterExists) {
		t.Fatalf("Add of a present name: %v, want ErrClusterExists", err)
	}
	r.AddOrReplace("b", b)
	r.AddOrReplace("c", c)
	var seen []string
	r.ForEach(func(name multicluster.ClusterName, _ cluster.Cluster) bool {
		seen = append(seen, name)
		return name != "b" // stop after b
	})
	if !slices.Equal(seen, []string{"a", "b"}) {
		t.Fatalf("ForEach visited %v, want a then b, then stop", seen)
	}
	if r.RemoveIfEqual("a", b) {
		t.Fatal("RemoveIfEqual removed a cluster that is not the one given")
	}
	// With EqualClusters, a rebuilt cluster of the same config is equal.
	r.EqualClusters = clusters.EqualClusters[cluster.Cluster]
	if !r.RemoveIfEqual("a", c) {
		t.Fatal("RemoveIfEqual with EqualClusters did not remove an equal cluster")
	}
	r.Remove("b")
	if got := r.ClusterNames(); !slices.Equal(got, []string{"c"}) {
		t.Fatalf("ClusterNames = %v, want [c]", got)
	}
}

func TestRegistryRefusesClustersOfAnotherType(t *testing.T) {
	r := clusters.NewRegistry[*notAPointer]()
	err := r.Engage(t.Context(), "x", testbed.NewCluster(t, fleet.Config(0)))
	if err == nil || !strings.Contains(err.Error(), `"x"`) || !strings.Contains(err.Error(), "notAPointer") {
		t.Fatalf("Engage of a cluster of another type: %v", err)
	}
}
