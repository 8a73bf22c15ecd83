package sharding

import (
	"fmt"
	"math"
	"strings"
	"testing"
)

func names(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("cluster-%d", i)
	}
	return out
}

// Adding a peer moves only the clusters it wins; removing one moves only its own.
func TestRendezvousMovesOnlyTheShare(t *testing.T) {
	two := []peer{{"a", 1}, {"b", 1}}
	three := []peer{{"a", 1}, {"b", 1}, {"c", 1}}
	moved := 0
	for _, n := range names(3000) {
		before, after := owner(two, n), owner(three, n)
		if before != after {
			moved++
			if after != "c" {
				t.Fatalf("%s moved from %s to %s", n, before, after)
			}
		}
	}
	if share := float64(moved) / 3000; math.Abs(share-1.0/3) > 0.05 {
		t.Errorf("the new peer took %.2f of the clusters, want about 1/3", share)
	}
}

// Each peer wins a share proportional to its weight.
func TestRendezvousWeights(t *testing.T) {
	peers := []peer{{"a", 1}, {"b", 1}, {"c", 2}}
	count := map[string]int{}
	for _, n := range names(8000) {
		count[owner(peers, n)]++
	}
	for id, want := range map[string]float64{"a": 0.25, "b": 0.25, "c": 0.5} {
		if got := float64(count[id]) / 8000; math.Abs(got-want) > 0.03 {
			t.Errorf("%s won %.3f of the clusters, want %.2f", id, got, want)
		}
	}
}

func TestLeaseNamesAreValidForAnyClusterName(t *testing.T) {
	n := leaseName(DefaultName, roleFence, "kind#prod/eu+ctx:Ω")
	if len(n) > 63 || strings.ContainsAny(n, "#/+:Ω") {
		t.Errorf("lease name %q", n)
	}
	if leaseName(DefaultName, roleFence, "a") == leaseName(DefaultName, roleFence, "b") {
		t.Error("two clusters share a fence")
	}
}
