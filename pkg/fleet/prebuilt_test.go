package fleet_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/mcruntime/multicluster-runtime/internal/testbed"
	pkgclusters "github.com/mcruntime/multicluster-runtime/pkg/clusters"
	"github.com/mcruntime/multicluster-runtime/pkg/fleet"
	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
)

// watcher engages a cluster as a controller's Kind source does: it gets the
// ConfigMap informer from the cluster's cache and waits, bounded, for it to
// sync; refuse, while set, makes it refuse at once (another controller
// refusing the cluster, say). It counts the engagements that synced.
type watcher struct {
	refuse atomic.Bool
	wait   time.Duration

	mu     sync.Mutex
	synced int
	tried  int
}

func (w *watcher) Engage(ctx context.Context, name multicluster.ClusterName, cl cluster.Cluster) error {
	w.mu.Lock()
	w.tried++
	w.mu.Unlock()
	if w.refuse.Load() {
		return errors.New("refused by the test")
	}
	if _, err := cl.GetCache().GetInformer(ctx, &corev1.ConfigMap{}, crcache.BlockUntilSynced(false)); err != nil {
		return err
	}
	syncCtx, cancel := context.WithTimeout(ctx, w.wait)
	defer cancel()
	if !cl.GetCache().WaitForCacheSync(syncCtx) {
		return fmt.Errorf("the ConfigMap informer did not sync within %s", w.wait)
	}
	w.mu.Lock()
	w.synced++
	w.mu.Unlock()
	return nil
}

func (w *watcher) counts() (tried, synced int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.tried, w.synced
}

// Issue 22: a pre-built cluster (Member.Cluster, run by the engine) whose
// first engagement is refused under load is engaged again with a running
// cache. The engine used to stop it when the engagement was refused and
// "start" it again on the next attempt: a controller-runtime cache cannot
// start twice, its answer ("informer already started") was taken for a
// cluster the application runs, and the cluster was engaged with a cache
// that no longer ran: a watch registered then never synced, and the
// cluster was never reconciled.
func TestPrebuiltClusterSurvivesARefusedEngagement(t *testing.T) {
	for _, tc := range []struct {
		name string
		// break makes the first engagement fail; heal lets the next succeed.
		breakIt, heal func(w *watcher, p *testbed.APIProxy)
	}{
		{
			// Another subscriber refuses before the watch is registered: the
			// cache runs no informer when it is stopped.
			name:    "refused before its watch was registered",
			breakIt: func(w *watcher, _ *testbed.APIProxy) { w.refuse.Store(true) },
			heal:    func(w *watcher, _ *testbed.APIProxy) { w.refuse.Store(false) },
		},
		{
			// The API server answers the watch's list with 500 (overloaded):
			// the watch does not sync in time.
			name:    "refused while its list failed",
			breakIt: func(_ *watcher, p *testbed.APIProxy) { p.FailLists("configmaps") },
			heal:    func(_ *watcher, p *testbed.APIProxy) { p.FailLists("no-such-resource") },
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			proxy := testbed.NewAPIProxy(t, members.Config(1))
			w := &watcher{wait: time.Second}
			tc.breakIt(w, proxy)
			cl, err := pkgclusters.NewCluster(proxy.Config(), func(o *cluster.Options) { o.Logger = logr.Discard() })
			if err != nil {
				t.Fatal(err)
			}
			e, _ := startEngine(t, fleet.Options{CacheSyncTimeout: 3 * time.Second})
			e.Subscribe(w)
			e.SetMember(fleet.Member{Name: "prebuilt", Hash: "1", Cluster: cl})
			fleettest.Eventually(t, 30*time.Second, func() error {
				// Refused, and the attempt given up on: retried with backoff.
				if s, _ := e.State("prebuilt"); s != fleet.StateDisconnected {
					return fmt.Errorf("the cluster is %s, want disconnected after a refused engagement", s)
				}
				return nil
			})
			tc.heal(w, proxy)
			fleettest.Eventually(t, 30*time.Second, func() error {
				if s, _ := e.State("prebuilt"); s != fleet.StateEngaged {
					tried, synced := w.counts()
					return fmt.Errorf("the cluster is %s (%d engagements tried, %d synced)", s, tried, synced)
				}
				return nil
			})
			if _, synced := w.counts(); synced == 0 {
				t.Fatal("engaged, but the watch never synced")
			}
		})
	}
}
