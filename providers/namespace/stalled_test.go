package namespace

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/metrics/server"

	mcbuilder "github.com/mcruntime/multicluster-runtime/pkg/builder"
	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
	mcmanager "github.com/mcruntime/multicluster-runtime/pkg/manager"
)

// stalledCache is a shared cache one of whose informers, serving no
// namespace cluster, never completes its initial list: its WaitForCacheSync
// (the whole cache's) blocks until ctx ends.
type stalledCache struct{ cache.Cache }

func (stalledCache) WaitForCacheSync(ctx context.Context) bool {
	<-ctx.Done()
	return false
}

// stalledCluster is a shared cluster with a stalledCache.
type stalledCluster struct{ cluster.Cluster }

func (s stalledCluster) GetCache() cache.Cache { return stalledCache{s.Cluster.GetCache()} }

// Namespaces are watched, and a namespace's cluster engaged and its
// controller synced, on their own informers' initial lists: an informer of
// the shared cache that no namespace cluster uses and that does not sync
// holds none of them back (it held every one back before issue 41's
// change, which waited for the whole shared cache, polled every 100 ms).
func TestNamespaceClustersDoNotWaitForTheWholeSharedCache(t *testing.T) {
	c := directClient(t)
	ns := names("stalled", 1)[0]
	createNamespaces(t, c, []string{ns}, "cm")
	cl, err := cluster.New(fleet.Config(0))
	if err != nil {
		t.Fatal(err)
	}
	p := New(stalledCluster{cl})
	mgr, err := mcmanager.New(fleet.Config(0), p, mcmanager.Options{
		Metrics:    server.Options{BindAddress: "0"},
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	rec := newRecorder()
	if err := mcbuilder.ControllerManagedBy(mgr).For(&corev1.ConfigMap{}).Complete(rec); err != nil {
		t.Fatal(err)
	}
	fleettest.RunManager(t, mgr)
	fleettest.Eventually(t, 30*time.Second, func() error {
		if !rec.has(request(ns, "cm")) {
			return fmt.Errorf("cluster %q: cm not reconciled while an unrelated informer of the shared cache has not synced", ns)
		}
		return nil
	})
}
