package fleet_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"

	"github.com/mcruntime/multicluster-runtime/internal/metrics"
	"github.com/mcruntime/multicluster-runtime/internal/testbed"
	mcbuilder "github.com/mcruntime/multicluster-runtime/pkg/builder"
	"github.com/mcruntime/multicluster-runtime/pkg/fleet"
	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
	mcmanager "github.com/mcruntime/multicluster-runtime/pkg/manager"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
)

// Three members, one cut off mid-run: the others keep reconciling, the cut
// one is disconnected within Interval × FailureThreshold + Timeout, every
// object created in it during the outage is reconciled once it is back, and
// no goroutine is left over.
func TestChaosOneMemberCutOff(t *testing.T) {
	const ns = "chaos"
	p, proxy := threeMembers(t, ns, "m3")
	health := mcmanager.HealthOptions{Interval: 200 * time.Millisecond, Timeout: 200 * time.Millisecond, FailureThreshold: 3}
	mgr := fleettest.NewManager(t, members.Config(0), p, mcmanager.WithHealthChecks(health), mcmanager.WithPerClusterReconcileMetrics(100))
	rec := &fleettest.Recorder{Namespace: ns}
	if err := mcbuilder.ControllerManagedBy(mgr).Named("chaos").For(&corev1.ConfigMap{}).Complete(rec); err != nil {
		t.Fatal(err)
	}
	fleettest.RunManager(t, mgr)
	eng := mgr.(mcmanager.FleetOwner).Fleet()

	names := []string{"m1", "m2", "m3"}
	for i, name := range names {
		testbed.CreateConfigMap(t, testbed.NewClient(t, members.Config(i+1)), ns, "before", nil)
		rec.WaitFor(t, 1, name, ns, "before")
	}
	baseline := testbed.NumGoroutine()
	unhealthyBefore := testutil.ToFloat64(metrics.Disengagements.WithLabelValues("unhealthy"))

	// Cut member 3 off.
	proxy.Cut()
	cutAt := time.Now()
	bound := time.Duration(health.FailureThreshold)*health.Interval + health.Timeout
	fleettest.Eventually(t, bound+10*time.Second, func() error {
		if s, _ := eng.State("m3"); s != fleet.StateDisconnected {
			return fmt.Errorf("m3 is %s", s)
		}
		return nil
	})
	detected := time.Since(cutAt)
	t.Logf("cut member disconnected after %s (interval × threshold + timeout = %s; the scheduler ticks every %s)", detected, bound, 100*time.Millisecond)

	_, err := mgr.GetCluster(context.Background(), "m3")
	if !errors.Is(err, multicluster.ErrClusterNotConnected) || !errors.Is(err, multicluster.ErrClusterNotFound) {
		t.Fatalf("GetCluster of a disconnected cluster: %v, want an error matching ErrClusterNotConnected and ErrClusterNotFound", err)
	}
	if got := testutil.ToFloat64(metrics.Healthy.WithLabelValues("m3")); got != 0 {
		t.Errorf("multicluster_cluster_healthy{cluster=m3} = %v during the outage, want 0", got)
	}
	if got := testutil.ToFloat64(metrics.Disengagements.WithLabelValues("unhealthy")) - unhealthyBefore; got < 1 {
		t.Errorf("multicluster_cluster_disengagements_total{reason=unhealthy} grew by %v, want at least 1", got)
	}

	// During the outage: the others keep reconciling; objects land in the cut member.
	const during = 20
	m3 := testbed.NewClient(t, members.Config(3))
	for i := range during {
		testbed.CreateConfigMap(t, m3, ns, fmt.Sprintf("during-%d", i), nil)
	}
	for i, name := range names[:2] {
		start := time.Now()
		testbed.CreateConfigMap(t, testbed.NewClient(t, members.Config(i+1)), ns, "during", nil)
		rec.WaitFor(t, 1, name, ns, "during")
		t.Logf("%s: create to reconcile during the outage: %s", name, time.Since(start))
	}

	// Back: every object created meanwhile is reconciled.
	proxy.SetUp(true)
	fleettest.Eventually(t, 30*time.Second, func() error {
		missed := 0
		for i := range during {
			if rec.Count("m3", ns, fmt.Sprintf("during-%d", i)) == 0 {
				missed++
			}
		}
		if missed > 0 {
			return fmt.Errorf("%d of %d objects created during the outage not reconciled", missed, during)
		}
		return nil
	})
	if s, _ := eng.State("m3"); s != fleet.StateEngaged {
		t.Fatalf("m3 is %s after it came back", s)
	}
	if got := testutil.ToFloat64(metrics.Healthy.WithLabelValues("m3")); got != 1 {
		t.Errorf("multicluster_cluster_healthy{cluster=m3} = %v after recovery, want 1", got)
	}
	t.Logf("recovered %s after the cut", time.Since(cutAt))
	if got := testutil.ToFloat64(metrics.Reconciles.WithLabelValues("chaos", "m3", "success")); got < during {
		t.Errorf("multicluster_reconcile_total{controller=chaos,cluster=m3,result=success} = %v, want at least %d", got, during)
	}
	testbed.WaitForGoroutines(t, baseline, 30*time.Second)
}

// The readiness check passes once every member is engaged or has been
// declared disconnected: a dead member does not hold it back for ever.
func TestReadinessWithADeadMember(t *testing.T) {
	dead, proxy := testbed.Proxied(t, members.Config(2))
	proxy.Cut() // down from the start
	p := newConfigProvider(map[multicluster.ClusterName]*rest.Config{"alive": members.Config(1), "dead": dead})
	mgr := fleettest.NewManager(t, members.Config(0), p)
	eng := mgr.(mcmanager.FleetOwner).Fleet()
	if err := eng.Ready(nil); err == nil {
		t.Fatal("ready before the manager started")
	}
	fleettest.RunManager(t, mgr)
	<-p.started
	fleettest.Eventually(t, time.Minute, func() error { return eng.Ready(nil) })
	if s, _ := eng.State("alive"); s != fleet.StateEngaged {
		t.Errorf("alive is %s", s)
	}
	if s, _ := eng.State("dead"); s != fleet.StateDisconnected {
		t.Errorf("dead is %s", s)
	}
	if got := testutil.ToFloat64(metrics.Clusters.WithLabelValues(string(fleet.StateDisconnected))); got < 1 {
		t.Errorf("multicluster_clusters{state=disconnected} = %v, want at least 1", got)
	}
}
