package fleettest

import (
	"context"
	"fmt"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/cluster"
)

// fakeCluster is a cluster of its own identity; the tracker only keeps it.
type fakeCluster struct{ cluster.Cluster }

// A tracker that sees clusters come and go, each under a name of its own
// and names that come back, keeps what is engaged now and a bounded summary
// of the names that left: its entries do not grow with the churn. Count of a
// name still answers while engaged, and for the last names that left.
func TestTrackerForgetsWhatLeft(t *testing.T) {
	const cycles, steady = 20000, 10
	tr := NewTracker()
	cancels := map[string]context.CancelFunc{}
	engage := func(name string) {
		ctx, cancel := context.WithCancel(context.Background())
		if err := tr.Engage(ctx, name, &fakeCluster{}); err != nil {
			t.Fatal(err)
		}
		cancels[name] = cancel
	}
	for i := range steady {
		engage(fmt.Sprint("steady-", i))
	}
	entries := func() int {
		tr.mu.Lock()
		defer tr.mu.Unlock()
		return len(tr.engaged) + len(tr.ctxs) + len(tr.count)
	}
	for i := range cycles {
		name := fmt.Sprint("churn-", i)
		engage(name)
		replaced := cancels["back"]
		engage("back") // a name engaged again and again, replaced each time
		if replaced != nil {
			replaced() // as a provider ends the instance it replaced
		}
		cancels[name]()
		delete(cancels, name)
	}
	bound := 3*(steady+1) + 1024 // engaged now, and the counts of the last 1,024 names that left
	Eventually(t, 0, func() error {
		if n := entries(); n > bound {
			return fmt.Errorf("the tracker holds %d entries after %d churn cycles, want at most %d", n, cycles, bound)
		}
		return nil
	})
	if n := tr.Count("back"); n != cycles {
		t.Errorf("Count(back) = %d, want %d", n, cycles)
	}
	if n := tr.Count("steady-0"); n != 1 {
		t.Errorf("Count(steady-0) = %d, want 1", n)
	}
	last := fmt.Sprint("churn-", cycles-1)
	Eventually(t, 0, func() error {
		if n := tr.Count(last); n != 1 {
			return fmt.Errorf("Count(%s), the last name that left, = %d, want 1", last, n)
		}
		if _, ok := tr.Engaged()[last]; ok {
			return fmt.Errorf("%s engaged after its context ended", last)
		}
		return nil
	})
	for _, cancel := range cancels {
		cancel()
	}
}
