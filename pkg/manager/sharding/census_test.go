package sharding_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
	"github.com/mcruntime/multicluster-runtime/pkg/manager/sharding"
)

// Two replicas run six clusters; a seventh, "orphan", is known but run by
// nobody. Each replica's census counts its own clusters, its peer's, and
// the orphan as owned by nobody; the orphan is logged, with its name, once
// it has been unowned for longer than the lease duration, and only once.
func TestCensusCountsOwnersAndLogsTheUnownedOnce(t *testing.T) {
	opts := timing(2*time.Second, 1500*time.Millisecond, 200*time.Millisecond)
	names := clusterNames(6)
	rec := &recorder{}
	logs := &fleettest.LogBuffer{}
	log := logs.Logger()
	withLog := opts
	withLog.Logger = &log
	a := startReplica(t, "census", "a", withLog, names, rec)
	b := startReplica(t, "census", "b", opts, names, rec)
	waitPeers(t, a.c, 2)
	waitPeers(t, b.c, 2)

	known := append(slices.Clone(names), "orphan")
	fleettest.Eventually(t, time.Minute, func() error {
		ca, cb := a.c.Census(known), b.c.Census(known)
		for who, c := range map[string]sharding.Census{"a": ca, "b": cb} {
			if !slices.Equal(c.None, []string{"orphan"}) {
				return fmt.Errorf("%s sees %v owned by nobody, want the orphan alone", who, c.None)
			}
		}
		if !slices.Equal(ca.Owned, cb.Peer) || !slices.Equal(ca.Peer, cb.Owned) || len(ca.Owned)+len(ca.Peer) != len(names) {
			return fmt.Errorf("a owns %v and sees %v at its peer; b owns %v and sees %v at its peer", ca.Owned, ca.Peer, cb.Owned, cb.Peer)
		}
		return nil
	})
	t.Logf("a owns %v, b owns %v", a.c.Census(known).Owned, b.c.Census(known).Owned)

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	var late atomic.Bool // a second orphan, known later: its log comes several censuses after the first's
	wg.Go(func() {
		a.c.ReportOwnership(ctx, func() []string {
			if late.Load() {
				return append(slices.Clone(known), "late-orphan")
			}
			return known
		})
	})
	logged := func(name string) int {
		return strings.Count(logs.String(), fmt.Sprintf(`"cluster"=%q`, name))
	}
	fleettest.Eventually(t, time.Minute, func() error {
		if logged("orphan") == 0 {
			return fmt.Errorf("the orphan is not logged")
		}
		return nil
	})
	late.Store(true)
	fleettest.Eventually(t, time.Minute, func() error {
		if logged("late-orphan") == 0 {
			return fmt.Errorf("the late orphan is not logged")
		}
		return nil
	})
	if n := logged("orphan"); n != 1 {
		t.Errorf("the orphan was logged %d times, want once:\n%s", n, logs.String())
	}
	if !strings.Contains(logs.String(), "Nobody runs cluster orphan") {
		t.Errorf("the log does not name the orphan:\n%s", logs.String())
	}
}
