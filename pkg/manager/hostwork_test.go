package manager_test

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/mcruntime/multicluster-runtime/pkg/fleetreader"
	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
	"github.com/mcruntime/multicluster-runtime/pkg/manager/sharding"
)

// Three sharded replicas over the host and six members. A host-only
// controller (WithHostReconcilesOnHostOwner) and a plain controller-runtime
// controller on GetLocalManager() reconcile each change of their hub object
// on exactly one replica, the host's owner, also after the owner is killed
// (another replica takes the host within the lease duration plus one sync,
// never while the old one still works); a hub-to-fleet fan-out writes each
// member's copy exactly once per change; no target, the host or a member,
// is ever worked on by two replicas at once; and every replica's census
// counts every member owned by itself or a live peer, none by nobody.
func TestHostWorkHasOneOwner(t *testing.T) {
	const syncBound = 10 * time.Second // one sync on a loaded test machine
	b := newHostWorkBed(t, "hostwork", 6)
	b.plain = true
	for _, r := range []string{"r1", "r2", "r3"} {
		b.start(r)
	}
	owner := b.hostOwner()
	b.hostWorkDone("0")

	// Nothing unowned: each replica sees each member owned by itself or a
	// live peer, and together they own each member once.
	members := slices.Sorted(maps.Keys(b.names))
	fleetCensus := func() error {
		owned := map[string][]string{}
		for r, rep := range b.started {
			a := rep.mgr.(interface{ Assignment() fleetreader.Assignment }).Assignment()
			census := a.(interface {
				Census([]string) sharding.Census
			}).Census(members)
			if len(census.None) > 0 {
				return fmt.Errorf("%s sees %v owned by nobody", r, census.None)
			}
			for _, m := range census.Owned {
				owned[m] = append(owned[m], r)
			}
		}
		for _, m := range members {
			if len(owned[m]) != 1 {
				return fmt.Errorf("member %s owned by %v", m, owned[m])
			}
		}
		return nil
	}
	fleettest.Eventually(t, time.Minute, fleetCensus)

	steady := func(from, to int) {
		t.Helper()
		for k := from; k <= to; k++ {
			v := strconv.Itoa(k)
			b.set("rollup", v)
			b.set("source", v)
			hostOnlyBy, plainBy := b.hostWorkDone(v)
			b.copiesAt(v)
			t.Logf("v=%s: host-only reconciled by %v, plain by %v", v, hostOnlyBy, plainBy)
		}
	}
	steady(1, 3)

	// Kill the host's owner: another replica takes the host over.
	killed := time.Now()
	b.kill(owner)
	next := b.hostOwner()
	var took time.Duration
	for _, kind := range []string{hostOnly, plain} {
		var w work
		fleettest.Eventually(t, time.Minute, func() error {
			var ok bool
			if w, ok = b.log.firstAfter(kind, "", killed); !ok || w.replica == owner {
				return fmt.Errorf("no %s work by a live replica since the kill", kind)
			}
			return nil
		})
		took = max(took, w.start.Sub(killed))
		t.Logf("%s work taken over by %s %s after the kill", kind, w.replica, w.start.Sub(killed).Round(time.Millisecond))
	}
	if took > b.lease+syncBound {
		t.Errorf("the host's work was taken over %s after its owner was killed, more than the lease duration plus one sync (%s)", took, b.lease+syncBound)
	}
	fleettest.Eventually(t, time.Minute, fleetCensus)
	steady(4, 5)

	// Each change reconciled by one replica (the owner of the time), and
	// each member's copy written once per change.
	for k := 1; k <= 5; k++ {
		v := strconv.Itoa(k)
		want := owner
		if k > 3 {
			want = next
		}
		for _, kind := range []string{hostOnly, plain} {
			by := b.log.seen(kind, "", v)
			if k == 3 {
				// Current when the owner was killed: its successor
				// reconciles it again when it takes the host over (its
				// initial list), after the kill.
				if w, _ := b.log.firstAfter(kind, "", killed); w.v == v && w.replica == next {
					by[next]--
					if by[next] == 0 {
						delete(by, next)
					}
				}
			}
			if len(by) != 1 || by[want] != 1 {
				t.Errorf("v=%s: %s work done by %v, want once by %s alone", v, kind, by, want)
			}
		}
		writes := b.log.writesOf(v)
		for _, m := range members {
			if len(writes[m]) != 1 {
				t.Errorf("v=%s: member %s's copy written %d times (by %v), want once", v, m, len(writes[m]), writes[m])
			}
		}
	}
	if o := b.log.overlaps(); len(o) > 0 {
		t.Errorf("%d pieces of work on one target by two replicas at once, e.g. %v", len(o), o[:min(3, len(o))])
	}
	works, writes := b.log.count()
	t.Logf("host owner %s, then %s after the kill (taken over after %s); %d reconciles, %d writes, no overlap",
		owner, next, took.Round(time.Millisecond), works, writes)
}
