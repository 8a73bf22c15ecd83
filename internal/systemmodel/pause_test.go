package systemmodel_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/mcruntime/multicluster-runtime/internal/testbed"
	mccontroller "github.com/mcruntime/multicluster-runtime/pkg/controller"
	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
	mchandler "github.com/mcruntime/multicluster-runtime/pkg/handler"
	mcmanager "github.com/mcruntime/multicluster-runtime/pkg/manager"
	mcreconcile "github.com/mcruntime/multicluster-runtime/pkg/reconcile"
	mcsource "github.com/mcruntime/multicluster-runtime/pkg/source"
	provclusters "github.com/mcruntime/multicluster-runtime/providers/clusters"
)

// TestPausedKeysOnAPIServers is the checker's part on pause and resume: a
// manager's controller, its requests sent through a channel source, over
// two clusters lent to providers/clusters; through seeded rounds of a pause
// of one cluster, keys sent to it once or twice while it is paused (some
// held by the controller, some still queued when the resume comes) and the
// resume, it checks that each key of a round is reconciled exactly once
// after the resume. The other cluster is never paused: a key of it, sent
// after a round's keys and reconciled, shows that the round's keys reached
// the controller's queue before the resume (one goroutine reads the
// channel, in order).
func TestPausedKeysOnAPIServers(t *testing.T) {
	if err := testbed.ProvideAssets(); err != nil {
		t.Fatalf("the control-plane binaries: %v", err)
	}
	seed := uint64(1)
	if *flagSeed != 0 {
		seed = *flagSeed
	}
	rng := rand.New(rand.NewPCG(seed, 29))
	servers := fleettest.New(t, 1)
	cfg := servers.Config(0)
	provider := provclusters.New()
	mgr := fleettest.NewManager(t, cfg, provider)
	rec := &fleettest.Recorder{Result: func(context.Context, mcreconcile.Request) (reconcile.Result, error) {
		time.Sleep(200 * time.Microsecond) // a reconcile's work, so that several are in flight at the resume
		return reconcile.Result{}, nil
	}}
	ctrl, err := mccontroller.New(t.Name(), mgr, mccontroller.Options{Reconciler: rec, SkipNameValidation: ptr.To(true), MaxConcurrentReconciles: 4})
	if err != nil {
		t.Fatal(err)
	}
	events := make(chan mcsource.GenericEvent[client.Object])
	if err := ctrl.MultiClusterWatch(mcsource.Channel(events, mchandler.TypedEnqueueRequestForObject[client.Object]())); err != nil {
		t.Fatal(err)
	}
	fleettest.RunManager(t, mgr)
	ctx := t.Context()
	for _, name := range []string{"paused", "barrier"} {
		go func() {
			if err := provider.Add(ctx, name, testbed.NewCluster(t, cfg)); err != nil && ctx.Err() == nil {
				t.Errorf("Add of %s: %v", name, err)
			}
		}()
	}
	send := func(cluster, name string) {
		obj := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}}
		select {
		case events <- mcsource.GenericEvent[client.Object]{ClusterName: cluster, Object: obj}:
		case <-time.After(30 * time.Second):
			t.Fatalf("the channel source did not read an event of %s within 30s", cluster)
		}
	}
	// Both clusters engaged with the controller: a key of each reconciled.
	fleettest.Eventually(t, 60*time.Second, func() error {
		send("paused", "engaged")
		send("barrier", "engaged")
		if rec.Count("paused", "ns", "engaged") == 0 || rec.Count("barrier", "ns", "engaged") == 0 {
			return fmt.Errorf("the clusters are not engaged with the controller yet")
		}
		return nil
	})

	pauser := mgr.(mcmanager.ClusterPauser)
	const rounds = 6
	for round := range rounds {
		keys := 100 + rng.IntN(300)
		pauser.PauseCluster("paused")
		for i := range keys {
			send("paused", fmt.Sprint(round, "-", i))
		}
		time.Sleep(time.Duration(rng.IntN(50)) * time.Millisecond) // workers hold some of them
		for i := range keys {
			if rng.IntN(2) == 0 {
				send("paused", fmt.Sprint(round, "-", i)) // again: held and queued at the resume
			}
		}
		barrier := fmt.Sprint("barrier-", round)
		send("barrier", barrier)
		rec.WaitFor(t, 1, "barrier", "ns", barrier)
		for i := range keys {
			if n := rec.Count("paused", "ns", fmt.Sprint(round, "-", i)); n > 0 {
				t.Fatalf("seed %d, round %d: a key of the paused cluster was reconciled %d times before the resume", seed, round, n)
			}
		}
		pauser.ResumeCluster("paused")
		for i := range keys {
			rec.WaitFor(t, 1, "paused", "ns", fmt.Sprint(round, "-", i))
		}
		fleettest.Consistently(t, 300*time.Millisecond, func() error {
			for i := range keys {
				if n := rec.Count("paused", "ns", fmt.Sprint(round, "-", i)); n != 1 {
					return fmt.Errorf("seed %d, round %d of %d: the key %d-%d of the paused cluster was reconciled %d times after the resume, want once (rerun it alone: go test -race -count=1 -run 'TestPausedKeysOnAPIServers$' ./internal/systemmodel/ -systemmodel.seed=%d)",
						seed, round, rounds, round, i, n, seed)
				}
			}
			return nil
		})
	}
}
