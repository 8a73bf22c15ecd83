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
	ctx := t.Context()
	if err := r.Add(ctx, "a", a); err != nil {
		t.Fatal(err)
	}
	if err := r.Add(ctx, "a", b); !errors.Is(err, clusters.ErrClusterExists) {
		t.Fatalf("Add of a present name: %v, want ErrClusterExists", err)
	}
	if err := r.AddOrReplace(ctx, "b", b); err != nil {
		t.Fatal(err)
	}
	if err := r.AddOrReplace(ctx, "c", c); err != nil {
		t.Fatal(err)
	}
	ended, end := context.WithCancel(ctx)
	end()
	if err := r.Add(ended, "d", a); !errors.Is(err, context.Canceled) {
		t.Fatalf("Add with an ended context: %v, want context.Canceled", err)
	}
	if err := r.AddOrReplace(ended, "d", a); !errors.Is(err, context.Canceled) {
		t.Fatalf("AddOrReplace with an ended context: %v, want context.Canceled", err)
	}
	var seen []string
	r.Range(func(name multicluster.ClusterName, _ cluster.Cluster) bool {
		seen = append(seen, name)
		return name != "b" // stop after b
	})
	if !slices.Equal(seen, []string{"a", "b"}) {
		t.Fatalf("Range visited %v, want a then b, then stop", seen)
	}
	stop := errors.New("stop")
	seen = nil
	err := r.ForEach(func(name multicluster.ClusterName, _ cluster.Cluster) error {
		seen = append(seen, name)
		if name == "b" {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || !slices.Equal(seen, []string{"a", "b"}) {
		t.Fatalf("ForEach visited %v and returned %v, want a then b, then the error", seen, err)
	}
	if err := r.ForEach(func(multicluster.ClusterName, cluster.Cluster) error { return nil }); err != nil {
		t.Fatalf("ForEach through every cluster: %v", err)
	}
	if r.CompareAndRemove("a", b) {
		t.Fatal("CompareAndRemove removed a cluster that is not the one given")
	}
	r.RemoveIfEqual("a", b)
	if _, err := r.Get(ctx, "a"); err != nil {
		t.Fatalf("RemoveIfEqual removed a cluster that is not the one given: %v", err)
	}
	// With EqualClusters, a rebuilt cluster of the same config is equal.
	r.EqualClusters = clusters.EqualClusters[cluster.Cluster]
	r.RemoveIfEqual("a", c)
	r.Remove("b")
	if got := r.ClusterNames(); !slices.Equal(got, []string{"c"}) {
		t.Fatalf("ClusterNames = %v, want [c]", got)
	}
	if !r.CompareAndRemove("c", c) {
		t.Fatal("CompareAndRemove did not report removing an equal cluster")
	}
}

func TestRegistryRefusesClustersOfAnotherType(t *testing.T) {
	r := clusters.NewRegistry[*notAPointer]()
	err := r.Engage(t.Context(), "x", testbed.NewCluster(t, fleet.Config(0)))
	if err == nil || !strings.Contains(err.Error(), `"x"`) || !strings.Contains(err.Error(), "notAPointer") {
		t.Fatalf("Engage of a cluster of another type: %v", err)
	}
}
