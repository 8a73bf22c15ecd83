package fleet_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/mcruntime/multicluster-runtime/internal/testbed"
	"github.com/mcruntime/multicluster-runtime/pkg/fleet"
	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
)

// A reconcile still draining when the engine stops asks for its cluster
// (mcmanager.GetCluster, Lookup): the engine answers that the cluster is not
// engaged, during its shutdown and after it, and never panics.
func TestGetDuringAndAfterShutdownAnswers(t *testing.T) {
	running := &runningSet{n: map[string]int{}}
	e := fleet.New(fleet.Options{MinBackoff: 10 * time.Millisecond, Health: fleet.HealthOptions{Disabled: true}})
	tr := newHolder()
	e.Subscribe(tr)
	ctx, stop := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() { defer close(stopped); _ = e.Start(ctx) }()
	t.Cleanup(func() { stop(); <-stopped })

	cl := &fakeCluster{name: "draining", running: running}
	e.SetMember(fleet.Member{Name: "draining", Hash: "1", Build: func(context.Context) (cluster.Cluster, error) { return cl, nil }})
	fleettest.Eventually(t, 10*time.Second, engagedWith(tr, "draining", cl))

	stop()
	<-stopped
	if got, err := e.Get("draining"); err == nil {
		t.Fatalf("Get after the engine stopped answered %p without an error", got)
	}
	if _, ok := e.Lookup("draining"); ok {
		t.Fatal("Lookup after the engine stopped found the cluster")
	}
	if n := running.get("draining"); n != 0 {
		t.Fatalf("%d clusters still run after the engine stopped", n)
	}
}

// A cluster whose engagement takes longer than the probe interval (every
// controller's watches listing a large cluster, a server still recovering)
// comes back after an outage: a healthy answer never supersedes the
// engagement on its way, and the engine builds one cluster for the
// reconnection, not one per probe.
func TestClusterComesBackWhenEngagingTakesLongerThanTheProbeInterval(t *testing.T) {
	cfg, proxy := testbed.Proxied(t, members.Config(1))
	tr := newHolder()
	tr.slow = func() time.Duration { return 300 * time.Millisecond }
	var builds countingBuilds
	e := serveEngine(t, fleet.Options{
		Health:     fleet.HealthOptions{Interval: 100 * time.Millisecond, Timeout: 200 * time.Millisecond, FailureThreshold: 1},
		MinBackoff: 50 * time.Millisecond,
		MaxBackoff: 100 * time.Millisecond,
	}, tr)
	e.SetMember(fleet.Member{Name: "slow", Hash: "1", Build: builds.of(cfg)})
	state := func(want fleet.State) func() error {
		return func() error {
			if s, _ := e.State("slow"); s != want {
				return fmt.Errorf("slow is %s, want %s", s, want)
			}
			return nil
		}
	}
	fleettest.Eventually(t, 30*time.Second, state(fleet.StateEngaged))

	proxy.Cut()
	fleettest.Eventually(t, 30*time.Second, state(fleet.StateDisconnected))
	before := builds.n.Load()
	proxy.SetUp(true)
	fleettest.Eventually(t, 30*time.Second, state(fleet.StateEngaged))
	if n := builds.n.Load() - before; n > 2 {
		t.Errorf("%d clusters built to reconnect one cluster: each healthy probe started another", n)
	}
}

// A reconcile whose request was for a cluster the engine engaged, and that
// asks for its hold only after the cluster was removed, does not run: the
// fence, released once the removal drained, must never be released under it.
func TestAReconcileOfARemovedClusterDoesNotRunUnheld(t *testing.T) {
	fences := newFenceService()
	e, tr := runningEngine(t, fleet.Options{Admission: fences})
	cl := &fakeCluster{name: "removed", running: &runningSet{n: map[string]int{}}}
	e.SetMember(fleet.Member{Name: "removed", Hash: "1", Build: func(context.Context) (cluster.Cluster, error) { return cl, nil }})
	fleettest.Eventually(t, 10*time.Second, engagedWith(tr, "removed", cl))
	engagement := tr.engagement("removed")

	e.RemoveMember("removed")
	if _, done, ok := e.Hold(engagement, "removed"); ok {
		done()
		t.Fatal("a reconcile of a removed cluster was let run without a hold")
	}
	// A cluster the engine never ran (engaged with the controller by
	// something else) still needs no hold.
	if _, done, ok := e.Hold(context.Background(), "elsewhere"); !ok {
		t.Fatal("a reconcile of a cluster the engine does not know was refused")
	} else {
		done()
	}
}

// countingBuilds builds real clusters and counts them.
type countingBuilds struct{ n atomic.Int32 }

func (b *countingBuilds) of(cfg *rest.Config) func(context.Context) (cluster.Cluster, error) {
	return func(context.Context) (cluster.Cluster, error) {
		b.n.Add(1)
		return cluster.New(cfg)
	}
}
