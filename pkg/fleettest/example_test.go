package fleettest_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics/server"

	mcbuilder "github.com/mcruntime/multicluster-runtime/pkg/builder"
	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
	mcmanager "github.com/mcruntime/multicluster-runtime/pkg/manager"
	mcreconcile "github.com/mcruntime/multicluster-runtime/pkg/reconcile"
)

// A controller runs against a fleet of two real control planes: a ConfigMap
// created in each member is reconciled once per cluster.
func Example() {
	fleet, err := fleettest.Start(2, fleettest.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer func() { _ = fleet.Stop() }()

	provider := fleettest.NewProvider(fleet, fleettest.ProviderOptions{})
	mgr, err := mcmanager.New(fleet.Config(0), provider, mcmanager.Options{
		Metrics:                server.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	var mu sync.Mutex
	seen := map[string]bool{}
	err = mcbuilder.ControllerManagedBy(mgr).
		Named("example-fleettest").
		For(&corev1.ConfigMap{}).
		Complete(mcreconcile.Func(func(ctx context.Context, req mcreconcile.Request) (mcreconcile.Result, error) {
			if req.Name == "greeting" {
				mu.Lock()
				seen[req.String()] = true
				mu.Unlock()
			}
			return mcreconcile.Result{}, nil
		}))
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	defer func() { cancel(); <-done }()

	for i := range fleet.Len() {
		c, err := client.New(fleet.Config(i), client.Options{})
		if err != nil {
			fmt.Println(err)
			return
		}
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "greeting"}}
		if err := c.Create(ctx, cm); err != nil {
			fmt.Println(err)
			return
		}
	}
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		mu.Lock()
		n := len(seen)
		mu.Unlock()
		if n == fleet.Len() {
			break
		}
	}
	mu.Lock()
	defer mu.Unlock()
	keys := make([]string, 0, len(seen))
	for k := range seen {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		fmt.Println(k)
	}
	// Output:
	// cluster://member-0/default/greeting
	// cluster://member-1/default/greeting
}

// A controller's test breaks a member on purpose: engaged through its faults,
// member 1 is cut off, then its watches are silenced while it still answers;
// the engine's probes find both and disconnect it, and once restored it is
// engaged again.
func ExampleFaults() {
	fleet, err := fleettest.Start(2, fleettest.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer func() { _ = fleet.Stop() }()

	provider := fleettest.NewProvider(fleet, fleettest.ProviderOptions{Faulty: true})
	mgr, err := mcmanager.New(fleet.Config(0), provider, mcmanager.Options{
		Metrics:                server.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	}, mcmanager.WithHealthChecks(mcmanager.HealthOptions{
		Interval:         200 * time.Millisecond,
		FailureThreshold: 2,
		WatchSilence:     2 * time.Second, // a test's bound; the default is minutes
	}))
	if err != nil {
		fmt.Println(err)
		return
	}
	// ... add the controller under test, start mgr ...
	_ = mgr

	member := fleet.Faults(1)
	member.Cut() // the member vanishes: its probes fail, it is disconnected
	member.Restore()
	member.SilenceWatches() // it answers, its watches deliver nothing
	member.Restore()
	member.Slow(100 * time.Millisecond) // every exchange takes 200ms more
	member.Restore()
}
