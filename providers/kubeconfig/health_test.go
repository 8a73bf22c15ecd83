package kubeconfig_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/mcruntime/multicluster-runtime/internal/testbed"
	mcfleet "github.com/mcruntime/multicluster-runtime/pkg/fleet"
	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
	mcmanager "github.com/mcruntime/multicluster-runtime/pkg/manager"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
	"github.com/mcruntime/multicluster-runtime/providers/kubeconfig"
)

// The provider's own health check (Options.HealthCheck) runs on every probe
// of its clusters after the manager's check: a cluster whose /readyz is fine
// but that fails the provider's check (its marker ConfigMap is missing) is
// disconnected, the other stays engaged, and the cluster is engaged again
// once it passes.
func TestProviderHealthCheckDisconnectsAClusterThatFailsIt(t *testing.T) {
	ctx := context.Background()
	ns := testbed.Name("checked")
	for _, m := range []int{1, 2} {
		testbed.CreateNamespace(t, testbed.NewClient(t, fleet.Config(m)), ns)
	}
	testbed.CreateConfigMap(t, testbed.NewClient(t, fleet.Config(1)), ns, "marker", nil)

	var mu sync.Mutex
	calls := map[string]map[string]int{} // by check, by cluster
	count := func(check, name string) {
		mu.Lock()
		defer mu.Unlock()
		if calls[check] == nil {
			calls[check] = map[string]int{}
		}
		calls[check][name]++
	}
	called := func(check, name string) int {
		mu.Lock()
		defer mu.Unlock()
		return calls[check][name]
	}
	markerCheck := func(ctx context.Context, name multicluster.ClusterName, cl cluster.Cluster) error {
		count("provider", name)
		err := cl.GetAPIReader().Get(ctx, client.ObjectKey{Namespace: ns, Name: "marker"}, &corev1.ConfigMap{})
		if err != nil {
			return fmt.Errorf("marker ConfigMap: %w", err)
		}
		return nil
	}
	managerCheck := func(_ context.Context, name multicluster.ClusterName, _ cluster.Cluster) error {
		count("manager", name)
		return nil
	}
	e := startSetUp(t, nil, kubeconfig.Options{HealthCheck: markerCheck}, nil, mcmanager.WithHealthChecks(mcmanager.HealthOptions{
		Interval: 200 * time.Millisecond, Timeout: 2 * time.Second, FailureThreshold: 2, SuccessThreshold: 1,
		Check: managerCheck,
	}))
	for name, m := range map[string]int{"marked": 1, "unmarked": 2} {
		if err := e.host.Create(ctx, e.secret(t, name, m)); err != nil {
			t.Fatal(err)
		}
	}
	engine := e.mgr.(mcmanager.FleetOwner).Fleet()
	states := func(want map[string]mcfleet.State) func() error {
		return func() error {
			for name, s := range want {
				if got, _ := engine.State(name); got != s {
					return fmt.Errorf("%s is %s, want %s", name, got, s)
				}
			}
			return nil
		}
	}
	fleettest.Eventually(t, time.Minute, states(map[string]mcfleet.State{"marked": mcfleet.StateEngaged, "unmarked": mcfleet.StateDisconnected}))
	for _, check := range []string{"manager", "provider"} {
		for _, name := range []string{"marked", "unmarked"} {
			if called(check, name) == 0 {
				t.Errorf("the %s's check never ran for %s", check, name)
			}
		}
	}
	if !contains(e.logs.String(), "marker ConfigMap") {
		t.Error("the provider's check's error is not the reason logged for the disconnection")
	}

	testbed.CreateConfigMap(t, testbed.NewClient(t, fleet.Config(2)), ns, "marker", nil)
	fleettest.Eventually(t, time.Minute, states(map[string]mcfleet.State{"marked": mcfleet.StateEngaged, "unmarked": mcfleet.StateEngaged}))
	if n := e.tracker.Count("marked"); n != 1 {
		t.Errorf("marked was engaged %d times, want once", n)
	}
}
