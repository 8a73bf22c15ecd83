package multi

import (
	"context"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
	mcmanager "github.com/mcruntime/multicluster-runtime/pkg/manager"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
)

// The manager's cluster options and settings hook reach a cluster an inner
// provider builds on Members (fleettest.NamedProvider), under the name the manager knows it by (the
// prefixed one): they are the engine's options, asked of the prefixing door
// at the build, not carried in the build's context.
func TestManagerOptionsReachAnInnerProvidersBuildUnderThePrefixedName(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	p := New(Options{})
	if err := p.AddProvider("p", fleettest.NewNamedProvider(fleet, map[multicluster.ClusterName]int{"one": 1})); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var optionsFor, hookFor []string
	mgr, err := mcmanager.New(fleet.Config(0), p, mcmanager.Options{
		Metrics:    server.Options{BindAddress: "0"},
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	},
		mcmanager.WithClusterOptionsFor(func(name multicluster.ClusterName) []cluster.Option {
			mu.Lock()
			defer mu.Unlock()
			optionsFor = append(optionsFor, name)
			return nil
		}),
		mcmanager.WithClusterSettings(func(name multicluster.ClusterName, _ client.Object, cfg *rest.Config) []cluster.Option {
			mu.Lock()
			defer mu.Unlock()
			hookFor = append(hookFor, name)
			cfg.UserAgent = "adjusted-by-the-hook"
			return nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	}()
	var cl cluster.Cluster
	fleettest.Eventually(t, 30*time.Second, func() error {
		cl, err = mgr.GetCluster(ctx, "p#one")
		return err
	})
	mu.Lock()
	defer mu.Unlock()
	for what, names := range map[string][]string{"the cluster options": optionsFor, "the settings hook": hookFor} {
		if len(names) == 0 {
			t.Errorf("%s were never asked for", what)
		}
		for _, name := range names {
			if name != "p#one" {
				t.Errorf("%s were asked for %q, want the prefixed name %q", what, name, "p#one")
			}
		}
	}
	if got := cl.GetConfig().UserAgent; got != "adjusted-by-the-hook" {
		t.Errorf("the engaged cluster's UserAgent is %q: the hook's adjustment did not reach it", got)
	}
}
