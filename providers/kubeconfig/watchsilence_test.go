package kubeconfig_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	mcbuilder "github.com/mcruntime/multicluster-runtime/pkg/builder"
	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
	"github.com/mcruntime/multicluster-runtime/pkg/inventory"
	mcmanager "github.com/mcruntime/multicluster-runtime/pkg/manager"
	"github.com/mcruntime/multicluster-runtime/providers/kubeconfig"
)

// A member whose watches fall silent while it answers gets a Warning Event
// on its Secret, with the reason ClusterWatchSilent and the cluster's name.
func TestASilentWatchIsReportedOnTheSecret(t *testing.T) {
	faults := fleet.Faults(2)
	t.Cleanup(faults.Restore)
	e := startSetUp(t, nil, kubeconfig.Options{}, func(mgr mcmanager.Manager) {
		// A controller, so that the member has watches to judge.
		if err := mcbuilder.ControllerManagedBy(mgr).Named("watch-silence").For(&corev1.ConfigMap{}).
			Complete(&fleettest.Recorder{Namespace: "none"}); err != nil {
			t.Fatal(err)
		}
	}, mcmanager.WithHealthChecks(mcmanager.HealthOptions{
		Interval:         200 * time.Millisecond,
		FailureThreshold: 3,
		WatchSilence:     1500 * time.Millisecond,
	}))
	kc, err := fleettest.KubeconfigFor(faults.Config(), "member-2")
	if err != nil {
		t.Fatal(err)
	}
	if err := e.host.Create(context.Background(), e.rawSecret("watch-silent", string(kc))); err != nil {
		t.Fatal(err)
	}
	// Engaged with every controller (its watches synced), not only with
	// the tracker: a watch silenced before its initial list ends is a
	// cluster that cannot start (Options.CacheSyncTimeout), not a silence.
	fleettest.Eventually(t, time.Minute, func() error {
		if v, _ := fleettest.Metric(t, "multicluster_cluster_engaged", map[string]string{"cluster": "watch-silent"}); v != 1 {
			return fmt.Errorf("watch-silent not engaged yet")
		}
		return nil
	})
	faults.SilenceWatches()
	t.Cleanup(func() {
		if t.Failed() {
			for _, l := range strings.Split(e.logs.String(), "\n") {
				if strings.Contains(l, `"watch-silent"`) && !strings.Contains(l, "Body") {
					t.Log(l)
				}
			}
		}
	})
	events := e.waitForEvents(t, map[string]string{"watch-silent": inventory.ReasonWatchSilent})
	for _, ev := range events {
		if ev.Reason == inventory.ReasonWatchSilent && !strings.Contains(ev.Note, `cluster "watch-silent"`) {
			t.Errorf("the Event does not name the cluster: %q", ev.Note)
		}
	}
}
