package builder_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/mcruntime/multicluster-runtime/internal/testbed"
	pkgclusters "github.com/mcruntime/multicluster-runtime/pkg/clusters"
	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
)

// Clusters added, replaced and removed concurrently while a controller runs:
// afterwards the manager's view matches the provider's, every cluster left
// is reconciled, and once all are gone so are their goroutines.
func TestChurn(t *testing.T) {
	e := newEnv(t)
	rec := e.recorder()
	must(t, e.builder().For(&corev1.ConfigMap{}).Complete(rec))
	fleettest.RunManager(t, e.mgr)
	ctx := context.Background()
	// Wait for the provider and the controller's workers to run, so that the
	// baseline includes them: a reconcile of the first cluster shows both.
	e.engage(1)
	testbed.CreateConfigMap(t, e.members[0], e.ns, "before-churn", nil)
	rec.WaitFor(t, 1, member(1), e.ns, "before-churn")
	e.provider.Remove(member(1))
	fleettest.Eventually(t, 0, func() error {
		if _, err := e.mgr.GetCluster(ctx, member(1)); err == nil {
			return errors.New("still engaged")
		}
		return nil
	})
	baseline := testbed.NumGoroutine()
	// A custom provider, written as the seeds describe, engaging through the manager.
	var custom pkgclusters.Clusters[cluster.Cluster]

	const workers, ops, names = 4, 40, 6
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			rnd := rand.New(rand.NewPCG(uint64(w), 42))
			for range ops {
				name := fmt.Sprintf("churn-%d", rnd.IntN(names))
				if rnd.IntN(3) == 0 {
					custom.Remove(name)
					continue
				}
				cl := testbed.NewCluster(t, memberConfig(1+rnd.IntN(3)))
				// Errors are part of churn (a replacement can lose to a newer one).
				_ = custom.AddOrReplace(t.Context(), name, cl, e.mgr)
			}
		})
	}
	wg.Wait()

	// The manager agrees with the provider about every name.
	for i := range names {
		name := fmt.Sprintf("churn-%d", i)
		fleettest.Eventually(t, 0, func() error {
			want, perr := custom.Get(ctx, name)
			got, merr := e.mgr.GetCluster(ctx, name)
			switch {
			case errors.Is(perr, multicluster.ErrClusterNotFound) && errors.Is(merr, multicluster.ErrClusterNotFound):
				return nil
			case perr == nil && merr == nil && got == want:
				return nil
			}
			return fmt.Errorf("%s: provider has %v (%v), manager has %v (%v)", name, want, perr, got, merr)
		})
	}
	// Every cluster left is watched.
	present := custom.ClusterNames()
	for i := 1; i <= 3; i++ {
		testbed.CreateConfigMap(t, e.members[i-1], e.ns, "after-churn", nil)
	}
	for _, name := range present {
		rec.WaitFor(t, 1, name, e.ns, "after-churn")
	}

	// Every name goes, not only those engaged above: a replacement whose
	// AddOrReplace gave up waiting is still wanted (the engine keeps trying
	// it, as documented), and engages later.
	for i := range names {
		custom.Remove(fmt.Sprintf("churn-%d", i))
	}
	testbed.WaitForGoroutines(t, baseline, 30*time.Second)
}
