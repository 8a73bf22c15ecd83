package inventory_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
	"github.com/mcruntime/multicluster-runtime/pkg/inventory"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
)

// With a Watch, a listed inventory is listed when the Watch says so (the
// first time once it watches), when a cluster rejects its credentials, and
// never on the Interval.
func TestListingModeWithAWatch(t *testing.T) {
	var listings atomic.Int32
	changes := make(chan func(), 1)
	kit := inventory.New(inventory.Options[client.Object]{
		Name:     "inventory-test-watch",
		Interval: time.Millisecond, // not used: the Watch says when to list
		List: func(context.Context) ([]inventory.Desired, error) {
			listings.Add(1)
			return []inventory.Desired{{Name: "a", Config: fleet.Config(1), Hash: "1"}}, nil
		},
		Watch: func(ctx context.Context, changed func()) error {
			changes <- changed
			<-ctx.Done()
			return nil
		},
	})
	tr := runListing(t, context.Background(), kit)
	changed := <-changes
	fleettest.Consistently(t, 50*time.Millisecond, func() error {
		select {
		case <-kit.Listed():
			return errors.New("Listed closed before the Watch asked for the first listing")
		default:
			return nil
		}
	})
	changed()
	<-kit.Listed()
	fleettest.ExpectEngaged(t, tr, map[multicluster.ClusterName]int{"a": 1})
	listedAfter := func(n int32, why string) {
		t.Helper()
		fleettest.Eventually(t, fleettest.DefaultTimeout, func() error {
			if got := listings.Load(); got != n {
				return fmt.Errorf("%d listings, want %d %s", got, n, why)
			}
			return nil
		})
	}
	listedAfter(1, "after the Watch's first call")
	fleettest.Consistently(t, 200*time.Millisecond, func() error { // 200 Intervals
		if got := listings.Load(); got != 1 {
			return fmt.Errorf("%d listings while the Watch said nothing, want 1", got)
		}
		return nil
	})
	changed()
	listedAfter(2, "after the Watch's second call")
	kit.RefreshForTest("a")
	listedAfter(3, "after the cluster rejected its credentials")
}

// A Watch that fails stops the kit with its error; RunOnce lists once.
func TestListingModeWatchFailsAndRunOnce(t *testing.T) {
	kit := inventory.New(inventory.Options[client.Object]{
		Name:  "inventory-test-watch-fails",
		List:  func(context.Context) ([]inventory.Desired, error) { return nil, nil },
		Watch: func(context.Context, func()) error { return errors.New("watch broke") },
	})
	err := kit.Start(context.Background(), fleettest.NewTracker())
	if err == nil || err.Error() != "inventory-test-watch-fails: watch broke" {
		t.Errorf("Start = %v, want the Watch's error", err)
	}

	var listings atomic.Int32
	once := inventory.New(inventory.Options[client.Object]{
		Name:     "inventory-test-run-once",
		Interval: time.Millisecond,
		List: func(context.Context) ([]inventory.Desired, error) {
			listings.Add(1)
			return []inventory.Desired{{Name: "a", Config: fleet.Config(2), Hash: "2"}}, nil
		},
	})
	tr := fleettest.NewTracker()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := once.RunOnce(ctx, tr); err != nil {
		t.Fatal(err)
	}
	select {
	case <-once.Listed():
	default:
		t.Fatal("RunOnce returned before Listed was closed")
	}
	fleettest.ExpectEngaged(t, tr, map[multicluster.ClusterName]int{"a": 2})
	if n := listings.Load(); n != 1 {
		t.Errorf("RunOnce listed %d times, want once", n)
	}
	if err := once.Start(ctx, tr); !errors.Is(err, multicluster.ErrAlreadyStarted) {
		t.Errorf("Start after RunOnce = %v, want ErrAlreadyStarted", err)
	}
	cancel()
	fleettest.Eventually(t, fleettest.DefaultTimeout, func() error {
		if n := len(tr.Engaged()); n > 0 {
			return fmt.Errorf("%d clusters still engaged after RunOnce's context ended", n)
		}
		return nil
	})
}
