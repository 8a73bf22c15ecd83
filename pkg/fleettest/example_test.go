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
