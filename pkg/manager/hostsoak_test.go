package manager_test

import (
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
)

var hostSoak = flag.Bool("hostwork.soak", false, "run the host-work hand-off soak at full length (3 replicas x 12 members, 16 rounds)")

// The hand-off soak with the host's work in the mix: three sharded replicas
// run member work, a host-owner-only controller and a job that needs leader
// election (each kept busy), a plain controller-runtime controller on the
// host manager and a hub-to-fleet fan-out; replicas stop cleanly or die
// (host connection cut, Leases left to expire) at random, half the time the
// host's owner, and join again. No target, the host or a member, is ever
// worked on by two replicas at once, and after each disturbance the host and
// every member are worked on again, each by one live replica, within the
// lease duration plus one sync. Shortened here; -hostwork.soak runs it at
// full length.
func TestHostWorkHandoffSoak(t *testing.T) {
	members, rounds := 6, 4
	if *hostSoak {
		members, rounds = 12, 16
	}
	const syncBound = 10 * time.Second
	b := newHostWorkBed(t, "hostsoak", members)
	b.busy, b.plain = true, true
	names := []string{"r1", "r2", "r3"}
	for _, r := range names {
		b.start(r)
	}
	targets := append([]string{""}, slices.Sorted(maps.Keys(b.names))...)
	// covered: since the later of since and a second ago, each target
	// worked on by exactly one replica, never by without, and the host by
	// both its kinds of work.
	covered := func(since time.Time, without string) func() error {
		return func() error {
			from := time.Now().Add(-time.Second)
			if since.After(from) {
				from = since
			}
			if time.Since(since) < 500*time.Millisecond {
				return fmt.Errorf("too early to tell")
			}
			b.log.mu.Lock()
			by := map[string]map[string]bool{}
			kinds := map[string]bool{}
			for _, w := range b.log.works {
				if w.start.Before(from) || w.kind == fanOut {
					continue
				}
				if by[w.cluster] == nil {
					by[w.cluster] = map[string]bool{}
				}
				by[w.cluster][w.replica] = true
				if w.cluster == "" {
					kinds[w.kind] = true
				}
			}
			b.log.mu.Unlock()
			for _, target := range targets {
				if len(by[target]) != 1 {
					return fmt.Errorf("%q worked on by %v since %s", target, by[target], from.Format(time.StampMilli))
				}
				if by[target][without] {
					return fmt.Errorf("%q worked on by the stopped replica %s", target, without)
				}
			}
			if !kinds[hostOnly] || !kinds[job] {
				return fmt.Errorf("the host's work since %s: %v, want host-only and job", from.Format(time.StampMilli), kinds)
			}
			return nil
		}
	}
	var worst time.Duration
	within := func(what string, disturbed time.Time, check func() error) {
		t.Helper()
		fleettest.Eventually(t, time.Minute, check)
		took := time.Since(disturbed)
		worst = max(worst, took)
		if took > b.lease+syncBound {
			t.Errorf("%s: covered again only after %s, more than the lease duration plus one sync (%s)", what, took.Round(time.Millisecond), b.lease+syncBound)
		}
	}
	fleettest.Eventually(t, time.Minute, covered(time.Now(), ""))
	rng := rand.New(rand.NewPCG(3, 1))
	hostMoves := 0
	for round := range rounds {
		kind := []string{"stop", "kill"}[round%2]
		// Half the rounds disturb the host's owner.
		r := names[rng.IntN(len(names))]
		if round%4 < 2 {
			r = b.hostOwner()
			hostMoves++
		}
		disturbed := time.Now()
		if kind == "kill" {
			b.kill(r)
		} else {
			b.stop(r)
		}
		within(fmt.Sprintf("round %d: %s %s", round, r, kind), disturbed, covered(time.Now(), r))
		joined := time.Now()
		b.start(r)
		within(fmt.Sprintf("round %d: %s joined", round, r), joined, covered(joined, ""))
		t.Logf("round %d: %s %s (host owner now %s), joined again; covered after %s", round, r, kind, b.hostOwner(), time.Since(disturbed).Round(time.Millisecond))
	}
	works, _ := b.log.count()
	t.Logf("%d members, %d rounds (%d disturbing the host's owner), %d reconciles and job runs, slowest recovery %s (bound: lease %s + sync %s)",
		members, rounds, hostMoves, works, worst.Round(time.Millisecond), b.lease, syncBound)
	if o := b.log.overlaps(); len(o) > 0 {
		t.Fatalf("%d pieces of work on one target by two replicas at once, e.g. %v", len(o), o[:min(3, len(o))])
	}
}
