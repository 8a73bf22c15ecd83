package fleet_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/mcruntime/multicluster-runtime/internal/metrics"
	"github.com/mcruntime/multicluster-runtime/internal/testbed"
	mccontroller "github.com/mcruntime/multicluster-runtime/pkg/controller"
	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
	mchandler "github.com/mcruntime/multicluster-runtime/pkg/handler"
	mcmanager "github.com/mcruntime/multicluster-runtime/pkg/manager"
	mcreconcile "github.com/mcruntime/multicluster-runtime/pkg/reconcile"
	mcsource "github.com/mcruntime/multicluster-runtime/pkg/source"
)

// Defect 4: a controller refuses an engagement whose context is already
// done: accepting it would replace the live engagement of the name and end it.
func TestControllerRefusesADoneEngagement(t *testing.T) {
	mgr := fleettest.NewManager(t, members.Config(0), nil)
	c, err := mccontroller.NewUnmanaged("done-engagement", mgr, mccontroller.Options{
		Reconciler: mcreconcile.Func(func(context.Context, mcreconcile.Request) (reconcile.Result, error) {
			return reconcile.Result{}, nil
		}),
	})
	if err != nil {
		t.Fatal(err)
	}
	live := running(t, 1)
	if err := c.Engage(context.Background(), "member", live); err != nil {
		t.Fatal(err)
	}
	done, cancel := context.WithCancel(context.Background())
	cancel()
	if err := c.Engage(done, "member", running(t, 2)); err == nil {
		t.Fatal("a controller accepted an engagement whose context was done")
	}
}

// Defect 7: a request in flight when its cluster is replaced (rotated
// credentials, a reconnect) is requeued for the new instance, even when no
// watch would produce it again (here: a channel event).
func TestRequestInFlightSurvivesReplacement(t *testing.T) {
	mgr := fleettest.NewManager(t, members.Config(0), nil)
	events := make(chan mcsource.GenericEvent[*corev1.ConfigMap], 1)
	var calls atomic.Int32
	entered, proceed := make(chan struct{}), make(chan struct{})
	c, err := mccontroller.New("replaced-in-flight", mgr, mccontroller.Options{
		Reconciler: mcreconcile.Func(func(ctx context.Context, req mcreconcile.Request) (reconcile.Result, error) {
			if calls.Add(1) == 1 {
				close(entered)
				<-proceed
			}
			return reconcile.Result{}, nil
		}),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.MultiClusterWatch(mcsource.Channel(events, mchandler.TypedEnqueueRequestForObject[*corev1.ConfigMap]())); err != nil {
		t.Fatal(err)
	}
	fleettest.RunManager(t, mgr)

	first := running(t, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := mgr.Engage(ctx, "rotated", first); err != nil {
		t.Fatal(err)
	}
	// The controller's channel registration in the new cluster may lag its
	// engagement: send until the event is reconciled, then never again.
	ping := mcsource.GenericEvent[*corev1.ConfigMap]{ClusterName: "rotated",
		Object: &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "ping"}}}
	deadline := time.After(30 * time.Second)
	for sent := false; !sent; {
		select {
		case events <- ping:
		case <-entered:
			sent = true
		case <-deadline:
			t.Fatal("the channel event was not reconciled")
		}
		if !sent {
			select {
			case <-entered:
				sent = true
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	// The cluster's credentials rotate: a new instance replaces the first.
	if err := mgr.Engage(ctx, "rotated", running(t, 1)); err != nil {
		t.Fatal(err)
	}
	close(proceed)
	fleettest.Eventually(t, 30*time.Second, func() error {
		if n := calls.Load(); n < 2 {
			return errDropped
		}
		return nil
	})
}

var errDropped = errorString("the request in flight was not reconciled again on the new instance")

type errorString string

func (e errorString) Error() string { return string(e) }

// Defect 8: a cluster that leaves frees its place under the per-cluster
// reconcile series cap, so that clusters that join later get a series.
func TestReconcileSeriesReleasedWithTheirCluster(t *testing.T) {
	const ns = "series-released"
	testbed.CreateNamespace(t, testbed.NewClient(t, members.Config(1)), ns)
	testbed.CreateConfigMap(t, testbed.NewClient(t, members.Config(1)), ns, "cm", nil)
	mgr := fleettest.NewManager(t, members.Config(0), nil, mcmanager.WithPerClusterReconcileMetrics(1))
	rec := fleetController(t, mgr, "series-released", ns)
	fleettest.RunManager(t, mgr)

	ctx, cancel := context.WithCancel(context.Background())
	if err := mgr.Engage(ctx, "first", running(t, 1)); err != nil {
		t.Fatal(err)
	}
	rec.WaitFor(t, 1, "first", ns, "cm")
	cancel()
	fleettest.Eventually(t, 0, func() error {
		if _, err := mgr.GetCluster(context.Background(), "first"); err == nil {
			return errorString("first still engaged")
		}
		return nil
	})
	second, cancelSecond := context.WithCancel(context.Background())
	defer cancelSecond()
	if err := mgr.Engage(second, "second", running(t, 1)); err != nil {
		t.Fatal(err)
	}
	rec.WaitFor(t, 1, "second", ns, "cm")
	fleettest.Eventually(t, 0, func() error {
		if testutil.ToFloat64(metrics.Reconciles.WithLabelValues("series-released", "second", "success")) == 0 {
			return errorString("the cluster that joined after another left has no reconcile series")
		}
		return nil
	})
}
